import { describe, expect, it } from 'vitest';
import { createArmWorld } from '../../src/demo/create.js';
import type { ArmOptions } from '../../src/demo/config.js';
import type { JsonObject, Output } from '../../src/demo/types.js';
import { Harness, MS, closes, counterRandom, labels, messages, notifications, sequenced } from './harness.js';

const POSE = (x: number, y: number, z: number): JsonObject => ({
  pose: { frame: 'base', p_m: [x, y, z], q: [0, 0, 0, 1] },
});
const SLOW = { ...POSE(0.4, 0.1, 0.3), max_velocity_mps: 0.05 }; // ~9 s: outlives every timer below

function arm(opts: ArmOptions = {}): Harness {
  return new Harness(
    createArmWorld(
      { cameraBytes: 256, heartbeatIntervalMs: 1000, reconnectWindowMs: 10_000, ...opts },
      { random: counterRandom() },
    ),
  );
}

function openArm(h: Harness, conn = 1): JsonObject {
  return h.open(conn, { embodiment: 'arm_01', mode: 'streaming', subscribe: [{ channel: 'proprio' }] });
}

/** Answer every world ping in `outs` as an agent's transport would (a response: not agent-originated). */
function answerPings(h: Harness, conn: number, outs: Output[]): number {
  const pings = messages(outs, conn).filter((m) => m.method === 'ping' && m.id !== undefined);
  for (const p of pings) {
    h.text(conn, {
      jsonrpc: '2.0',
      id: p.id,
      result: { origin_ns: p.params!.origin_ns, receive_ns: 1, transmit_ns: 2 },
    });
  }
  return pings.length;
}

/** Let time pass in small steps, answering pings on `conn`; returns how many pings were answered. */
function passAnswering(h: Harness, conn: number, ns: number): number {
  let answered = 0;
  for (let t = 0; t < ns; t += 10 * MS) answered += answerPings(h, conn, h.advance(10 * MS));
  return answered;
}

describe('arm world: liveness, watchdog and safe state', () => {
  it('AWP-SAF-001 the world pings every heartbeat_interval_ms on the session clock', () => {
    const h = arm();
    openArm(h);
    const outs = h.advance(3500 * MS);
    const pings = messages(outs, 1).filter((m) => m.method === 'ping');
    expect(pings.map((p) => p.id)).toEqual(['w1', 'w2', 'w3']);
    expect(pings.map((p) => p.params!.origin_ns)).toEqual([1000 * MS, 2000 * MS, 3000 * MS]);
  });

  it('AWP-SAF-003 pongs answering world pings do not hold off the watchdog; safe state at watchdog_ms on a healthy connection', () => {
    const h = arm();
    openArm(h);
    const submitted = h.now;
    h.call(1, 'action.submit', { action_id: 'a-7', type: 'move_to_pose', params: SLOW });
    expect(passAnswering(h, 1, 1990 * MS)).toBeGreaterThan(0);
    expect(notifications(h.log, 'world.event')).toEqual([]);
    passAnswering(h, 1, 100 * MS);
    const tail = sequenced(h.log).slice(-2);
    expect(tail).toEqual([
      expect.objectContaining({ action_id: 'a-7', state: 'failed', reason: 'connection_lost' }),
      expect.objectContaining({
        event: 'safe_state_entered',
        detail: { behavior: 'safe_stop', embodiment: 'arm_01' },
      }),
    ]);
    const at = tail[0]!.ts_mono_ns as number;
    expect(at - submitted).toBeGreaterThan(2000 * MS);
    expect(at - submitted).toBeLessThanOrEqual(2000 * MS + 10 * MS);
    expect((tail[0]!.aborted_at_progress as number) > 0).toBe(true);
    // AWP-SAF-002: answered heartbeats keep the session Active
    passAnswering(h, 1, 5000 * MS);
    expect(sequenced(h.log).filter((p) => p.state === 'suspended')).toEqual([]);
  });

  it('AWP-SAF-005 the agent’s own pings (or any request) hold the watchdog off', () => {
    const h = arm();
    openArm(h);
    h.call(1, 'action.submit', { action_id: 'a-7', type: 'move_to_pose', params: SLOW });
    for (let i = 0; i < 8; i++) {
      passAnswering(h, 1, 900 * MS);
      h.call(1, 'ping', { origin_ns: i });
    }
    expect(notifications(h.log, 'world.event')).toEqual([]);
    expect(notifications(h.log, 'action.status').at(-1)).toMatchObject({
      action_id: 'a-7',
      state: 'executing',
    });
  });

  it('AWP-SAF-008 after safe state the next action to execute emits safe_state_exited first', () => {
    const h = arm();
    openArm(h);
    passAnswering(h, 1, 2100 * MS); // idle and quiet: the watchdog still fires
    expect(notifications(h.log, 'world.event').map((e) => e.event)).toEqual(['safe_state_entered']);
    const { outs } = h.request(1, 'action.submit', {
      action_id: 'a-12',
      type: 'move_to_pose',
      params: POSE(0.1, 0, 0.4),
    });
    expect(labels(outs)).toEqual(['result', 'world.event', 'action.status']);
    expect(sequenced(outs)).toEqual([
      expect.objectContaining({ event: 'safe_state_exited', detail: { embodiment: 'arm_01' } }),
      expect.objectContaining({ action_id: 'a-12', state: 'executing' }),
    ]);
  });

  it('AWP-SAF-002 three silent heartbeat intervals: the connection is closed and the session suspended', () => {
    const h = arm({ watchdogMs: 5000 });
    openArm(h);
    const outs = h.advance(2990 * MS);
    expect(closes(outs)).toEqual([]);
    const more = h.advance(20 * MS);
    expect(closes(more)).toEqual([{ kind: 'close', conn: 1, code: 1001, reason: 'heartbeat lost' }]);
    const s = [...h.world.sessions.values()][0]!;
    expect(s.state).toBe('suspended');
    // frames stop with the connection
    expect(h.advance(100 * MS).filter((o) => o.kind === 'frame')).toEqual([]);
  });

  it('AWP-CTL-008 resume replays every missed status_seq in order, then live traffic (the disconnect trace)', () => {
    const h = arm({ reconnectWindowMs: 30_000 });
    const ready = openArm(h);
    h.call(1, 'action.submit', { action_id: 'a-7', type: 'move_to_pose', params: SLOW }); // 3 accepted, 4 executing
    h.advance(200 * MS);
    h.call(1, 'ping', { origin_ns: 5, last_status_seq: 4 });
    h.disconnect(1); // 5+: suspended, then (watchdog) failed + safe_state_entered
    h.advance(3000 * MS);
    const { response, outs } = h.resume(2, ready.session_token as string, 4);
    const replayTo = (response.result as { replay_to_status_seq: number }).replay_to_status_seq;
    expect(response.result).toMatchObject({
      session_id: ready.session_id,
      session_token: ready.session_token,
      safe_state: true,
      granted: ready.granted,
    });
    const seen = sequenced(outs);
    // every missed item, in order and gapless, the replay ending at replay_to_status_seq; then live
    expect(seen.map((p) => p.status_seq)).toEqual(Array.from({ length: replayTo - 3 }, (_, i) => i + 5));
    expect(seen.map((p) => p.state ?? p.event)).toEqual([
      'suspended',
      ...seen.slice(1, -3).map(() => 'executing'), // progress while suspended: execution continues (AWP-SES-004)
      'failed',
      'safe_state_entered',
      'active',
    ]);
    expect(seen[0]).toMatchObject({ reason: 'connection_lost' });
    expect(seen.at(-3)).toMatchObject({ action_id: 'a-7', reason: 'connection_lost' });
    expect(seen.at(-1)).toMatchObject({ status_seq: replayTo + 1, reason: 'resumed' });
    expect(labels(outs)[0]).toBe('result');
    expect(
      labels(outs)
        .slice(1, seen.length + 1)
        .every((l) => l !== 'result' && !l.startsWith('frame')),
    ).toBe(true);
    // AWP-SAF-008: nothing resumes; a new intent is needed
    const { outs: next } = h.request(2, 'action.submit', {
      action_id: 'a-8',
      type: 'move_to_pose',
      params: POSE(0.1, 0, 0.4),
    });
    expect(sequenced(next).map((p) => p.event ?? p.state)).toEqual(['safe_state_exited', 'executing']);
  });

  it('AWP-SES-010 resume before the old loss is detected: old connection closed, connection_replaced, result-reported transitions replayed as action.status (the retry trace)', () => {
    const h = arm({ progressIntervalMs: 1000 });
    const ready = openArm(h);
    h.call(1, 'action.submit', { action_id: 'a-7', type: 'move_to_pose', params: SLOW }); // 3, 4
    h.advance(100 * MS);
    const submit = {
      action_id: 'a-8',
      type: 'move_to_pose',
      params: POSE(0.2, 0.3, 0.4),
      preempt: 'queue',
      deadline_ms: 8000,
    };
    const lost = h.call(1, 'action.submit', submit); // its result "never arrives"
    expect(lost).toMatchObject({ state: 'queued', status_seq: 5 });
    h.advance(500 * MS);
    const { response, outs } = h.resume(2, ready.session_token as string, 4);
    expect(closes(outs)).toEqual([{ kind: 'close', conn: 1, code: 1000, reason: 'connection_replaced' }]);
    expect(response.result).toMatchObject({ replay_to_status_seq: 6, safe_state: false });
    expect(sequenced(outs, 2)).toEqual([
      {
        method: 'action.status',
        action_id: 'a-8',
        state: 'queued',
        status_seq: 5,
        ts_mono_ns: lost.ts_mono_ns,
      },
      expect.objectContaining({ state: 'suspended', status_seq: 6, reason: 'connection_replaced' }),
      expect.objectContaining({ state: 'active', status_seq: 7, reason: 'resumed' }),
    ]);
    // the retry is idempotent; a different target under the same id conflicts (AWP-ACT-001)
    expect(h.call(2, 'action.submit', submit)).toEqual({
      action_id: 'a-8',
      state: 'queued',
      status_seq: 5,
      received_ts_mono_ns: lost.received_ts_mono_ns,
      ts_mono_ns: lost.ts_mono_ns,
    });
    const conflict = h.request(2, 'action.submit', { ...submit, params: POSE(0.2, 0.3, 0.5) });
    expect(conflict.response.error).toMatchObject({ code: 3004 });
    // the watchdog was unaffected: a-7 still executes
    expect(
      notifications(h.log, 'action.status')
        .filter((p) => p.action_id === 'a-7')
        .at(-1),
    ).toMatchObject({ state: 'executing' });
  });

  it('AWP-CTL-010 what a ping acknowledges is no longer retained; replay starts above the acknowledgement', () => {
    const h = arm();
    const ready = openArm(h);
    h.call(1, 'action.submit', { action_id: 'a', type: 'stop', params: {} }); // 3 accepted, 4 executing, 5 completed
    const s = [...h.world.sessions.values()][0]!;
    expect(s.retainedCount).toBe(5);
    h.call(1, 'ping', { origin_ns: 1, last_status_seq: 4 });
    expect(s.retainedCount).toBe(1);
    h.disconnect(1);
    const { outs } = h.resume(2, ready.session_token as string, 0);
    expect(sequenced(outs).map((p) => p.status_seq)).toEqual([5, 6, 7]); // 5 retained, 6 suspended, 7 resumed
  });

  it('AWP-SES-005 the reconnect window passes: safe state, closed (window_expired), the embodiment is free; resume is 2003, an unknown token 2005', () => {
    const h = arm({ reconnectWindowMs: 3000 });
    const ready = openArm(h);
    h.call(1, 'action.submit', { action_id: 'a', type: 'move_to_pose', params: SLOW });
    h.disconnect(1);
    h.advance(3100 * MS);
    expect(h.world.sessions.size).toBe(0);
    expect(h.world.bound.size).toBe(0);
    const expired = h.resume(2, ready.session_token as string, 0);
    expect(expired.response.error).toMatchObject({
      code: 2003,
      message: 'AWP_SESSION_EXPIRED',
      data: { retryable: false },
    });
    const unknown = h.request(2, 'session.resume', { session_token: 'x'.repeat(43), last_status_seq: 0 });
    expect(unknown.response.error).toMatchObject({ code: 2005, message: 'AWP_SESSION_UNKNOWN' });
    expect(h.call(2, 'session.open', { embodiment: 'arm_01', mode: 'streaming' })).toHaveProperty(
      'session_token',
    );
  });

  it('AWP-EVT-002 e-stop: event per embodiment, executing failed(e_stop), queued cancelled(e_stop), admission refused until release', () => {
    const h = arm();
    openArm(h);
    h.call(1, 'action.submit', { action_id: 'a-7', type: 'move_to_pose', params: SLOW });
    h.advance(200 * MS);
    h.call(1, 'action.submit', {
      action_id: 'a-8',
      type: 'move_to_pose',
      params: POSE(0.2, 0.3, 0.4),
      preempt: 'queue',
    });
    const outs = h.world.engageEstop(h.now);
    expect(sequenced(outs).map((p) => [p.event ?? p.action_id, p.state, p.reason])).toEqual([
      ['e_stop_engaged', undefined, undefined],
      ['a-7', 'failed', 'e_stop'],
      ['a-8', 'cancelled', 'e_stop'],
    ]);
    expect(sequenced(outs)[0]).toMatchObject({ detail: { embodiment: 'arm_01', source: 'operator' } });
    h.advance(150 * MS);
    const refused = h.request(1, 'action.submit', { action_id: 'a-9', type: 'stop', params: {} });
    expect(refused.response.error).toMatchObject({
      code: 3005,
      message: 'AWP_ESTOP_ACTIVE',
      data: { retryable: true },
    });
    expect(sequenced(h.world.releaseEstop(h.now))).toEqual([
      expect.objectContaining({ event: 'e_stop_released', detail: { embodiment: 'arm_01' } }),
    ]);
    expect(h.call(1, 'action.submit', { action_id: 'a-9', type: 'stop', params: {} })).toMatchObject({
      state: 'accepted',
    });
  });

  it('AWP-CTL-009 a 64-bit field above 2^53-1: 2006 to the request, session closed (protocol_error), close 1002 AWP_INTEGER_RANGE', () => {
    const h = arm();
    openArm(h);
    const outs = h.text(
      1,
      '{"jsonrpc":"2.0","id":9,"method":"ping","params":{"origin_ns":9007199254740993}}',
    );
    expect(labels(outs)).toEqual(['error', 'session.state', 'close:1002']);
    expect(messages(outs)[0]!.error).toMatchObject({ code: 2006, message: 'AWP_INTEGER_RANGE' });
    expect(sequenced(outs)).toEqual([expect.objectContaining({ state: 'closed', reason: 'protocol_error' })]);
    expect(closes(outs)).toEqual([{ kind: 'close', conn: 1, code: 1002, reason: 'AWP_INTEGER_RANGE' }]);
    expect(h.world.bound.size).toBe(0);
  });

  it('AWP-CTL-006 a batch is -32600; AWP-CTL-002 an unknown method is -32601; malformed params are AWP_MALFORMED', () => {
    const h = arm();
    openArm(h);
    const batch = messages(h.text(1, '[{"jsonrpc":"2.0","id":1,"method":"ping","params":{"origin_ns":1}}]'));
    expect(batch).toHaveLength(1);
    expect(batch[0]).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600 } });
    expect(h.request(1, 'world.teleport', {}).response.error).toMatchObject({ code: -32601 });
    expect(h.request(1, 'ping', { origin_ns: 'soon' }).response.error).toMatchObject({
      code: 1002,
      data: { retryable: false },
    });
    expect(h.request(1, 'world.tick', { expected_tick: 0 }).response.error).toMatchObject({ code: 2002 });
  });
});
