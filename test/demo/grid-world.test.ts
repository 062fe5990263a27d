import { describe, expect, it } from 'vitest';
import { MAX_TICKS_PER_REQUEST } from '../../src/demo/actions.js';
import { createGridWorld } from '../../src/demo/create.js';
import type { JsonObject, Output } from '../../src/demo/types.js';
import { loadTraces } from '../harness/spec-data.js';
import { Harness, counterRandom, labels, messages, notifications, sequenced } from './harness.js';

function grid(): Harness {
  return new Harness(createGridWorld({}, { random: counterRandom() }));
}

/** World outputs as the wire messages they become (inline frames encoded as obs.frame). */
function wire(h: Harness, outs: Output[]): JsonObject[] {
  return outs.map((o) => {
    if (o.kind === 'text') return o.msg;
    if (o.kind === 'frame') return JSON.parse(h.world.encodeFrame(o, h.now) as string) as JsonObject;
    return { close: o.code };
  });
}

/**
 * Drop what legitimately differs between worlds: credentials, ids, the vendor, free-text descriptions, and what
 * this world declares beyond the trace's (`initial_states` for world.reset, a `frame_tree`).
 */
function normalise(msg: JsonObject): JsonObject {
  const copy = JSON.parse(JSON.stringify(msg)) as { result?: Record<string, unknown> };
  const r = copy.result;
  if (r !== undefined) {
    delete r.frame_tree;
    delete r.initial_states;
    if ('session_token' in r) r.session_token = '<token>';
    if ('session_id' in r) r.session_id = '<id>';
    if ('world' in r) {
      (r.world as Record<string, unknown>).vendor = '<vendor>';
      for (const e of r.embodiments as Record<string, unknown>[]) delete e.description;
    }
  }
  return copy;
}

function openGrid(h: Harness, conn = 1): JsonObject {
  return h.open(conn, {
    embodiment: 'avatar_0',
    mode: 'lockstep',
    subscribe: [{ channel: 'grid_view' }],
    admin: ['tick'],
  });
}

describe('grid world (lockstep)', () => {
  it('AWP-TIM-003 plays the agent side of core-lockstep.jsonl and answers exactly as the trace', () => {
    const trace = loadTraces().find((t) => t.name === 'core-lockstep')!;
    const h = grid();
    h.connect(1);
    const lines = trace.lines.filter((l) => l.msg !== undefined);
    let i = 0;
    while (i < lines.length) {
      const agent = lines[i]!;
      expect(agent.from).toBe('agent');
      const expected: JsonObject[] = [];
      for (i += 1; i < lines.length && lines[i]!.from === 'world'; i += 1)
        expected.push(normalise(lines[i]!.msg!));
      const got = wire(h, h.text(1, agent.msg)).map(normalise);
      expect(got, `after: ${agent.step ?? ''}`).toEqual(expected);
    }
  });

  it('AWP-PRE-007 a replacing submit supersedes the staged actions of its group, however many ended before it', () => {
    const h = grid();
    openGrid(h);
    const submit = (n: number) =>
      h.request(1, 'action.submit', {
        action_id: `a-${n}`,
        type: 'walk_to',
        params: { cell: [n % 3, 0] },
        preempt: 'replace',
      });
    // Each staged action is superseded by the next (cancelled), and the ended ones are kept meanwhile.
    for (let n = 1; n <= 200; n++) {
      const { outs } = submit(n);
      const superseded = notifications(outs, 'action.status').filter((p) => p.reason === 'superseded');
      expect(superseded.map((p) => p.action_id)).toEqual(n === 1 ? [] : [`a-${n - 1}`]);
      expect(superseded.every((p) => p.state === 'cancelled')).toBe(true);
    }
    const { outs } = h.request(1, 'world.tick', { expected_tick: 0 });
    expect(notifications(outs, 'action.status')).toEqual([
      expect.objectContaining({ action_id: 'a-200', state: 'executing' }),
    ]);
  });

  it('AWP-PRE-007 replace in lockstep: admitted and staged; the executing action is preempted at the next advance', () => {
    const h = grid();
    openGrid(h);
    h.call(1, 'action.submit', {
      action_id: 'a-1',
      type: 'walk_to',
      params: { cell: [2, 0] },
      preempt: 'replace',
    });
    h.call(1, 'world.tick', { expected_tick: 0, count: 1 });
    const r = h.call(1, 'action.submit', {
      action_id: 'a-2',
      type: 'walk_to',
      params: { cell: [0, 2] },
      preempt: 'replace',
    });
    expect(r).toMatchObject({ action_id: 'a-2', state: 'accepted', status_seq: 5, ts_mono_ns: 1_000_000 });
    const { outs } = h.request(1, 'world.tick', { expected_tick: 1 });
    expect(labels(outs)).toEqual(['action.status', 'action.status', 'frame:1@2', 'result']);
    expect(sequenced(outs)).toEqual([
      {
        method: 'action.status',
        action_id: 'a-1',
        state: 'preempted',
        status_seq: 6,
        ts_mono_ns: 2_000_000,
        tick: 2,
      },
      expect.objectContaining({ action_id: 'a-2', state: 'executing', status_seq: 7, tick: 2 }),
    ]);
    const frame = h.frames(outs)[0]!;
    expect(frame.payloadJson).toEqual({ avatar: [0, 0], goal: [2, 0] });
  });

  it('AWP-TIM-011 a tick with the wrong expected_tick fails with 3009 carrying the current tick; nothing advances', () => {
    const h = grid();
    openGrid(h);
    const { response, outs } = h.request(1, 'world.tick', { expected_tick: 5 });
    expect(response.error).toMatchObject({
      code: 3009,
      message: 'AWP_TICK_MISMATCH',
      data: { retryable: false, tick: 0 },
    });
    expect(outs.filter((o) => o.kind === 'frame')).toHaveLength(0);
    expect(h.call(1, 'world.tick', { expected_tick: 0, count: 3 })).toEqual({ tick: 3 });
  });

  it('a tick of more than MAX_TICKS_PER_REQUEST advances is refused (-32602) and nothing advances: the world runs in the edge process', () => {
    const h = grid();
    openGrid(h);
    const { response, outs } = h.request(1, 'world.tick', {
      expected_tick: 0,
      count: MAX_TICKS_PER_REQUEST + 1,
    });
    expect(response.error).toMatchObject({
      code: -32602,
      data: { detail: `count must be at most ${MAX_TICKS_PER_REQUEST}` },
    });
    expect(outs.filter((o) => o.kind === 'frame')).toHaveLength(0);
    expect(h.call(1, 'world.tick', { expected_tick: 0, count: MAX_TICKS_PER_REQUEST })).toEqual({
      tick: MAX_TICKS_PER_REQUEST,
    });
  });

  it('AWP-TIM-003 count advances each deliver their statuses and one per-tick frame before the single result', () => {
    const h = grid();
    openGrid(h);
    h.call(1, 'action.submit', { action_id: 'w', type: 'walk_to', params: { cell: [3, 0] } });
    const { outs } = h.request(1, 'world.tick', { expected_tick: 0, count: 4 });
    expect(labels(outs)).toEqual([
      'action.status', // executing, tick 1
      'frame:1@1',
      'action.status', // progress, tick 2
      'frame:1@2',
      'action.status', // completed, tick 3
      'frame:1@3',
      'frame:1@4',
      'result',
    ]);
    expect(notifications(h.log, 'action.status').map((p) => [p.state, p.tick, p.progress])).toEqual([
      ['executing', 1, 0.3333],
      ['executing', 2, 0.6667],
      ['completed', 3, 1],
    ]);
  });

  it('AWP-TIM-009 after a resume, the replay comes first, then a resync keyframe with the current tick', () => {
    const h = grid();
    const ready = openGrid(h);
    h.call(1, 'world.tick', { expected_tick: 0, count: 2 });
    h.disconnect(1);
    const { msgs, outs } = h.resume(2, ready.session_token as string, 2);
    expect(msgs[0]!.result).toMatchObject({ replay_to_status_seq: 3, tick: 2, safe_state: false });
    expect(labels(outs)).toEqual(['result', 'session.state', 'session.state', 'frame:1@2']);
    expect(sequenced(outs).map((p) => [p.status_seq, p.state, p.reason])).toEqual([
      [3, 'suspended', 'connection_lost'], // replayed
      [4, 'active', 'resumed'], // live
    ]);
    const [frame] = h.frames(outs);
    expect(frame!.frame.flags & 0x09).toBe(0x09); // keyframe + resync
    expect(frame!.frame.tick).toBe(2);
  });

  it('AWP-TIM-012 an observer session receives per-tick frames but has no tick authority (3006)', () => {
    const h = grid();
    openGrid(h);
    const obs = h.open(2, { mode: 'lockstep', subscribe: [{ channel: 'grid_view' }], admin: ['tick'] });
    expect(obs.granted).toEqual({
      channels: [{ channel: 'grid_view', rate_hz: null, channel_id: 1 }],
      action_types: [],
      admin: [],
      envelopes: [],
    });
    const { response } = h.request(2, 'world.tick', { expected_tick: 0 });
    expect(response.error).toMatchObject({ code: 3006 });
    const { outs } = h.request(1, 'world.tick', { expected_tick: 0 });
    expect(h.frames(outs).map((f) => [f.conn, f.frame.tick])).toEqual([
      [1, 1],
      [2, 1],
    ]);
  });

  it('AWP-EMB-001 the embodiment bound elsewhere is unavailable (2001); AWP-NEG-002 streaming is refused (2002)', () => {
    const h = grid();
    openGrid(h);
    h.connect(2);
    h.call(2, 'initialize', {
      protocol_versions: ['0.1'],
      agent: { name: 'a', version: '1', vendor: 'v' },
      consumes_modalities: ['text/event+json'],
    });
    expect(
      h.request(2, 'session.open', { embodiment: 'avatar_0', mode: 'lockstep' }).response.error,
    ).toMatchObject({ code: 2001 });
    expect(h.request(2, 'session.open', { mode: 'streaming' }).response.error).toMatchObject({ code: 2002 });
  });

  it('AWP-PRE-002 queue: queued behind the executing walk, accepted in order, AWP_QUEUE_FULL beyond max_queue', () => {
    const h = grid();
    openGrid(h);
    h.call(1, 'action.submit', { action_id: 'a', type: 'walk_to', params: { cell: [1, 0] } });
    expect(
      h.call(1, 'action.submit', {
        action_id: 'b',
        type: 'walk_to',
        params: { cell: [1, 1] },
        preempt: 'queue',
      }),
    ).toMatchObject({ state: 'queued' });
    h.call(1, 'action.submit', {
      action_id: 'c',
      type: 'walk_to',
      params: { cell: [1, 2] },
      preempt: 'queue',
    });
    const full = h.request(1, 'action.submit', {
      action_id: 'd',
      type: 'walk_to',
      params: { cell: [0, 0] },
      preempt: 'queue',
    });
    expect(full.response.error).toMatchObject({ code: 3003, data: { retryable: true } });
    h.call(1, 'world.tick', { expected_tick: 0, count: 4 });
    const states = notifications(h.log, 'action.status').map(
      (p) => `${p.action_id as string}:${p.state as string}`,
    );
    expect(states).toEqual([
      'a:executing',
      'a:completed',
      'b:accepted',
      'b:executing',
      'b:completed',
      'c:accepted',
      'c:executing',
      'c:completed',
    ]);
    expect(h.frames(h.log).at(-1)!.payloadJson).toEqual({ avatar: [1, 2], goal: [2, 0] });
  });

  it('AWP-ACT-002 params outside the schema or the grid are refused with 3001 and create nothing', () => {
    const h = grid();
    openGrid(h);
    for (const params of [{ cell: [1] }, { cell: [9, 9] }, { direction: 'up' }]) {
      const type = 'direction' in params ? 'move' : 'walk_to';
      const { response } = h.request(1, 'action.submit', { action_id: 'x', type, params });
      expect(response.error).toMatchObject({
        code: 3001,
        message: 'AWP_PARAMS_INVALID',
        data: { retryable: false },
      });
    }
    expect(messages(h.log).filter((m) => m.method === 'action.status')).toHaveLength(0);
  });

  it('AWP-LIF-005 cancelling an executing walk in lockstep completes the abort at the next advance', () => {
    const h = grid();
    openGrid(h);
    h.call(1, 'action.submit', { action_id: 'a', type: 'walk_to', params: { cell: [3, 0] } });
    h.call(1, 'world.tick', { expected_tick: 0 });
    expect(h.call(1, 'action.cancel', { action_id: 'a' })).toEqual({
      action_id: 'a',
      state: 'cancelling',
      status_seq: 5,
    });
    const { outs } = h.request(1, 'world.tick', { expected_tick: 1 });
    expect(notifications(outs, 'action.status')).toEqual([
      expect.objectContaining({
        state: 'cancelled',
        reason: 'cancelled_by_agent',
        aborted_at_progress: 0.3333,
        status_seq: 6,
      }),
    ]);
    expect((h.frames(outs)[0]!.payloadJson as { avatar: number[] }).avatar).toEqual([1, 0]);
  });

  it('AWP-SES-011 closing with an executing action in lockstep aborts it without an advance', () => {
    const h = grid();
    openGrid(h);
    h.call(1, 'action.submit', { action_id: 'a', type: 'walk_to', params: { cell: [3, 0] } });
    h.call(1, 'world.tick', { expected_tick: 0 });
    const { msgs } = h.request(1, 'session.close');
    expect(
      msgs.map((m) => (m.method === undefined ? 'result' : `${m.method}:${String(m.params?.state)}`)),
    ).toEqual(['action.status:cancelling', 'action.status:cancelled', 'session.state:closed', 'result']);
  });

  it('AWP-PRM-006 world.reset: world_resetting to every session, actions cancelled(world_reset), fresh frames before the result', () => {
    const h = grid();
    const a = h.open(1, {
      embodiment: 'avatar_0',
      mode: 'lockstep',
      subscribe: [{ channel: 'grid_view' }],
      admin: ['tick', 'reset'],
    });
    expect((a.granted as JsonObject).admin).toEqual(['tick', 'reset']);
    const b = h.open(2, { mode: 'lockstep', subscribe: [{ channel: 'grid_view' }], admin: ['reset'] });
    expect((b.granted as JsonObject).admin).toEqual([]); // at most one session holds reset (AWP-PRM-005)
    h.call(1, 'action.submit', { action_id: 'w', type: 'walk_to', params: { cell: [4, 4] } });
    h.call(1, 'world.tick', { expected_tick: 0, count: 3 });
    h.call(1, 'action.submit', {
      action_id: 'q',
      type: 'walk_to',
      params: { cell: [0, 1] },
      preempt: 'queue',
    });
    const { outs } = h.request(1, 'world.reset', { initial_state: 'start', seed: 7 });
    expect(labels(outs, 1)).toEqual([
      'world.event',
      'action.status',
      'action.status',
      'action.status',
      'frame:1@0',
      'result',
    ]);
    expect(labels(outs, 2)).toEqual(['world.event', 'frame:1@0']);
    expect(notifications(outs, 'world.event', 2)).toEqual([
      expect.objectContaining({
        event: 'world_resetting',
        detail: { initiator: a.session_id, kind: 'reset', initial_state: 'start' },
      }),
    ]);
    expect(
      sequenced(outs, 1)
        .slice(1)
        .map((p) => `${p.action_id as string}:${p.state as string}:${p.reason as string}`),
    ).toEqual(['w:cancelling:world_reset', 'w:cancelled:world_reset', 'q:cancelled:world_reset']);
    const frame = h.frames(outs, 1)[0]!;
    expect(frame.payloadJson).toEqual({ avatar: [0, 0], goal: [2, 0] });
    // the tick went back to 0; the session clock did not: frames now carry ts_sim_ns (AWP-CLK-003, AWP-TIM-013)
    expect(frame.frame).toMatchObject({ tick: 0, ts_mono_ns: 3_000_000, ts_sim_ns: 0 });
    expect(messages(outs, 1).at(-1)!.result).toEqual({ tick: 0 });
    expect(h.call(1, 'world.tick', { expected_tick: 0 })).toEqual({ tick: 1 });
    expect(h.request(1, 'world.reset', { initial_state: 'nowhere' }).response.error).toMatchObject({
      code: 3001,
    });
    expect(h.request(2, 'world.reset', {}).response.error).toMatchObject({ code: 4001 });
  });
});
