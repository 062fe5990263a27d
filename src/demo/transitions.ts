/**
 * The state transitions more than one handler module triggers: an action's terminal transition and status
 * reports, a frame's emission, stream end, channel degradation, safe state, suspension and closing. They live
 * here, below every handler module (actions, frames, liveness, reset, session methods), so that those import
 * this one and not each other.
 */
import { FLAG_KEYFRAME, FLAG_RESYNC } from '../protocol/frame.js';
import type { ActionRecord, ChannelGrant, Session } from './session.js';
import type { ActionState, JsonObject } from './types.js';
import { MS, isPreExecution, isTerminal } from './types.js';
import type { WorldState } from './world-state.js';

/** action.status params for `a` in its current state (without status_seq). */
export function statusParams(
  w: WorldState,
  a: { action_id: string; state: string },
  extra: JsonObject = {},
): JsonObject {
  const params: JsonObject = { action_id: a.action_id, state: a.state, ts_mono_ns: w.clock() };
  if (w.lockstep) params.tick = w.tick;
  for (const [k, v] of Object.entries(extra)) if (v !== undefined) params[k] = v;
  return params;
}

/** Notify the action's current state (a transition, or a progress report while executing). */
export function report(w: WorldState, s: Session, a: ActionRecord, extra: JsonObject = {}): void {
  a.status = w.sequenced(s, 'action.status', statusParams(w, a, extra));
}

export interface FinishOptions {
  readonly reason?: string;
  /** The action was moving: report `aborted_at_progress`. */
  readonly aborted?: boolean;
  readonly progress?: number;
}

/** A terminal transition, notified (AWP-LIF-001: each transition reported exactly once). */
export function finish(
  w: WorldState,
  s: Session,
  a: ActionRecord,
  state: ActionState,
  o: FinishOptions = {},
): void {
  a.state = state;
  a.abort = null;
  report(w, s, a, {
    reason: o.reason,
    progress: o.progress,
    aborted_at_progress: o.aborted === true ? round4(w.sim.progress()) : undefined,
  });
  if (isTerminal(state)) a.terminalNs = w.now;
  if (s.running.get(a.group) === a) s.running.delete(a.group);
  s.unqueue(a);
}

export function round4(x: number): number {
  return Math.round(x * 1e4) / 1e4;
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
export function emitFrame(w: WorldState, s: Session, g: ChannelGrant): void {
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
function lockstepStamps(w: WorldState, clock: number): { tick: number; ts_sim_ns?: number } {
  const sim = w.tick * (w.sim.tickNs ?? MS);
  return sim === clock ? { tick: w.tick } : { tick: w.tick, ts_sim_ns: sim };
}

/** `channel_degraded` for each reliable rate-driven channel undelivered for longer than its stale_after_ms. */
export function reportDegraded(w: WorldState, s: Session, sinceNs: number): void {
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

export function safeStatePolicy(w: WorldState): { behavior: string; watchdog_ms: number } | undefined {
  return (w.manifest.safety_policy as JsonObject).safe_state as
    { behavior: string; watchdog_ms: number } | undefined;
}

/**
 * AWP-SAF-004, in order: the behavior on the bound embodiment; executing actions fail (connection_lost),
 * pre-execution ones are cancelled (safe_state); then one safe_state_entered per embodiment.
 */
export function enterSafeState(w: WorldState, s: Session): void {
  if (s.embodiment === null) return;
  w.sim.stop();
  s.safeState = true;
  for (const a of [...s.actions.values()]) {
    if (a.state === 'executing' || a.state === 'cancelling') {
      finish(w, s, a, 'failed', { reason: 'connection_lost', aborted: true });
    } else if (isPreExecution(a.state)) {
      finish(w, s, a, 'cancelled', { reason: 'safe_state' });
    }
  }
  w.event(s, 'safe_state_entered', {
    behavior: safeStatePolicy(w)?.behavior ?? 'hold',
    embodiment: s.embodiment,
  });
}

/** Ready/Active -> Suspended (AWP-SES-003): stream connections close; the watchdog keeps running. */
export function suspend(w: WorldState, s: Session, reason: 'connection_lost' | 'connection_replaced'): void {
  endStream(w, s, 'session suspended');
  s.conn = null;
  s.suspendedNs = w.now;
  if (s.state !== 'closed') w.setState(s, 'suspended', reason);
}

/**
 * Start closing (AWP-SES-006): pre-execution actions cancelled, executing ones aborted through cancelling. The
 * session closes once every action is terminal. `immediate` (no time will pass: lockstep, a dropped or refused
 * connection) completes the aborts at once.
 */
export function closeSession(w: WorldState, s: Session, reason: string, immediate = false): void {
  s.closingReason = reason;
  for (const a of s.preExecution()) finish(w, s, a, 'cancelled', { reason: 'session_closed' });
  for (const a of [...s.running.values()]) {
    if (a.state === 'executing') {
      a.state = 'cancelling';
      a.abort = { terminal: 'cancelled', reason: 'session_closed', startedNs: w.now };
      a.status = w.sequenced(s, 'action.status', statusParams(w, a, { reason: 'session_closed' }));
      w.sim.stop();
    } else if (a.abort?.terminal === 'cancelled') {
      a.abort = { ...a.abort, reason: 'session_closed' }; // close outranks a cancel in progress (AWP-LIF-008)
    }
  }
  if (immediate || w.lockstep || s.conn === null) {
    for (const a of [...s.running.values()]) {
      if (a.abort !== null) finish(w, s, a, a.abort.terminal, { reason: a.abort.reason, aborted: true });
    }
  }
  if (s.running.size === 0) finalizeClose(w, s);
}

/** Closed: the last session.state, then the close results; the embodiment is released (AWP-SES-011, AWP-EMB-002). */
export function finalizeClose(w: WorldState, s: Session): void {
  w.setState(s, 'closed', s.closingReason ?? 'session_closed');
  endStream(w, s, 'session closed');
  for (const r of s.closeRequests) if (w.conns.has(r.conn)) w.reply(r.conn, r.id, {});
  s.closeRequests.length = 0;
  if (s.embodiment !== null && w.bound.get(s.embodiment) === s) w.bound.delete(s.embodiment);
  w.sessions.delete(s.id);
  w.tokens.delete(s.token);
  w.closedTokens.add(s.token);
  if (w.closedTokens.size > 10_000) w.closedTokens.delete(w.closedTokens.values().next().value!);
  if (s.conn !== null) {
    const c = w.conns.get(s.conn);
    if (c !== undefined) c.session = null;
  }
  s.conn = null;
}

/** Close the session's stream connection; channels fall back to inline until one is attached (AWP-TRN-008). */
export function endStream(w: WorldState, s: Session, reason: string): void {
  if (s.streamConn !== null) {
    w.emit({ kind: 'close', conn: s.streamConn, code: 1000, reason });
    w.streams.delete(s.streamConn);
  }
  s.streamConn = null;
  s.streamLostNs = null;
}
