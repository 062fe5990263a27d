/**
 * Observation frames and stream connections: grants and rates, keyframes and deltas, resync, the inline and
 * `ws` bindings, and stream loss (spec/transport/frames, stream-negotiation).
 */
import { FLAG_KEYFRAME, FLAG_RESYNC, FrameError, decodeFrame } from '../protocol/frame.js';
import { closeSession } from './session-methods.js';
import type { ChannelGrant, Session } from './session.js';
import type { ConnId, JsonObject } from './types.js';
import { MS, S } from './types.js';
import type { DemoWorld } from './world.js';

/** Granted rate: never above the declared rate, the request, or the agent's max_obs_rate_hz (AWP-NEG-003, AGM-002). */
export function rateFor(w: DemoWorld, channel: string, requested?: number, cap?: number): number | null {
  const declared = w.channels.get(channel)!.rate_hz;
  if (declared === null) return null; // per-tick lockstep channel
  return Math.min(declared, requested ?? Infinity, cap ?? Infinity);
}

export function grantChannel(
  w: DemoWorld,
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

const encoder = new TextEncoder();

/** The top-level members of `next` that differ from `prev` (a delta frame's payload). */
function delta(prev: JsonObject, next: JsonObject): JsonObject {
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(next)) if (JSON.stringify(v) !== JSON.stringify(prev[k])) out[k] = v;
  for (const k of Object.keys(prev)) if (!(k in next)) out[k] = null;
  return out;
}

/**
 * The channel's next frame, to the stream connection if one is up, else inline. Nothing while the session has no
 * control connection, nor while its stream connection is down (AWP-TRN-010: not even inline).
 */
export function emitFrame(w: DemoWorld, s: Session, g: ChannelGrant): void {
  if (s.conn === null || (s.streamConn === null && s.streamLostNs !== null)) return;
  const decl = w.channels.get(g.name)!;
  const clock = w.clock();
  const observed = w.sim.observe(g.name, clock);
  let payload: Uint8Array;
  let keyframe = true;
  if (observed instanceof Uint8Array) {
    payload = observed;
  } else {
    const interval = decl.keyframe_interval;
    // Delta channels: a keyframe at subscription start, on resync, and every keyframe_interval (AWP-OBS-004).
    keyframe = interval === undefined || g.resync || g.lastState === null || g.sinceKeyframe + 1 >= interval;
    const body = keyframe || g.lastState === null ? observed : delta(g.lastState, observed);
    g.sinceKeyframe = keyframe ? 0 : g.sinceKeyframe + 1;
    g.lastState = observed;
    payload = encoder.encode(JSON.stringify(body));
  }
  const flags = (keyframe ? FLAG_KEYFRAME : 0) | (g.resync ? FLAG_KEYFRAME | FLAG_RESYNC : 0);
  g.resync = false;
  g.seq += 1;
  const frame = {
    channel_id: g.channel_id,
    seq: g.seq,
    ts_mono_ns: clock,
    flags,
    ...(w.lockstep ? lockstepStamps(w, clock) : { ts_send_ns: clock }), // ts_send_ns restamped at write (AWP-OBS-006)
    payload,
  };
  // Dropping the older pending frame is allowed in streaming only (AWP-DAT-002).
  const latestWins = !w.lockstep && g.lossClass === 'latest-wins';
  if (s.streamConn !== null) {
    w.emit({ kind: 'frame', conn: s.streamConn, session: s.id, binding: 'ws', latestWins, frame });
  } else {
    w.emit({ kind: 'frame', conn: s.conn, session: s.id, binding: 'inline', latestWins, frame });
  }
  w.activate(s);
}

/** `tick`, plus `ts_sim_ns` once a reset has made simulated time diverge from the session clock (AWP-CLK-003). */
function lockstepStamps(w: DemoWorld, clock: number): { tick: number; ts_sim_ns?: number } {
  const sim = w.tick * (w.sim.tickNs ?? MS);
  return sim === clock ? { tick: w.tick } : { tick: w.tick, ts_sim_ns: sim };
}

/** Streaming: each rate-driven channel's frame when due (AWP-TIM-005), and stream-loss degradation (AWP-SAF-009). */
export function streamFrames(w: DemoWorld, s: Session): void {
  for (const g of s.grants.values()) {
    if (g.rate_hz === null || w.now < g.nextDueNs) continue;
    const period = Math.round(S / g.rate_hz);
    g.nextDueNs = Math.max(g.nextDueNs + period, w.now - period); // no burst after a stall
    emitFrame(w, s, g);
  }
  if (s.streamLostNs !== null && !s.degradedReported) reportDegraded(w, s, s.streamLostNs);
}

/** `channel_degraded` for each reliable rate-driven channel undelivered for longer than its stale_after_ms. */
export function reportDegraded(w: DemoWorld, s: Session, sinceNs: number): void {
  let any = false;
  for (const g of s.grants.values()) {
    if (g.lossClass !== 'reliable' || g.rate_hz === null) continue;
    const stale = w.channels.get(g.name)!.stale_after_ms ?? (2 * 1000) / g.rate_hz;
    if (w.now - sinceNs > stale * MS) {
      w.event(s, 'channel_degraded', { channel: g.name, channel_id: g.channel_id });
      any = true;
    }
  }
  if (any) s.degradedReported = true;
}

/** A stream connection presenting a session token: every channel of the session moves to it (AWP-TRN-012). */
export function attachStream(w: DemoWorld, conn: ConnId, token: string): void {
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
export function receiveStreamBinary(w: DemoWorld, conn: ConnId, data: Uint8Array): void {
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

export function streamLost(w: DemoWorld, conn: ConnId): void {
  const s = w.streams.get(conn);
  w.streams.delete(conn);
  if (s?.streamConn !== conn) return;
  s.streamConn = null;
  // Its channels wait for a new stream connection while control stays up (AWP-TRN-010).
  if (s.conn !== null && w.sessions.has(s.id)) s.streamLostNs = w.now;
}

/** Close the session's stream connection; channels fall back to inline until one is attached (AWP-TRN-008). */
export function endStream(w: DemoWorld, s: Session, reason: string): void {
  if (s.streamConn !== null) {
    w.emit({ kind: 'close', conn: s.streamConn, code: 1000, reason });
    w.streams.delete(s.streamConn);
  }
  s.streamConn = null;
  s.streamLostNs = null;
}
