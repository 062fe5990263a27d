/**
 * Per-observer delivery (src/fanout/subscriber.ts) driven directly: the rules that depend on frame
 * timing a live world rarely produces on demand (bursts, restarts between keyframes, a busy socket).
 */
import { describe, expect, it } from 'vitest';
import { FLAG_KEYFRAME, FLAG_RESYNC, peekFrame } from '../../src/protocol/frame.js';
import { encodeFrame } from '../../src/protocol/frame-encode.js';
import { asResync, type HubFrame } from '../../src/fanout/keyframe-cache.js';
import type { Sink } from '../../src/transport/outbox.js';
import { Subscriber, type SubscribedChannel } from '../../src/fanout/subscriber.js';
import { WsStreamSink } from '../../src/fanout/ws-stream-sink.js';
import type { ServerConnection } from '../../src/transport/engine.js';

/** A socket stand-in that records what the engine was handed; `busy` plays a full send buffer. */
class RecordingSink implements Sink {
  readonly sent: (string | Uint8Array)[] = [];
  busy = false;
  send(data: string | Uint8Array): void {
    this.sent.push(data);
  }
  get bufferedAmount(): number {
    return this.busy ? 1 << 30 : 0;
  }
}

const MS = 1_000_000;

function frame(channel_id: number, seq: number, ts_ms: number, keyframe = true, bytes = 16): HubFrame {
  const buf = encodeFrame({
    channel_id,
    seq,
    ts_mono_ns: ts_ms * MS,
    ts_send_ns: ts_ms * MS,
    flags: keyframe ? FLAG_KEYFRAME : 0,
    payload: new Uint8Array(bytes).fill(seq & 0xff),
    vendor: [],
  });
  const h = peekFrame(buf);
  return { buf, channel_id, seq, ts_mono_ns: h.ts_mono_ns, ts_send_ns: h.ts_send_ns, flags: h.flags };
}

function channel(channel_id: number, rate_hz: number, latest_wins: boolean): SubscribedChannel {
  return { name: `c${channel_id}`, channel_id, rate_hz, latest_wins, per_tick: false, stale_after_ms: 500 };
}

const note = { received_at: 0, channel: 'c' };

/** The frames (seq, flags) the sink was handed as inline obs.frame texts. */
function inlineSeqs(sink: RecordingSink): { seq: number; flags: number }[] {
  return sink.sent.map((d) => {
    const p = (
      JSON.parse(Buffer.from(d as Uint8Array).toString()) as { params: { seq: number; flags: number } }
    ).params;
    return { seq: p.seq, flags: p.flags };
  });
}

describe('subscriber delivery rules', () => {
  it('AWP-TIM-006 samples pipeline latency for telemetry windows, and none where no window drains them (lockstep)', () => {
    for (const sampleLatency of [true, false]) {
      const sub = new Subscriber(new RecordingSink(), 1024, 1 << 20);
      sub.sampleLatency = sampleLatency;
      sub.subscribe(channel(3, 10, false));
      for (let s = 1; s <= 1000; s++) sub.deliver(frame(3, s, s * 100, s === 1), note);
      expect(sub.takeTelemetry().overall?.count).toBe(sampleLatency ? 1000 : undefined);
    }
  });

  it('AWP-DAT-002 a reliable channel is never downsampled, even when the world sends a burst above its rate', () => {
    const sink = new RecordingSink();
    const sub = new Subscriber(sink, 1024, 1 << 20);
    sub.subscribe(channel(3, 10, false));
    const outcomes = [];
    // A keyframe, then deltas 100 ms apart, then three the world sent 2 ms apart after a stall.
    outcomes.push(sub.deliver(frame(3, 1, 0), note));
    for (let s = 2; s <= 5; s++) outcomes.push(sub.deliver(frame(3, s, (s - 1) * 100, false), note));
    for (let s = 6; s <= 8; s++) outcomes.push(sub.deliver(frame(3, s, 500 + (s - 6) * 2, false), note));
    expect(outcomes.every((o) => o === 'forwarded')).toBe(true);
    expect(inlineSeqs(sink).map((f) => f.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('AWP-DAT-003 a latest-wins channel is downsampled to its grant, and the restart frame counts against it', () => {
    const sink = new RecordingSink();
    const sub = new Subscriber(sink, 1024, 1 << 20);
    sub.subscribe(channel(1, 10, true));
    // The cached keyframe starts the channel; the live frames come at 30 Hz right behind it.
    expect(sub.deliver(frame(1, 10, 0), note, true)).toBe('forwarded');
    for (let s = 11; s <= 40; s++) sub.deliver(frame(1, s, Math.round((s - 10) * 33.4)), note);
    const got = inlineSeqs(sink);
    expect(isResync(got[0]!.flags)).toBe(true);
    // 1 s of frames at a 10 Hz grant: the start frame and 10 more at most, never two within half a period.
    expect(got.length).toBeLessThanOrEqual(11);
    expect(got.length).toBeGreaterThanOrEqual(10);
    const ts = got.map((f) => (f.seq - 10) * 33.4);
    for (let i = 1; i < ts.length; i++) expect(ts[i]! - ts[i - 1]!).toBeGreaterThanOrEqual(50);
  });

  it('AWP-DAT-009 AWP-DAT-001 a restarted channel waits for a keyframe above what was delivered, sent with resync; seq only rises', () => {
    const sink = new RecordingSink();
    const sub = new Subscriber(sink, 1024, 1 << 20);
    sub.subscribe(channel(3, 10, false), 20); // resumed: 20 was the last seq this session delivered
    expect(sub.deliver(frame(3, 11, 0), note, true)).toBe('stale'); // the cached keyframe is older
    expect(sub.deliver(frame(3, 21, 10, false), note, true)).toBe('held'); // a delta cannot restart a channel
    expect(sub.deliver(frame(3, 22, 110, false), note)).toBe('held');
    expect(sub.deliver(frame(3, 23, 210, true), note)).toBe('forwarded');
    expect(sub.deliver(frame(3, 24, 310, false), note)).toBe('forwarded');
    expect(sub.deliver(frame(3, 24, 310, false), note)).toBe('stale');
    const got = inlineSeqs(sink);
    expect(got.map((f) => f.seq)).toEqual([23, 24]);
    expect(isResync(got[0]!.flags)).toBe(true);
    expect(got[1]!.flags & FLAG_RESYNC).toBe(0);
  });

  it('AWP-DAT-009 the resync copy of a keyframe is made once and shared by every subscriber restarting on it', () => {
    const k = frame(1, 5, 0, true, 4096);
    const a = asResync(k);
    const b = asResync(k);
    expect(a).toBe(b);
    expect(a.buf).not.toBe(k.buf);
    expect(isResync(peekFrame(a.buf).flags)).toBe(true);
    expect(peekFrame(k.buf).flags & FLAG_RESYNC).toBe(0); // the shared original is untouched
    expect(asResync(a)).toBe(a);
  });

  it('AWP-TRN-009 AWP-TRN-012 while the stream socket is busy, a latest-wins channel holds one frame (the newest); reliable frames keep their order and go first', () => {
    const control = new RecordingSink();
    const sub = new Subscriber(control, 1024, 1 << 20);
    sub.subscribe(channel(1, 1000, true));
    sub.subscribe(channel(3, 1000, false));
    const socket = new RecordingSink();
    const sink = new WsStreamSink(connectionOf(socket), 1024, 1 << 20);
    sub.attachStream(sink);
    socket.busy = true;
    sub.deliver(frame(1, 1, 0), note);
    sub.deliver(frame(3, 1, 0), note);
    sub.deliver(frame(1, 2, 5), note);
    sub.deliver(frame(3, 2, 5, false), note);
    sub.deliver(frame(1, 3, 10), note);
    expect(socket.sent).toEqual([]);
    socket.busy = false;
    sink.drain();
    expect(control.sent).toEqual([]); // only the stream carries frames once it is up
    const got = socket.sent.map((b) => {
      const h = peekFrame(b as Uint8Array);
      return [h.channel_id, h.seq];
    });
    expect(got).toEqual([
      [3, 1],
      [3, 2],
      [1, 3],
    ]);
    expect(isResync(peekFrame(socket.sent[0] as Uint8Array).flags)).toBe(true);
  });

  it('AWP-DAT-009 AWP-TRN-012 a newer latest-wins frame replacing the unsent resync frame carries the resync on', () => {
    const control = new RecordingSink();
    const sub = new Subscriber(control, 1024, 1 << 20);
    sub.subscribe(channel(1, 1000, true));
    const socket = new RecordingSink();
    const sink = new WsStreamSink(connectionOf(socket), 1024, 1 << 20);
    sub.attachStream(sink);
    socket.busy = true;
    sub.deliver(frame(1, 7, 0), note, true); // the restart frame waits in the slot
    sub.deliver(frame(1, 8, 5), note); // and is replaced
    socket.busy = false;
    sink.drain();
    sub.deliver(frame(1, 9, 10), note); // the resync went out: back to plain frames
    const got = socket.sent.map((b) => peekFrame(b as Uint8Array));
    expect(got.map((h) => h.seq)).toEqual([8, 9]);
    expect(isResync(got[0]!.flags)).toBe(true);
    expect(got[1]!.flags & FLAG_RESYNC).toBe(0);
  });
  it('AWP-DAT-001 a session resumed on a hub that counts lower continues above what it got, renumbered from the resync keyframe', () => {
    const sink = new RecordingSink();
    const sub = new Subscriber(sink, 1024, 1 << 20);
    // Delivered up to seq 100 at another replica; this hub's upstream session is at seq 5.
    sub.subscribe(channel(3, 10, false), 100, true);
    const delta = frame(3, 4, 0, false);
    const key = frame(3, 5, 100);
    const next = frame(3, 6, 200, false);
    expect(sub.deliver(delta, note)).toBe('stale'); // below what it got, and no keyframe to restart on
    expect(sub.deliver(key, note)).toBe('forwarded');
    expect(sub.deliver(next, note)).toBe('forwarded');
    expect(sub.deliver(frame(3, 6, 200, false), note)).toBe('stale'); // a repeat stays a repeat
    expect(inlineSeqs(sink)).toEqual([
      { seq: 101, flags: FLAG_KEYFRAME | FLAG_RESYNC },
      { seq: 102, flags: 0 },
    ]);
    // The hub's shared frames are untouched: other observers get them as they are.
    expect(peekFrame(key.buf).seq).toBe(5);
    expect(peekFrame(next.buf).seq).toBe(6);
    expect(sub.positions().get('c3')).toBe(102);
  });

  it('a rebased channel on a hub that counts higher is not renumbered (no copy)', () => {
    const sink = new RecordingSink();
    const sub = new Subscriber(sink, 1024, 1 << 20);
    sub.subscribe(channel(3, 10, false), 100, true);
    const key = frame(3, 500, 0);
    expect(sub.deliver(key, note)).toBe('forwarded');
    expect(inlineSeqs(sink)).toEqual([{ seq: 500, flags: FLAG_KEYFRAME | FLAG_RESYNC }]);
  });
});

/** A recording socket as the engine's connection interface. */
function connectionOf(s: RecordingSink): ServerConnection {
  return {
    send: (data) => s.send(data),
    get bufferedAmount() {
      return s.bufferedAmount;
    },
    close: () => undefined,
    terminate: () => undefined,
    remoteAddress: '127.0.0.1',
  };
}

function isResync(flags: number): boolean {
  return (flags & (FLAG_RESYNC | FLAG_KEYFRAME)) === (FLAG_RESYNC | FLAG_KEYFRAME);
}
