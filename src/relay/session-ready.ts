/**
 * A world's `session.ready` (the result of session.open and session.resume) as the relay takes it
 * (sans-IO): the session it describes, what the edge adopts from it (the world's stream endpoints,
 * granted channels and envelopes), and the same result rewritten for the agent with the edge's own
 * token and endpoints: the world's token and URLs never reach the agent (AWP-SEC-003).
 */
import { isCount } from '../protocol/integers.js';
import type { JsonRpcId } from '../protocol/jsonrpc.js';
import { limitersFor } from '../policy/admission.js';
import type { RelaySessionRecord } from '../session/session-store.js';
import type { StreamEndpoint } from '../session/stream-endpoint.js';
import { grantedChannels, type ManifestChannels } from './channels.js';
import type { FrameRoute, RelayRoute } from './relay-effects.js';
import type { RelaySession } from './relay-session.js';

export type SessionReady = Record<string, unknown>;

/** The session a session.open result opens, or null when it is not a session.ready (nothing to hold). */
export function recordFromReady(
  ready: SessionReady,
  route: RelayRoute,
  mode: 'lockstep' | 'streaming',
): RelaySessionRecord | null {
  const upstreamToken = ready.session_token;
  if (typeof upstreamToken !== 'string' || typeof ready.session_id !== 'string') return null;
  return {
    edge_token: route.mintToken(),
    route: route.name,
    upstream_token: upstreamToken,
    session_id: ready.session_id,
    mode,
    // A window that is not a count (negative, fractional, 1e400) is taken as none given: the registry keeps
    // the session its default window, and the store holds only counts.
    reconnect_window_ms: isCount(ready.reconnect_window_ms) ? ready.reconnect_window_ms : 0,
    heartbeat_interval_ms: numberOr(ready.heartbeat_interval_ms, 0),
    agent_ack: 0,
    suspended_at_ms: null,
  };
}

/** What the edge keeps of a session.ready: the world's endpoints, the granted channels and envelopes. */
export function adoptReady(
  session: RelaySession,
  ready: SessionReady,
  manifest: ManifestChannels | null,
): void {
  session.upstreamEndpoints = Array.isArray(ready.stream_endpoints)
    ? (ready.stream_endpoints as unknown[]).filter(isEndpoint)
    : [];
  adoptGrant(session, manifest, ready.granted);
  session.admission.limiters = limitersFor((ready.granted as { envelopes?: unknown } | undefined)?.envelopes);
}

/** The channels a grant (session.ready, obs.subscribe/unsubscribe results) gives the session. */
export function adoptGrant(session: RelaySession, manifest: ManifestChannels | null, granted: unknown): void {
  if (manifest !== null) session.channels = grantedChannels(manifest, granted);
}

/** The session.ready the agent sees: the edge's token and stream endpoints in place of the world's. */
export function rewriteReady(
  id: JsonRpcId,
  ready: SessionReady,
  session: RelaySession,
  route: RelayRoute,
): string {
  const result = {
    ...ready,
    session_token: session.token,
    stream_endpoints: route.edgeEndpoints(session.upstreamEndpoints),
  };
  return JSON.stringify({ jsonrpc: '2.0', id, result });
}

/** How an inline frame (`obs.frame`, `cmd.frame` params) of the session is scheduled and labelled. */
export function frameRoute(params: unknown, session: RelaySession | null): FrameRoute | undefined {
  const p = params as { channel_id?: unknown; ts_mono_ns?: unknown; ts_send_ns?: unknown } | undefined;
  const id = p?.channel_id;
  if (typeof id !== 'number' || session === null) return undefined;
  // Only streaming latest-wins frames may be replaced; reliable and per-tick frames keep their
  // place among control messages (AWP-TIM-003, AWP-TRN-009).
  return {
    channel_id: id,
    latest_wins: session.latestWins(id),
    channel: session.channels.get(id)?.name ?? 'unknown',
    ts_mono_ns: typeof p?.ts_mono_ns === 'number' ? p.ts_mono_ns : 0,
    ts_send_ns: typeof p?.ts_send_ns === 'number' ? p.ts_send_ns : undefined,
    rate_hz: session.channels.get(id)?.rate_hz ?? null,
  };
}

function isEndpoint(e: unknown): e is StreamEndpoint {
  return typeof e === 'object' && e !== null && typeof (e as { binding?: unknown }).binding === 'string';
}

function numberOr(v: unknown, fallback: number): number {
  return typeof v === 'number' ? v : fallback;
}
