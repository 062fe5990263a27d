/**
 * Session methods (spec/session/lifecycle): initialize, ping, session.open / resume / close, obs.subscribe /
 * unsubscribe. Suspension and closing, which other modules also trigger, are in transitions.ts.
 */
import type { JsonRpcId } from '../protocol/jsonrpc.js';
import { fail } from './failure.js';
import { grantChannel, rateFor } from './frames.js';
import { Session } from './session.js';
import { closeSession, emitFrame, suspend } from './transitions.js';
import type { JsonObject } from './types.js';
import type { ConnState, WorldState } from './world-state.js';

export function initialize(w: WorldState, c: ConnState, id: JsonRpcId, p: JsonObject): void {
  const versions = p.protocol_versions as string[];
  if (!versions.includes('0.1')) throw fail('AWP_VERSION_UNSUPPORTED', 'this world speaks 0.1');
  c.initialized = true;
  c.consumes = new Set(p.consumes_modalities as string[]);
  c.maxObsRateHz = p.max_obs_rate_hz as number | undefined;
  w.reply(c.id, id, w.manifest);
}

/** Pong stamped on the session clock (AWP-CTL-004); `last_status_seq` acknowledges (AWP-CTL-010). */
export function ping(w: WorldState, c: ConnState, id: JsonRpcId, p: JsonObject): void {
  const s = c.session;
  const stamp = w.clock();
  if (s !== null && typeof p.last_status_seq === 'number') s.acknowledge(p.last_status_seq);
  w.reply(c.id, id, { origin_ns: p.origin_ns, receive_ns: stamp, transmit_ns: stamp });
}

/** The channels a session may read: its embodiment's (every one for an observer), in consumed modalities (AWP-AGM-001). */
function readable(w: WorldState, embodiment: string | null, consumes: ReadonlySet<string>): Set<string> {
  const names = embodiment === null ? [...w.channels.keys()] : (w.embodimentChannels.get(embodiment) ?? []);
  return new Set(names.filter((n) => consumes.has(w.channels.get(n)?.modality ?? '')));
}

function endpoints(w: WorldState): JsonObject[] {
  const out: JsonObject[] = [];
  if (w.config.streamUrl !== undefined) {
    out.push({
      binding: 'ws',
      url: w.config.streamUrl,
      ...(w.config.maxFrameBytes !== undefined && { max_frame_bytes: w.config.maxFrameBytes }),
    });
  }
  out.push({ binding: 'inline' }); // always offered, last (AWP-TRN-004)
  return out;
}

function ready(w: WorldState, s: Session): JsonObject {
  const out: JsonObject = {
    session_id: s.id,
    session_token: s.token,
    reconnect_window_ms: w.config.reconnectWindowMs,
    heartbeat_interval_ms: w.config.heartbeatIntervalMs,
    granted: {
      channels: s.grantList(),
      action_types: s.actionTypes,
      admin: s.admin,
      envelopes: s.embodiment === null ? [] : w.sim.envelopes(s.embodiment),
    },
    stream_endpoints: endpoints(w),
    ...(w.sim.frameTree !== undefined && { frame_tree: w.sim.frameTree }),
    clock_anchor: w.config.clockAnchor,
  };
  return out;
}

export function sessionOpen(w: WorldState, c: ConnState, id: JsonRpcId, p: JsonObject): void {
  if (c.session !== null) throw fail('AWP_SESSION_EXISTS'); // AWP-CTL-007
  if (p.mode !== w.sim.mode) throw fail('AWP_TIME_MODEL_UNSUPPORTED', `this world runs ${w.sim.mode}`);
  if (p.takeover === true) throw fail('AWP_EMBODIMENT_UNAVAILABLE', 'this world offers no transfer');
  if (p.embodiments !== undefined) throw fail('AWP_EMBODIMENT_UNAVAILABLE', 'no multi_bind_group here');
  const embodiment = (p.embodiment as string | undefined) ?? null;
  if (embodiment !== null) {
    if (!w.embodimentChannels.has(embodiment))
      throw fail('AWP_EMBODIMENT_UNAVAILABLE', `no embodiment ${embodiment}`);
    if (w.bound.has(embodiment)) throw fail('AWP_EMBODIMENT_UNAVAILABLE', `${embodiment} is bound elsewhere`);
  }
  const subscribe = (p.subscribe as { channel: string; rate_hz?: number }[] | undefined) ?? [];
  for (const sub of subscribe) {
    if (!w.channels.has(sub.channel)) throw fail('AWP_CHANNEL_UNKNOWN', sub.channel);
  }
  // Action types are granted whole or not at all (AWP-NEG-003); observers get none (AWP-EMB-004).
  const offered = embodiment === null ? [] : (w.embodimentTypes.get(embodiment) ?? []);
  const wanted = p.action_types as string[] | undefined;
  const actionTypes = wanted === undefined ? [...offered] : offered.filter((t) => wanted.includes(t));
  // The one bound session of a lockstep any_session world may hold `tick` (AWP-TIM-012); `reset`, where the world
  // has it, goes to at most one session at a time (AWP-PRM-005). Nothing else is granted.
  const admin = ((p.admin as string[] | undefined) ?? []).filter((op) => {
    if (op === 'tick') return w.lockstep && embodiment !== null;
    if (op === 'reset')
      return w.sim.reset !== undefined && ![...w.sessions.values()].some((o) => o.admin.includes('reset'));
    return false;
  });

  const s = new Session(
    w.nextSessionId(),
    w.newToken(),
    w.sim.mode,
    embodiment,
    actionTypes,
    admin,
    c.id,
    w.now,
  );
  const canRead = readable(w, embodiment, c.consumes);
  for (const sub of subscribe) {
    if (!canRead.has(sub.channel)) continue; // not granted: session.ready enumerates exactly what is (AWP-NEG-001)
    const existing = s.grants.get(sub.channel);
    if (existing !== undefined) existing.rate_hz = rateFor(w, sub.channel, sub.rate_hz, c.maxObsRateHz);
    else grantChannel(w, s, sub.channel, sub.rate_hz, c.maxObsRateHz);
  }
  w.sessions.set(s.id, s);
  w.tokens.set(s.token, s);
  if (embodiment !== null) w.bound.set(embodiment, s);
  c.session = s;
  c.lastRxNs = w.now; // heartbeat duties start at session.ready (AWP-SES-012)
  c.lastPingNs = w.now;

  const result = ready(w, s);
  if (w.lockstep) result.tick = w.tick;
  w.reply(c.id, id, result);
  w.setState(s, 'ready', 'opened');
  for (const g of s.grants.values()) emitFrame(w, s, g); // current observation (AWP-TIM-009, AWP-OBS-005)
}

export function sessionResume(w: WorldState, c: ConnState, id: JsonRpcId, p: JsonObject): void {
  if (c.session !== null) throw fail('AWP_SESSION_EXISTS');
  const token = p.session_token as string;
  const s = w.tokens.get(token);
  if (s === undefined) {
    if (w.closedTokens.has(token)) throw fail('AWP_SESSION_EXPIRED', 'the session has closed');
    throw fail('AWP_SESSION_UNKNOWN', 'treat the session as closed (AWP-SES-008)');
  }
  if (s.closingReason !== null) throw fail('AWP_SESSION_EXPIRED', 'the session is closing');
  if (s.conn !== null) {
    // The old connection's loss is not detected yet: replace it (AWP-SES-010). The watchdog is unaffected.
    const old = w.conns.get(s.conn);
    w.emit({ kind: 'close', conn: s.conn, code: 1000, reason: 'connection_replaced' });
    if (old !== undefined) {
      old.session = null;
      w.conns.delete(old.id);
    }
    suspend(w, s, 'connection_replaced');
  }
  const replayTo = s.statusSeq;
  const last = p.last_status_seq as number;
  s.conn = c.id;
  s.suspendedNs = null;
  s.degradedReported = false;
  s.lastAgentNs = w.now; // session.resume is a message the agent originated (AWP-SAF-003)
  s.acknowledge(last);
  c.session = s;
  c.lastRxNs = w.now;
  c.lastPingNs = w.now;
  const canRead = readable(w, s.embodiment, c.consumes);
  for (const name of [...s.grants.keys()]) if (!canRead.has(name)) s.grants.delete(name);
  for (const g of s.grants.values()) {
    // Reliable channels restart from a keyframe (AWP-TRN-008); in lockstep every per-tick channel (AWP-TIM-009).
    g.resync = g.lossClass === 'reliable' || (w.lockstep && g.rate_hz === null);
  }
  const result = ready(w, s);
  result.replay_to_status_seq = replayTo;
  result.safe_state = s.safeState;
  if (w.lockstep) result.tick = w.tick;
  w.reply(c.id, id, result);
  for (const n of s.replayAfter(last)) w.send(c.id, { jsonrpc: '2.0', method: n.method, params: n.params });
  w.setState(s, 'active', 'resumed');
  if (w.lockstep) for (const g of s.grants.values()) emitFrame(w, s, g);
}

export function sessionClose(w: WorldState, c: ConnState, id: JsonRpcId): void {
  const s = c.session!;
  s.closeRequests.push({ conn: c.id, id }); // a repeated close is answered with the first (AWP-SES-011)
  if (s.closingReason === null) closeSession(w, s, 'session_closed');
}

export function obsSubscribe(w: WorldState, c: ConnState, id: JsonRpcId, p: JsonObject): void {
  const s = c.session!;
  const subs = p.channels as { channel: string; rate_hz?: number }[];
  const canRead = readable(w, s.embodiment, c.consumes);
  for (const sub of subs) {
    if (!w.channels.has(sub.channel)) throw fail('AWP_CHANNEL_UNKNOWN', sub.channel);
    if (!canRead.has(sub.channel))
      throw fail('AWP_FORBIDDEN', `${sub.channel} is not readable by this session`);
  }
  const added = [];
  for (const sub of subs) {
    const g = s.grants.get(sub.channel);
    if (g === undefined) added.push(grantChannel(w, s, sub.channel, sub.rate_hz, c.maxObsRateHz));
    else if (g.rate_hz !== null) g.rate_hz = rateFor(w, sub.channel, sub.rate_hz, c.maxObsRateHz);
  }
  w.reply(c.id, id, { granted: s.grantList() });
  for (const g of added) emitFrame(w, s, g); // a current snapshot on each new channel (AWP-OBS-005, AWP-TIM-009)
}

export function obsUnsubscribe(w: WorldState, c: ConnState, id: JsonRpcId, p: JsonObject): void {
  const s = c.session!;
  const names = p.channels as string[];
  for (const name of names) if (!w.channels.has(name)) throw fail('AWP_CHANNEL_UNKNOWN', name);
  for (const name of names) s.grants.delete(name);
  w.reply(c.id, id, { granted: s.grantList() });
}
