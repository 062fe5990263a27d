/**
 * Observation frames and stream connections: grants and rates, keyframes and deltas, resync, the inline and
 * `ws` bindings, and stream loss (spec/transport/frames, stream-negotiation).
 */
import { FrameError, decodeFrame } from '../protocol/frame.js';
import type { ChannelGrant, Session } from './session.js';
import { closeSession, emitFrame, reportDegraded } from './transitions.js';
import type { ConnId } from './types.js';
import { S } from './types.js';
import type { WorldState } from './world-state.js';

/** Granted rate: never above the declared rate, the request, or the agent's max_obs_rate_hz (AWP-NEG-003, AGM-002). */
export function rateFor(w: WorldState, channel: string, requested?: number, cap?: number): number | null {
  const declared = w.channels.get(channel)!.rate_hz;
  if (declared === null) return null; // per-tick lockstep channel
  return Math.min(declared, requested ?? Infinity, cap ?? Infinity);
}

export function grantChannel(
  w: WorldState,
  s: Session,
  name: string,
  requested?: number,
  cap?: number,
): ChannelGrant {
  const g: ChannelGrant = {
    name,
    channel_id: s.nextChannelId,
    rate_hz: rateFor(w, name, requested, cap),
    lossClass: w.channels.get(name)!.loss_class,
    seq: 0,
    nextDueNs: w.now,
    resync: false,
    sinceKeyframe: 0,
    lastState: null,
  };
  s.nextChannelId += 1;
  s.grants.set(name, g);
  return g;
}

/** Streaming: each rate-driven channel's frame when due (AWP-TIM-005), and stream-loss degradation (AWP-SAF-009). */
export function streamFrames(w: WorldState, s: Session): void {
  for (const g of s.grants.values()) {
    if (g.rate_hz === null || w.now < g.nextDueNs) continue;
    const period = Math.round(S / g.rate_hz);
    g.nextDueNs = Math.max(g.nextDueNs + period, w.now - period); // no burst after a stall
    emitFrame(w, s, g);
  }
  if (s.streamLostNs !== null && !s.degradedReported) reportDegraded(w, s, s.streamLostNs);
}

/** A stream connection presenting a session token: every channel of the session moves to it (AWP-TRN-012). */
export function attachStream(w: WorldState, conn: ConnId, token: string): void {
  const s = w.tokens.get(token);
  if (s === undefined || !w.streamTokenValid(token)) {
    w.emit({
      kind: 'close',
      conn,
      code: 1008,
      reason: 'no session with a live control connection for this token',
    });
    return;
  }
  if (s.streamConn !== null) {
    w.emit({ kind: 'close', conn: s.streamConn, code: 1000, reason: 'replaced by a new stream connection' });
    w.streams.delete(s.streamConn);
  }
  w.streams.set(conn, s);
  s.streamConn = conn;
  s.streamLostNs = null;
  s.degradedReported = false;
  for (const g of s.grants.values()) {
    g.resync = true; // the first frame per channel on a new stream connection (AWP-TRN-010/012)
    emitFrame(w, s, g);
  }
}

/** Agent -> world frames: validated (AWP-DAT-010); this world has no command channels, so they are discarded. */
export function receiveStreamBinary(w: WorldState, conn: ConnId, data: Uint8Array): void {
  try {
    decodeFrame(data);
  } catch (err) {
    const code = err instanceof FrameError ? err.code : 'AWP_MALFORMED';
    w.emit({ kind: 'close', conn, code: 1002, reason: code });
    const s = w.streams.get(conn);
    streamLost(w, conn);
    if (code === 'AWP_INTEGER_RANGE' && s !== undefined && s.closingReason === null && w.sessions.has(s.id)) {
      closeSession(w, s, 'protocol_error', true); // AWP-CTL-009 ends the session
    }
  }
}

export function streamLost(w: WorldState, conn: ConnId): void {
  const s = w.streams.get(conn);
  w.streams.delete(conn);
  if (s?.streamConn !== conn) return;
  s.streamConn = null;
  // Its channels wait for a new stream connection while control stays up (AWP-TRN-010).
  if (s.conn !== null && w.sessions.has(s.id)) s.streamLostNs = w.now;
}
