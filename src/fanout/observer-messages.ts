/**
 * The observer session's messages, sans-IO: reading the params of its requests, the answers to methods an
 * observer may not call, and the texts it sends on its own (heartbeat pings, telemetry).
 */
import { awpError, type RpcErrorObject } from '../protocol/errors.js';
import type { StreamEndpoint } from '../session/stream-endpoint.js';
import { MAX_OBSERVER_ITEMS, MAX_OBSERVER_NAME_CHARS } from '../session/session-store.js';
import { checkChannels, grantList, type ChannelRequest, type GrantSource } from './observer-grants.js';
import type { Subscriber } from './subscriber.js';

const HB_ID = 'awp-edge:hb:';

/**
 * The `subscribe` / `channels` list of a request: entries `{channel, rate_hz?}` with a string channel
 * and a positive finite rate, or what is wrong with it (for -32602). Absent: none.
 */
function channelRequests(list: unknown): ChannelRequest[] | string {
  if (list === undefined) return [];
  if (!Array.isArray(list)) return 'the channel list must be an array';
  if (list.length > MAX_OBSERVER_ITEMS) return `at most ${MAX_OBSERVER_ITEMS} channels in one request`;
  const out: ChannelRequest[] = [];
  for (const r of list as unknown[]) {
    if (typeof r !== 'object' || r === null || Array.isArray(r))
      return 'each channel entry must be an object';
    const { channel, rate_hz } = r as { channel?: unknown; rate_hz?: unknown };
    if (typeof channel !== 'string') return 'each channel entry needs a string channel';
    if (
      rate_hz !== undefined &&
      rate_hz !== null &&
      !(typeof rate_hz === 'number' && rate_hz > 0 && Number.isFinite(rate_hz))
    )
      return 'rate_hz must be a positive number';
    out.push({ channel, rate_hz: typeof rate_hz === 'number' ? rate_hz : null });
  }
  return out;
}

/** A request's channel list, read and checked against the hub (-32602, then 2007 / 4001), or the error. */
export function requestedChannels(
  list: unknown,
  hub: GrantSource,
  modalities: readonly string[],
): ChannelRequest[] | RpcErrorObject {
  const requested = channelRequests(list);
  if (typeof requested === 'string') return invalidParams(requested);
  return checkChannels(requested, hub, modalities) ?? requested;
}

/** The `channels` of `obs.unsubscribe`: declared channel names, or the error. */
export function unsubscribeNames(list: unknown, hub: GrantSource): string[] | RpcErrorObject {
  const names = Array.isArray(list) ? (list as unknown[]) : [];
  if (names.length > MAX_OBSERVER_ITEMS)
    return invalidParams(`at most ${MAX_OBSERVER_ITEMS} channels in one request`);
  for (const n of names) {
    if (typeof n !== 'string') return invalidParams('channels must be channel names');
    if (hub.channelDecl(n) === undefined) return awpError('AWP_CHANNEL_UNKNOWN', `${n} is not declared`);
  }
  return names as string[];
}

/** What the agent's `initialize` declared it consumes and how fast (AWP-AGM-001/002). */
export function agentDeclarations(initialize: Record<string, unknown> | undefined): {
  modalities: string[];
  maxObsRateHz: number | undefined;
} {
  const declared = Array.isArray(initialize?.consumes_modalities)
    ? (initialize.consumes_modalities as unknown[])
    : [];
  // Each channel request looks its modality up here: a set, of names a record can hold.
  const modalities = new Set<string>();
  for (const m of declared) {
    if (modalities.size >= MAX_OBSERVER_ITEMS) break;
    if (typeof m === 'string' && m.length <= MAX_OBSERVER_NAME_CHARS) modalities.add(m);
  }
  const maxObsRateHz =
    typeof initialize?.max_obs_rate_hz === 'number' ? initialize.max_obs_rate_hz : undefined;
  return { modalities: [...modalities], maxObsRateHz };
}

/** The result of the observer's `session.open` / `session.resume`. */
export function readyResult(
  session: { readonly session_id: string; readonly token: string },
  f: { heartbeat_interval_ms: number; reconnect_window_ms: number; clock_anchor?: string; tick?: number },
  granted: ReturnType<typeof grantList>,
  stream_endpoints: StreamEndpoint[],
  resumed: boolean,
): Record<string, unknown> {
  return {
    session_id: session.session_id,
    session_token: session.token,
    reconnect_window_ms: f.reconnect_window_ms,
    heartbeat_interval_ms: f.heartbeat_interval_ms,
    granted: { channels: granted, action_types: [], admin: [], envelopes: [] },
    stream_endpoints,
    ...(f.clock_anchor !== undefined ? { clock_anchor: f.clock_anchor } : {}),
    ...(f.tick !== undefined ? { tick: f.tick } : {}),
    ...(resumed ? { safe_state: false } : {}),
  };
}

export function invalidParams(detail: string): RpcErrorObject {
  return { code: -32602, message: 'Invalid params', data: { retryable: false, detail } };
}

/** The error for a method an observer session does not serve. */
export function refusal(method: string): RpcErrorObject {
  switch (method) {
    case 'session.open':
    case 'session.resume':
      return awpError('AWP_SESSION_EXISTS', 'this connection already carries a session');
    case 'action.submit':
    case 'world.snapshot':
    case 'world.restore':
    case 'world.reset':
    case 'session.transfer':
    case 'task.update':
      return awpError('AWP_FORBIDDEN', 'observer sessions cannot act (AWP-EMB-004)');
    case 'world.tick':
      return awpError('AWP_TICK_NOT_AUTHORIZED', 'observer sessions have no tick authority');
    case 'action.cancel':
    case 'action.status':
      return awpError('AWP_ACTION_UNKNOWN', 'observer sessions have no actions');
    default:
      return { code: -32601, message: 'Method not found', data: { detail: method } };
  }
}

/** The world did not grant the channels an observer's `session.open` or `obs.subscribe` needs. */
export function notGranted(request: 'open' | 'subscribe'): RpcErrorObject {
  return request === 'open'
    ? awpError('AWP_EMBODIMENT_UNAVAILABLE', {
        detail: 'the world did not grant the channels',
        retryable: true,
      })
    : awpError('AWP_CHANNEL_UNKNOWN', 'the world did not grant the channel');
}

/** The edge's own heartbeat ping; its id never collides with the observer's requests. */
export function heartbeatPing(now: number, origin_ns: number): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    id: `${HB_ID}${Math.round(now)}`,
    method: 'ping',
    params: { origin_ns },
  });
}

/** session.telemetry over what this observer got in the window (AWP-TIM-006). */
export function telemetryText(
  window_ms: number,
  taken: ReturnType<Subscriber['takeTelemetry']> | undefined,
): string {
  const channels: Record<string, unknown> = {};
  for (const [id, stats] of taken?.channels ?? []) {
    if (stats !== undefined) channels[String(id)] = stats;
  }
  // Over every observation frame sent in the window, all channels together (AWP-TIM-006).
  const all = taken?.overall;
  return JSON.stringify({
    jsonrpc: '2.0',
    method: 'session.telemetry',
    params: { window_ms, ...(all !== undefined ? { observation_latency_ns: all, channels } : {}) },
  });
}
