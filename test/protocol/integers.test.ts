import { describe, expect, it } from 'vitest';
import {
  findIntegerRangeViolation,
  findMessageIntegerRangeViolation,
  integerFields,
  isOutOfIntegerRange,
  MAX_U53,
} from '../../src/protocol/integers.js';
import { parseMessage } from '../../src/protocol/jsonrpc.js';
import { loadTraces } from '../harness/spec-data.js';

const TWO_53 = 2 ** 53;

function parsed(text: string) {
  const msg = parseMessage(text);
  if (msg.kind === 'invalid') throw new Error('fixture must parse');
  return msg;
}

describe('integer-range rule', () => {
  it('AWP-CTL-009 finds 2^53 in status_seq and ts_mono_ns with their pointers', () => {
    const state = { state: 'active', status_seq: TWO_53, ts_mono_ns: 0 };
    expect(findIntegerRangeViolation('session.state', 'notification', state)).toBe('/params/status_seq');
    const status = { action_id: 'a-1', state: 'executing', status_seq: 4, ts_mono_ns: TWO_53 };
    expect(findIntegerRangeViolation('action.status', 'notification', status)).toBe('/params/ts_mono_ns');
  });

  it('AWP-CTL-009 finds an oversized literal straight from the wire text', () => {
    // 9007199254740993 is not representable; JSON.parse rounds it to 2^53, still out of range.
    const msg = parsed(
      '{"jsonrpc":"2.0","method":"obs.frame","params":{"channel_id":1,"seq":9007199254740993,"ts_mono_ns":0,"flags":1,"payload_b64":""}}',
    );
    expect(findMessageIntegerRangeViolation(msg)).toBe('/params/seq');
    const huge = parsed('{"jsonrpc":"2.0","id":5,"method":"world.tick","params":{"expected_tick":1e300}}');
    expect(findMessageIntegerRangeViolation(huge)).toBe('/params/expected_tick');
  });

  it('AWP-CTL-009 finds values nested in telemetry maps keyed by channel id and in arrays', () => {
    const telemetry = {
      window_ms: 1000,
      observation_latency_ns: { count: 1, p50: 1, p95: 1 },
      channels: { '1': { count: 15, p50: 1, p95: 1 }, '2': { count: 1, p50: 1, p95: 1, max: TWO_53 } },
    };
    expect(findIntegerRangeViolation('session.telemetry', 'notification', telemetry)).toBe(
      '/params/channels/2/max',
    );
    const report = {
      window_ms: 1000,
      sync: { offset_ns: 0, rtt_ns: 1 },
      channels: { '7': { frames: 1, gaps: 0, staleness_ns: { count: TWO_53 * 4, p50: 1, p95: 1 } } },
    };
    expect(findIntegerRangeViolation('obs.report', 'notification', report)).toBe(
      '/params/channels/7/staleness_ns/count',
    );
    const ready = parsed(
      `{"jsonrpc":"2.0","id":2,"result":{"session_id":"s","session_token":"st_3c9e1f7a2b8d4e60","reconnect_window_ms":1,"heartbeat_interval_ms":100,"granted":{"channels":[],"action_types":[],"envelopes":[],"expires_at":${String(TWO_53)}},"stream_endpoints":[{"binding":"inline"}]}}`,
    );
    expect(findMessageIntegerRangeViolation(ready, 'session.open')).toBe('/result/granted/expires_at');
    const stream = { action_id: 'a', state: 'executing', status_seq: 1, ts_mono_ns: 1 };
    const pull = { ...stream, stream: { frames_applied: 1, last_seq: TWO_53, clamped_count: 0 } };
    expect(findIntegerRangeViolation('action.status', 'result', pull)).toBe('/result/stream/last_seq');
  });

  it('AWP-CTL-009 accepts 2^53-1 and in-range i53 negatives', () => {
    const state = { state: 'active', status_seq: MAX_U53, ts_mono_ns: MAX_U53 };
    expect(findIntegerRangeViolation('session.state', 'notification', state)).toBeNull();
    const frame = { channel_id: 1, seq: 1, ts_mono_ns: 0, flags: 1, payload_b64: '', ts_sim_ns: -MAX_U53 };
    expect(findIntegerRangeViolation('obs.frame', 'notification', frame)).toBeNull();
    const report = { window_ms: 1, sync: { offset_ns: -912998975000, rtt_ns: 5 }, channels: {} };
    expect(findIntegerRangeViolation('obs.report', 'notification', report)).toBeNull();
    expect(findIntegerRangeViolation('obs.frame', 'notification', { ...frame, ts_sim_ns: -TWO_53 })).toBe(
      '/params/ts_sim_ns',
    );
  });

  it('leaves non-integers, strings and in-range negatives to schema validation', () => {
    for (const v of [1.5, '9007199254740993', -1, null, true]) {
      expect(findIntegerRangeViolation('ping', 'request', { origin_ns: v })).toBeNull();
    }
    expect(isOutOfIntegerRange(TWO_53 + 0.5)).toBe(true); // a double this large has no fraction
    expect(isOutOfIntegerRange(Number.NaN)).toBe(false);
  });

  it('does not flag large numbers in free-form places: action params, detail, vendor fields', () => {
    const submit = {
      action_id: 'a-1',
      type: 'move',
      params: { target_ns: TWO_53, nested: [{ seq: TWO_53 }] },
      'x-acme.seq': TWO_53,
      basis_ts_mono_ns: 5,
    };
    expect(findIntegerRangeViolation('action.submit', 'request', submit)).toBeNull();
    const event = { event: 'collision', status_seq: 3, ts_mono_ns: 1, detail: { force_n: TWO_53 } };
    expect(findIntegerRangeViolation('world.event', 'notification', event)).toBeNull();
    expect(findIntegerRangeViolation('x-acme.teleport', 'request', { seq: TWO_53 })).toBeNull();
  });

  it('checks results by the method of the request they answer', () => {
    expect(
      findIntegerRangeViolation('ping', 'result', { origin_ns: 1, receive_ns: TWO_53, transmit_ns: 1 }),
    ).toBe('/result/receive_ns');
    const result = parsed(`{"jsonrpc":"2.0","id":6,"result":{"tick":${String(TWO_53)}}}`);
    expect(findMessageIntegerRangeViolation(result)).toBeNull(); // unknown request: nothing to check against
    expect(findMessageIntegerRangeViolation(result, 'world.tick')).toBe('/result/tick');
  });

  it('derives the 64-bit fields of each message from the schemas', () => {
    const state = integerFields('session.state', 'notification').map((f) => `${f.pointer}:${f.def}`);
    expect(state).toEqual(['/params/status_seq:status_seq', '/params/ts_mono_ns:ts_mono_ns']);
    const submit = integerFields('action.submit', 'result').filter((f) => f.def === 'status_seq');
    expect(submit.map((f) => f.pointer)).toEqual(['/result/status_seq']);
    const telemetry = integerFields('session.telemetry', 'notification').map((f) => f.pointer);
    expect(telemetry).toContain('/params/channels/*/p95');
    const report = integerFields('obs.report', 'notification');
    expect(report.find((f) => f.pointer === '/params/sync/offset_ns')?.bound).toBe('i53');
    expect(integerFields('action.submit', 'request').map((f) => f.pointer)).toEqual([
      '/params/basis_ts_mono_ns',
      '/params/valid_until_ns',
    ]);
  });

  it('finds no violation in any spec trace message', () => {
    for (const trace of loadTraces()) {
      const pending = new Map<string, string>();
      for (const line of trace.lines) {
        if (line.msg === undefined) continue;
        const msg = parsed(JSON.stringify(line.msg));
        if (msg.kind === 'request') pending.set(`${String(line.from)}:${String(msg.id)}`, msg.method);
        const requester = line.from === 'agent' ? 'world' : 'agent';
        const requestMethod =
          msg.kind === 'result' ? pending.get(`${requester}:${String(msg.id)}`) : undefined;
        expect(findMessageIntegerRangeViolation(msg, requestMethod), `${trace.name}:${line.line}`).toBeNull();
      }
    }
  });
});
