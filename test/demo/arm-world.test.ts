import { describe, expect, it } from 'vitest';
import { createArmWorld } from '../../src/demo/create.js';
import type { ArmOptions } from '../../src/demo/config.js';
import type { JsonObject } from '../../src/demo/types.js';
import { Harness, MS, closes, counterRandom, labels, messages, notifications, sequenced } from './harness.js';

const POSE = (x: number, y: number, z: number): JsonObject => ({
  pose: { frame: 'base', p_m: [x, y, z], q: [0, 0, 0, 1] },
});

function arm(opts: ArmOptions = {}): Harness {
  return new Harness(createArmWorld({ cameraBytes: 512, ...opts }, { random: counterRandom() }));
}

function openArm(h: Harness, conn = 1, subscribe: JsonObject[] = [{ channel: 'proprio' }]): JsonObject {
  return h.open(conn, { embodiment: 'arm_01', mode: 'streaming', subscribe });
}

describe('arm world (streaming): sessions and actions', () => {
  it('AWP-NEG-001 session.ready enumerates exactly the grants: rates capped, unreadable channels left out', () => {
    const h = arm();
    const ready = h.open(
      1,
      {
        embodiment: 'arm_01',
        mode: 'streaming',
        subscribe: [
          { channel: 'proprio', rate_hz: 500 },
          { channel: 'camera', rate_hz: 15 },
          { channel: 'state' },
        ],
      },
      ['proprio/json', 'text/event+json'], // no image/raw: the camera is not readable (AWP-AGM-001)
    );
    expect(ready.granted).toEqual({
      channels: [
        { channel: 'proprio', rate_hz: 100, channel_id: 1 },
        { channel: 'state', rate_hz: 10, channel_id: 2 },
      ],
      action_types: ['move_to_pose', 'stop'],
      admin: [],
      envelopes: [
        expect.objectContaining({ embodiment: 'arm_01', max_action_rate_hz: 10, on_violation: 'reject' }),
      ],
    });
    expect(ready.stream_endpoints).toEqual([{ binding: 'inline' }]);
    expect(ready.frame_tree).toBeDefined();
    expect(typeof ready.clock_anchor).toBe('string');
  });

  it('AWP-SES-002 ready, then the first observations, then active (first_activity)', () => {
    const h = arm();
    openArm(h);
    expect(labels(h.log, 1).slice(-4)).toEqual(['result', 'session.state', 'frame:1@1', 'session.state']);
    expect(sequenced(h.log).map((p) => [p.status_seq, p.state, p.reason])).toEqual([
      [1, 'ready', 'opened'],
      [2, 'active', 'first_activity'],
    ]);
  });

  it('AWP-SEC-003 session tokens are 256-bit unpadded base64url, one per session; AWP-CTL-007 a second open on a connection is 2004', () => {
    const h = arm();
    const a = openArm(h, 1);
    const b = h.open(2, { mode: 'streaming' });
    for (const t of [a.session_token, b.session_token] as string[]) expect(t).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(a.session_token).not.toBe(b.session_token);
    expect(a.session_id).not.toBe(b.session_id);
    expect(h.request(1, 'session.open', { mode: 'streaming' }).response.error).toMatchObject({
      code: 2004,
      message: 'AWP_SESSION_EXISTS',
    });
  });

  it('AWP-LIF-003 an extended move: accepted in the result, executing, progress at least once a second, completed at the goal', () => {
    const h = arm();
    openArm(h);
    h.advance(20 * MS);
    const { outs } = h.request(1, 'action.submit', {
      action_id: 'a-7',
      type: 'move_to_pose',
      params: POSE(0.3, 0, 0.4),
      preempt: 'replace',
    });
    expect(messages(outs, 1)[0]!.result).toMatchObject({
      action_id: 'a-7',
      state: 'accepted',
      status_seq: 3,
    });
    expect(notifications(outs, 'action.status')).toEqual([
      expect.objectContaining({ state: 'executing', status_seq: 4, progress: 0 }),
    ]);
    h.advance(3000 * MS);
    const statuses = notifications(h.log, 'action.status');
    const done = statuses.findIndex((p) => p.state === 'completed');
    expect(done).toBeGreaterThan(0);
    expect(statuses[done]).toMatchObject({ action_id: 'a-7', progress: 1 });
    const progress = statuses.slice(0, done).filter((p) => p.state === 'executing');
    const stamps = progress.map((p) => p.ts_mono_ns as number);
    for (let i = 1; i < stamps.length; i++)
      expect(stamps[i]! - stamps[i - 1]!).toBeLessThanOrEqual(1000 * MS);
    expect(progress.map((p) => p.progress as number)).toEqual(
      [...progress.map((p) => p.progress as number)].sort((a, b) => a - b),
    );
    // status_seq is gapless across statuses, events and session states (AWP-CTL-008)
    const seqs = [3, ...sequenced(h.log).map((p) => p.status_seq as number)].sort((a, b) => a - b);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    const last = h.frames(h.log, 1).at(-1)!.payloadJson as { p_m: number[] };
    expect(last.p_m).toEqual([0.3, 0, 0.4]);
  });

  it('AWP-LIF-005 cancel: cancelling in the result, then cancelled(cancelled_by_agent) with aborted_at_progress', () => {
    const h = arm();
    openArm(h);
    h.call(1, 'action.submit', { action_id: 'a-7', type: 'move_to_pose', params: POSE(0.4, 0.1, 0.3) });
    h.advance(800 * MS);
    expect(h.call(1, 'action.cancel', { action_id: 'a-7' })).toMatchObject({
      action_id: 'a-7',
      state: 'cancelling',
    });
    h.advance(1000 * MS);
    const end = notifications(h.log, 'action.status').filter((p) => p.state === 'cancelled');
    expect(end).toEqual([expect.objectContaining({ reason: 'cancelled_by_agent' })]);
    const at = end[0]!.aborted_at_progress as number;
    expect(at).toBeGreaterThan(0);
    expect(at).toBeLessThan(1);
    // an idle cancel reports the current (terminal) state without a new status_seq
    const again = h.call(1, 'action.cancel', { action_id: 'a-7' });
    expect(again).toMatchObject({
      state: 'cancelled',
      status_seq: end[0]!.status_seq,
      reason: 'cancelled_by_agent',
    });
    expect(h.request(1, 'action.cancel', { action_id: 'nope' }).response.error).toMatchObject({ code: 3008 });
  });

  it('AWP-PRE-003 replace: the executing move is preempted; stop (instant) executes and completes at once', () => {
    const h = arm();
    openArm(h);
    h.call(1, 'action.submit', { action_id: 'm1', type: 'move_to_pose', params: POSE(0.4, 0, 0.4) });
    h.advance(300 * MS);
    const { outs } = h.request(1, 'action.submit', { action_id: 's1', type: 'stop', params: {} });
    expect(sequenced(outs).map((p) => `${p.action_id as string}:${p.state as string}`)).toEqual([
      'm1:preempted',
      's1:executing',
      's1:completed',
    ]);
  });

  it('AWP-PRE-002 queue: queued behind the running move, then accepted and executing when the group frees', () => {
    const h = arm();
    openArm(h);
    h.call(1, 'action.submit', { action_id: 'a', type: 'move_to_pose', params: POSE(0.1, 0, 0.4) });
    h.advance(200 * MS);
    expect(
      h.call(1, 'action.submit', {
        action_id: 'b',
        type: 'move_to_pose',
        params: POSE(0.1, 0.1, 0.4),
        preempt: 'queue',
      }),
    ).toMatchObject({
      state: 'queued',
    });
    h.advance(3000 * MS);
    const states = notifications(h.log, 'action.status')
      .filter((p) => p.state !== 'executing' || p.progress === 0)
      .map((p) => `${p.action_id as string}:${p.state as string}`);
    expect(states).toEqual(['a:executing', 'a:completed', 'b:accepted', 'b:executing', 'b:completed']);
  });

  it('AWP-ACT-001 an identical resubmission reports the current state without a new status_seq; other content is 3004', () => {
    const h = arm();
    openArm(h);
    const submit = { action_id: 'a-8', type: 'move_to_pose', params: POSE(0.2, 0.3, 0.4), deadline_ms: 8000 };
    const first = h.call(1, 'action.submit', submit);
    h.advance(150 * MS);
    const seqBefore = sequenced(h.log).length;
    // member order differs: still identical (AWP-ACT-009)
    const again = h.call(1, 'action.submit', {
      deadline_ms: 8000,
      params: POSE(0.2, 0.3, 0.4),
      type: 'move_to_pose',
      action_id: 'a-8',
    });
    const latest = notifications(h.log, 'action.status').at(-1)!;
    expect(again).toEqual({
      action_id: 'a-8',
      state: 'executing',
      status_seq: latest.status_seq,
      received_ts_mono_ns: first.received_ts_mono_ns,
      ts_mono_ns: latest.ts_mono_ns,
    });
    expect(sequenced(h.log)).toHaveLength(seqBefore);
    const conflict = h.request(1, 'action.submit', { ...submit, params: POSE(0.2, 0.3, 0.5) });
    expect(conflict.response.error).toMatchObject({
      code: 3004,
      message: 'AWP_ACTION_ID_CONFLICT',
      data: { retryable: false },
    });
    expect(h.request(1, 'action.status', { action_id: 'a-8' }).response.result).toMatchObject({
      action_id: 'a-8',
      state: 'executing',
    });
  });

  it('AWP-ENV-004 admission above max_action_rate_hz: 4002, retryable, retry_after_ms on the session clock', () => {
    const h = arm();
    openArm(h);
    h.call(1, 'action.submit', { action_id: 'a', type: 'stop', params: {} });
    h.advance(40 * MS);
    const { response } = h.request(1, 'action.submit', { action_id: 'b', type: 'stop', params: {} });
    expect(response.error).toEqual({
      code: 4002,
      message: 'AWP_ENVELOPE_EXCEEDED',
      data: { retryable: true, retry_after_ms: 60, detail: 'max_action_rate_hz 10' },
    });
    // an identical resubmission of an admitted action is not an admission, so it is not limited (AWP-ACT-001)
    expect(
      h.request(1, 'action.submit', { action_id: 'a', type: 'stop', params: {} }).response.result,
    ).toMatchObject({ state: 'completed' });
    h.advance(60 * MS);
    expect(h.call(1, 'action.submit', { action_id: 'b', type: 'stop', params: {} })).toMatchObject({
      state: 'accepted',
    });
  });

  it('AWP-ENV-002 targets outside the envelope are refused (4002, not retryable) and create no action', () => {
    const h = arm();
    openArm(h);
    const { response } = h.request(1, 'action.submit', {
      action_id: 'x',
      type: 'move_to_pose',
      params: POSE(0.9, 0, 0.4),
    });
    expect(response.error).toMatchObject({ code: 4002, data: { retryable: false } });
    const invalid = h.request(1, 'action.submit', {
      action_id: 'x',
      type: 'move_to_pose',
      params: { pose: { frame: 'base' } },
    });
    expect(invalid.response.error).toMatchObject({ code: 3001 });
    expect(h.request(1, 'action.status', { action_id: 'x' }).response.error).toMatchObject({ code: 3008 });
  });

  it('AWP-EMB-004 an observer session gets frames but may not act (4001)', () => {
    const h = arm();
    const ready = h.open(1, { mode: 'streaming', subscribe: [{ channel: 'state' }] });
    expect(ready.granted).toMatchObject({ action_types: [], envelopes: [] });
    expect(
      h.request(1, 'action.submit', { action_id: 'x', type: 'stop', params: {} }).response.error,
    ).toMatchObject({ code: 4001 });
  });
});

describe('arm world: closing answers last', () => {
  it('AWP-SES-011 the close result comes only after every action ended and session.state closed was sent', () => {
    const h = arm();
    openArm(h);
    h.call(1, 'action.submit', { action_id: 'a-7', type: 'move_to_pose', params: POSE(0.4, 0.1, 0.3) });
    h.advance(400 * MS);
    const closing = h.text(1, { jsonrpc: '2.0', id: 'close-1', method: 'session.close' });
    expect(sequenced(closing)).toEqual([
      expect.objectContaining({ action_id: 'a-7', state: 'cancelling', reason: 'session_closed' }),
    ]);
    expect(messages(closing).filter((m) => m.id === 'close-1')).toEqual([]);
    const refused = h.request(1, 'action.submit', { action_id: 'a-8', type: 'stop', params: {} });
    expect(refused.response.error).toMatchObject({
      code: 2003,
      data: { retryable: false, detail: 'the session is closing' },
    });
    expect(h.request(1, 'ping', { origin_ns: 1 }).response.result).toBeDefined(); // still served (AWP-SES-011)
    const outs = h.advance(1500 * MS);
    const tail = messages(outs, 1).filter(
      (m) => m.method !== 'obs.frame' && m.method !== 'session.telemetry' && m.method !== 'ping',
    );
    expect(
      tail.map((m) =>
        m.method === undefined ? `result:${String(m.id)}` : `${m.method}:${String(m.params?.state)}`,
      ),
    ).toEqual(['action.status:cancelled', 'session.state:closed', 'result:close-1']);
    expect(closes(outs)).toEqual([]); // the connection stays open, without a session
  });
});
