/** AWP-ENV-004 through the relay core, on a virtual clock. */
import { describe, expect, it } from 'vitest';
import { MAX_ADMITTED_ACTIONS } from '../../src/policy/admitted-actions.js';
import { RelayConnection } from '../../src/relay/relay-connection.js';
import type { RelayEffect, RelayRoute } from '../../src/relay/relay-effects.js';
import { TokenMint } from '../../src/session/tokens.js';

const manifest = (mode: 'streaming' | 'lockstep') => ({
  protocol_version: '0.1',
  world: { name: 'w', version: '1', vendor: 'v' },
  time_models: [mode],
  embodiments: [{ id: 'arm_01', kind: 'manipulator', action_types: ['move'], channels: [] }],
  observation_channels: [],
  action_schemas: [],
  safety_policy: { envelopes: [] },
});

const ready = {
  session_id: 's',
  session_token: 'wt',
  reconnect_window_ms: 30000,
  heartbeat_interval_ms: 5000,
  granted: {
    channels: [],
    action_types: ['move'],
    envelopes: [{ embodiment: 'arm_01', max_action_rate_hz: 10, on_violation: 'reject' }],
  },
  stream_endpoints: [{ binding: 'inline' }],
};

function route(): RelayRoute {
  const mint = new TokenMint();
  const m = new Map<string, string>();
  return {
    name: 'r',
    manifestFor: (k) => m.get(k),
    rememberManifest: (k, j) => m.set(k, j),
    edgeEndpoints: () => [{ binding: 'inline' }],
    mintToken: () => mint.mint(),
    ownsToken: (t) => mint.owns(t),
    fanOutObservers: false,
    forgetManifests: () => undefined,
    admitSession: () => undefined,
    approver: false,
  };
}

const j = (o: unknown) => JSON.stringify(o);
const texts = (fx: RelayEffect[], kind: string) =>
  fx
    .filter((e) => e.kind === kind)
    .map((e) => JSON.parse((e as { text: string }).text) as Record<string, any>); // eslint-disable-line @typescript-eslint/no-explicit-any -- test inspection of wire JSON

function open(mode: 'streaming' | 'lockstep', rateHz = 10) {
  const c = new RelayConnection(route());
  c.fromAgent(j({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }), 0);
  c.upstreamOpened();
  c.fromUpstream(j({ jsonrpc: '2.0', id: 1, result: manifest(mode) }), 0);
  c.fromAgent(
    j({ jsonrpc: '2.0', id: 2, method: 'session.open', params: { embodiment: 'arm_01', mode } }),
    0,
  );
  c.fromUpstream(
    j({
      jsonrpc: '2.0',
      id: 2,
      result: {
        ...ready,
        ...(mode === 'lockstep' && { tick: 0 }),
        granted: {
          ...ready.granted,
          envelopes: [{ embodiment: 'arm_01', max_action_rate_hz: rateHz, on_violation: 'reject' }],
        },
      },
    }),
    0,
  );
  let seq = 0;
  let id = 10;
  /** Submits at `atMs`; when forwarded, the world admits it. Returns the agent-facing answer if the edge answered. */
  const submit = (atMs: number, actionId = `a-${id}`) => {
    const rid = id++;
    const fx = c.fromAgent(
      j({
        jsonrpc: '2.0',
        id: rid,
        method: 'action.submit',
        params: { action_id: actionId, type: 'move', params: {} },
      }),
      atMs,
    );
    const up = texts(fx, 'to-upstream');
    if (up.length === 0) return texts(fx, 'to-agent')[0];
    c.fromUpstream(
      j({
        jsonrpc: '2.0',
        id: rid,
        result: {
          action_id: actionId,
          state: 'accepted',
          status_seq: ++seq,
          received_ts_mono_ns: atMs * 1e6,
          ts_mono_ns: atMs * 1e6,
        },
      }),
      atMs,
    );
    return undefined;
  };
  return { c, submit, nextSeq: () => ++seq };
}

/** An action.status notification reporting the action `completed`. */
const ended = (actionId: string, seq: number) => ({
  action_id: actionId,
  state: 'completed',
  status_seq: seq,
  ts_mono_ns: 0,
});

describe('AWP-ENV-004 action admission rate at the edge', () => {
  it('AWP-ENV-004 answers a burst above max_action_rate_hz with 4002, retryable, with retry_after_ms', () => {
    const { submit } = open('streaming');
    expect(submit(1000)).toBeUndefined();
    const refused = submit(1030);
    expect(refused).toMatchObject({
      error: { code: 4002, message: 'AWP_ENVELOPE_EXCEEDED', data: { retryable: true, retry_after_ms: 70 } },
    });
  });

  it('AWP-ENV-004 a submission that honours retry_after_ms is admitted', () => {
    const { submit } = open('streaming');
    submit(1000);
    const refused = submit(1030) as { error: { data: { retry_after_ms: number } } };
    expect(submit(1030 + refused.error.data.retry_after_ms)).toBeUndefined();
  });

  it('AWP-ACT-001 identical resubmissions of an admitted action_id are not counted', () => {
    const { submit } = open('streaming');
    submit(1000, 'a-7');
    expect(submit(1010, 'a-7')).toBeUndefined(); // forwarded: the world answers idempotently
    expect(submit(1101, 'a-8')).toBeUndefined(); // the resubmission did not reset the interval
  });

  it('AWP-ACT-001 AWP-ACT-006 resubmitting an action that ended, within the reconnect window, is not counted', () => {
    const { c, submit, nextSeq } = open('streaming');
    submit(1000, 'a-7');
    c.fromUpstream(j({ jsonrpc: '2.0', method: 'action.status', params: ended('a-7', nextSeq()) }), 1050);
    expect(submit(1060, 'a-7')).toBeUndefined(); // forwarded: the world still answers it idempotently
    expect(submit(1101, 'a-8')).toBeUndefined();
  });

  it('AWP-ACT-006 past the reconnect window after its end the edge forgets an id, as the world may', () => {
    const { c, submit, nextSeq } = open('streaming');
    submit(1000, 'a-7');
    c.fromUpstream(j({ jsonrpc: '2.0', method: 'action.status', params: ended('a-7', nextSeq()) }), 1050);
    expect(submit(1050 + ready.reconnect_window_ms, 'a-7')).toBeUndefined(); // counted as a new one
    expect(submit(1060 + ready.reconnect_window_ms, 'a-9')).toMatchObject({ error: { code: 4002 } });
  });

  it('AWP-ACT-006 a session submitting for half an hour holds only the ids the world still holds', () => {
    const { c, submit, nextSeq } = open('streaming');
    const admitted = c.currentSession!.admission.admitted;
    let peak = 0;
    for (let i = 0; i < 20_000; i++) {
      const at = 1000 + i * 100; // 10 Hz, the envelope's rate, for 33 minutes
      expect(submit(at, `long-${i}`)).toBeUndefined();
      const update = i % 2 === 0 ? 'action.status' : 'cancel';
      if (update === 'action.status') {
        c.fromUpstream(
          j({ jsonrpc: '2.0', method: 'action.status', params: ended(`long-${i}`, nextSeq()) }),
          at + 50,
        );
      } else {
        // An action.cancel result reporting `cancelled` ends it too (no notification follows).
        c.fromAgent(
          j({ jsonrpc: '2.0', id: `c${i}`, method: 'action.cancel', params: { action_id: `long-${i}` } }),
          at + 40,
        );
        const result = { action_id: `long-${i}`, state: 'cancelled', status_seq: nextSeq() };
        c.fromUpstream(j({ jsonrpc: '2.0', id: `c${i}`, result }), at + 50);
      }
      peak = Math.max(peak, admitted.size);
    }
    // One window's worth at 10 Hz (30 s: 300 ids, and the one admitted at its edge).
    expect(peak).toBeLessThanOrEqual(ready.reconnect_window_ms / 100 + 2);
    expect(admitted.uncertain(1000 + 20_000 * 100)).toBe(false);
  });

  it('AWP-ENV-004 AWP-ACT-001 past the ids it can hold, the edge leaves to the world what may be a resubmission', () => {
    const { submit } = open('streaming', 200); // one every 5 ms; within 3 ms the edge refuses
    expect(submit(1000, 'first')).toBeUndefined();
    expect(submit(1001, 'too-soon')).toMatchObject({ error: { code: 4002 } });
    let at = 1000;
    for (let i = 0; i < MAX_ADMITTED_ACTIONS; i++) expect(submit((at += 5), `busy-${i}`)).toBeUndefined();
    // 'first' (live: no end reported) had to go: an unknown id may be it, so the world decides.
    expect(submit(at + 1, 'too-soon')).toBeUndefined();
  });

  it('AWP-ACT-010 a submission the world refused does not count', () => {
    const { c, submit } = open('streaming');
    const fx = c.fromAgent(
      j({
        jsonrpc: '2.0',
        id: 99,
        method: 'action.submit',
        params: { action_id: 'x', type: 'move', params: {} },
      }),
      1000,
    );
    expect(texts(fx, 'to-upstream')).toHaveLength(1);
    c.fromUpstream(
      j({
        jsonrpc: '2.0',
        id: 99,
        error: { code: 3005, message: 'AWP_ESTOP_ACTIVE', data: { retryable: true } },
      }),
      1001,
    );
    expect(submit(1010)).toBeUndefined();
  });

  it('AWP-TIM-013 lockstep counts simulated time: waiting does not help, advancing does', () => {
    const { c, submit, nextSeq } = open('lockstep');
    // The world stamps admissions with the simulated clock (tick 0 at 0 ns).
    expect(submit(0)).toBeUndefined();
    // Ten wall-clock seconds later the simulated clock has not moved: refused.
    expect(submit(10_000)).toMatchObject({ error: { code: 4002 } });
    // An advance of 100 ms simulated time, seen in a status stamped by the world, clears it.
    c.fromAgent(j({ jsonrpc: '2.0', id: 500, method: 'world.tick', params: { expected_tick: 0 } }), 10_001);
    c.fromUpstream(
      j({
        jsonrpc: '2.0',
        method: 'action.status',
        params: {
          action_id: 'a-10',
          state: 'executing',
          status_seq: nextSeq(),
          ts_mono_ns: 100_000_000,
          tick: 1,
        },
      }),
      10_002,
    );
    c.fromUpstream(j({ jsonrpc: '2.0', id: 500, result: { tick: 1 } }), 10_003);
    expect(submit(10_004)).toBeUndefined();
  });
});
