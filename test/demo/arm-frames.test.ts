import { describe, expect, it } from 'vitest';
import { createArmWorld } from '../../src/demo/create.js';
import type { ArmOptions } from '../../src/demo/config.js';
import { encodeFrame } from '../../src/protocol/frame-encode.js';
import type { JsonObject } from '../../src/demo/types.js';
import { Harness, MS, closes, counterRandom, notifications } from './harness.js';

const ALL = [{ channel: 'proprio' }, { channel: 'camera' }, { channel: 'state' }];

function arm(opts: ArmOptions = {}): Harness {
  return new Harness(
    createArmWorld(
      {
        cameraBytes: 1024,
        streamUrl: 'ws://127.0.0.1:1/stream',
        watchdogMs: 30_000,
        heartbeatIntervalMs: 60_000,
        reconnectWindowMs: 60_000,
        ...opts,
      },
      { random: counterRandom() },
    ),
  );
}

function keepAlive(h: Harness, conn: number): void {
  h.call(conn, 'ping', { origin_ns: h.now });
}

describe('arm world: observation frames and stream bindings', () => {
  it('AWP-TIM-005 channels are sent at their granted rates; AWP-OBS-006 every frame carries ts_send_ns >= ts_mono_ns', () => {
    const h = arm();
    const ready = h.open(1, {
      embodiment: 'arm_01',
      mode: 'streaming',
      subscribe: [{ channel: 'proprio' }, { channel: 'camera', rate_hz: 15 }, { channel: 'state' }],
    });
    expect(ready.stream_endpoints).toEqual([
      { binding: 'ws', url: 'ws://127.0.0.1:1/stream' },
      { binding: 'inline' },
    ]);
    h.advance(999 * MS);
    const counts = [1, 2, 3].map((c) => h.frames(h.log, c).length);
    expect(counts[0]).toBeGreaterThanOrEqual(99);
    expect(counts[0]).toBeLessThanOrEqual(101);
    expect(counts[1]).toBeGreaterThanOrEqual(14);
    expect(counts[1]).toBeLessThanOrEqual(16);
    expect(counts[2]).toBeGreaterThanOrEqual(9);
    expect(counts[2]).toBeLessThanOrEqual(11);
    for (const f of h.frames(h.log)) {
      expect(f.binding).toBe('inline');
      expect(f.frame.ts_send_ns).toBeDefined();
      expect(f.frame.ts_send_ns!).toBeGreaterThanOrEqual(f.frame.ts_mono_ns);
    }
    const camera = h.frames(h.log, 2)[0]!;
    expect(camera.frame.payload.length).toBe(1024);
    expect(camera.latestWins).toBe(true);
    expect(h.frames(h.log, 3)[0]!.latestWins).toBe(false); // reliable
  });

  it('AWP-TIM-006 session.telemetry at least once a second with pipeline latency per channel (keyed by channel_id)', () => {
    const h = arm();
    h.open(1, { embodiment: 'arm_01', mode: 'streaming', subscribe: [{ channel: 'proprio' }] });
    // the server encodes frames as it writes them; mimic a write 1 ms after capture
    let telemetry: JsonObject[] = [];
    for (let t = 0; t < 2100; t += 10) {
      const outs = h.advance(10 * MS);
      h.now += MS;
      for (const o of outs) if (o.kind === 'frame') h.world.encodeFrame(o, h.now);
      h.now -= MS;
      telemetry = [...telemetry, ...notifications(outs, 'session.telemetry')];
    }
    expect(telemetry.length).toBeGreaterThanOrEqual(2);
    const last = telemetry.at(-1)!;
    expect(last.window_ms).toBe(1000);
    expect(last.observation_latency_ns).toMatchObject({ p50: MS, p95: MS, max: MS });
    expect((last.channels as Record<string, unknown>)['1']).toMatchObject({ p50: MS });
  });

  it('AWP-OBS-004 the reliable state channel: a keyframe at subscription start and every keyframe_interval, deltas between', () => {
    const h = arm({ stateKeyframeInterval: 4 });
    h.open(1, { embodiment: 'arm_01', mode: 'streaming', subscribe: [{ channel: 'state' }] });
    h.call(1, 'action.submit', {
      action_id: 'm',
      type: 'move_to_pose',
      params: { pose: { frame: 'base', p_m: [0.3, 0, 0.4], q: [0, 0, 0, 1] } },
    });
    h.advance(1000 * MS);
    const frames = h.frames(h.log, 1);
    expect(frames.map((f) => f.frame.flags & 1)).toEqual(frames.map((_, i) => (i % 4 === 0 ? 1 : 0)));
    expect(frames[0]!.payloadJson).toEqual({
      phase: 'idle',
      p_m: [0, 0, 0.4],
      target_m: null,
      action_id: null,
    });
    const delta = frames.find((f, i) => i % 4 !== 0 && i > 1)!.payloadJson as JsonObject;
    expect(Object.keys(delta)).toEqual(['p_m']); // only what changed
    expect(frames.map((f) => f.frame.seq)).toEqual(frames.map((_, i) => i + 1));
  });

  it('AWP-TRN-012 a ws stream connection carries every channel from then on, each starting with a resync keyframe', () => {
    const h = arm();
    const ready = h.open(1, { embodiment: 'arm_01', mode: 'streaming', subscribe: ALL });
    h.advance(100 * MS);
    const attached = h.attachStream(10, ready.session_token as string);
    const first = h.frames(attached);
    expect(first.map((f) => [f.conn, f.binding, f.frame.channel_id, f.frame.flags])).toEqual([
      [10, 'ws', 1, 9],
      [10, 'ws', 2, 9],
      [10, 'ws', 3, 9],
    ]);
    const later = h.frames(h.advance(200 * MS));
    expect(later.length).toBeGreaterThan(20);
    expect(later.every((f) => f.conn === 10 && f.binding === 'ws' && (f.frame.flags & 8) === 0)).toBe(true);
    keepAlive(h, 1);
  });

  it('AWP-TRN-010 while the stream connection is down nothing is delivered, not even inline; channel_degraded after stale_after_ms; a new stream resyncs', () => {
    const h = arm({ stateStaleAfterMs: 300 });
    const ready = h.open(1, { embodiment: 'arm_01', mode: 'streaming', subscribe: ALL });
    h.attachStream(10, ready.session_token as string);
    h.advance(100 * MS);
    h.disconnect(10);
    const down = h.advance(290 * MS);
    expect(down.filter((o) => o.kind === 'frame')).toEqual([]);
    expect(notifications(down, 'world.event')).toEqual([]);
    const later = h.advance(20 * MS);
    expect(notifications(later, 'world.event')).toEqual([
      expect.objectContaining({ event: 'channel_degraded', detail: { channel: 'state', channel_id: 3 } }),
    ]);
    expect(notifications(h.advance(500 * MS), 'world.event')).toEqual([]); // once per outage
    const back = h.frames(h.attachStream(11, ready.session_token as string));
    expect(back.map((f) => [f.conn, f.frame.channel_id, f.frame.flags & 9])).toEqual([
      [11, 1, 9],
      [11, 2, 9],
      [11, 3, 9],
    ]);
  });

  it('AWP-TRN-013 a stream connection needs a token naming a session with a live control connection', () => {
    const h = arm();
    expect(closes(h.attachStream(10, 'nope'))).toEqual([expect.objectContaining({ conn: 10, code: 1008 })]);
    const ready = h.open(1, { embodiment: 'arm_01', mode: 'streaming', subscribe: ALL });
    h.disconnect(1); // suspended: no live control connection
    expect(h.world.streamTokenValid(ready.session_token as string)).toBe(false);
    expect(closes(h.attachStream(11, ready.session_token as string))).toHaveLength(1);
  });

  it('AWP-DAT-010 a malformed frame or a text message on a stream connection closes it with 1002 AWP_MALFORMED', () => {
    const h = arm();
    const ready = h.open(1, { embodiment: 'arm_01', mode: 'streaming', subscribe: ALL });
    const token = ready.session_token as string;
    h.attachStream(10, token);
    expect(closes(h.binary(10, Uint8Array.from([1, 2, 3])))).toEqual([
      { kind: 'close', conn: 10, code: 1002, reason: 'AWP_MALFORMED' },
    ]);
    h.disconnect(10);
    h.attachStream(11, token);
    expect(closes(h.text(11, '{"jsonrpc":"2.0"}'))).toEqual([
      { kind: 'close', conn: 11, code: 1002, reason: 'AWP_MALFORMED' },
    ]);
    h.disconnect(11);
    // a well-formed frame is accepted (and discarded: this world has no command channels, AWP-CMD-003)
    h.attachStream(12, token);
    const ok = encodeFrame({
      channel_id: 1,
      seq: 1,
      ts_mono_ns: 5,
      flags: 1,
      vendor: [],
      payload: new Uint8Array(2),
    });
    expect(closes(h.binary(12, ok))).toEqual([]);
  });

  it('AWP-TRN-008 suspension closes the stream connection; after resume frames go inline until a new stream is attached', () => {
    const h = arm();
    const ready = h.open(1, { embodiment: 'arm_01', mode: 'streaming', subscribe: ALL });
    h.attachStream(10, ready.session_token as string);
    expect(closes(h.disconnect(1))).toEqual([expect.objectContaining({ conn: 10 })]);
    h.disconnect(10);
    h.resume(2, ready.session_token as string, 0);
    const frames = h.frames(h.advance(50 * MS));
    expect(frames.length).toBeGreaterThan(0);
    expect(frames.every((f) => f.conn === 2 && f.binding === 'inline')).toBe(true);
    const state = frames.find((f) => f.frame.channel_id === 3)!;
    expect(state.frame.flags & 9).toBe(9); // reliable channel restarts with a resync keyframe
  });
});
