/**
 * A hub's topics (src/fanout/hub-topics.ts) driven directly, on a stand-in for an engine with pub/sub:
 * who joins, what one publish counts, the topic's rate gate against a world sending above its declared
 * rate, seq across leave (AWP-DAT-001), backpressure, recorded members' taps and per-observer telemetry.
 */
import { describe, expect, it } from 'vitest';
import { FLAG_KEYFRAME, peekFrame } from '../../src/protocol/frame.js';
import { encodeFrame } from '../../src/protocol/frame-encode.js';
import type { HubFrame } from '../../src/fanout/keyframe-cache.js';
import type { FrameTap, SharedReader } from '../../src/fanout/observer-tap.js';
import {
  BUFFERS_READ_MS,
  HubTopics,
  MAX_SHARED,
  SHARD_BYTES,
  SHARD_MAX_MEMBERS,
  TopicShard,
  TOPIC_SCAN_MS,
} from '../../src/fanout/hub-topics.js';
import { Subscriber, type SubscribedChannel } from '../../src/fanout/subscriber.js';
import { WsStreamSink } from '../../src/fanout/ws-stream-sink.js';
import type { FrameNote, OutboxObserver } from '../../src/transport/outbox.js';
import type { ServerConnection } from '../../src/transport/engine.js';

const MS = 1_000_000;
const HIGH_WATER = 1024;

/** A server with topics: publish hands the message to every subscribed connection. */
class FakeServer {
  readonly subscribers = new Map<string, Set<FakeConn>>();
  publishes = 0;
  publish(topic: string, data: Uint8Array): void {
    this.publishes++;
    for (const c of this.subscribers.get(topic) ?? []) c.received.push(data);
  }
}

class FakeConn implements ServerConnection {
  readonly received: Uint8Array[] = [];
  buffered = 0;
  /** How often the hub read bufferedAmount (a call into the engine on uWS). */
  reads = 0;
  readonly remoteAddress = '127.0.0.1';
  readonly topics;
  constructor(server: FakeServer) {
    this.topics = {
      subscribe: (t: string) => {
        let s = server.subscribers.get(t);
        if (s === undefined) server.subscribers.set(t, (s = new Set()));
        s.add(this);
        return true;
      },
      unsubscribe: (t: string) => {
        server.subscribers.get(t)?.delete(this);
      },
      publish: (t: string, data: Uint8Array) => server.publish(t, data),
    };
  }
  send(data: string | Uint8Array): void {
    this.received.push(data as Uint8Array);
  }
  get bufferedAmount(): number {
    this.reads++;
    return this.buffered;
  }
  close(): void {}
  terminate(): void {}
}

class Counts implements OutboxObserver {
  readonly tally = new Map<string, { n: number; bytes: number }>();
  count(_channel: string, outcome: string, bytes: number, n = 1): void {
    const t = this.tally.get(outcome) ?? { n: 0, bytes: 0 };
    t.n += n;
    t.bytes += bytes;
    this.tally.set(outcome, t);
  }
  written(_note: FrameNote, bytes: number, n = 1): void {
    this.count('c', 'forwarded', bytes * n, n);
  }
  replaced(_note: FrameNote, bytes: number): void {
    this.count('c', 'replaced', bytes);
  }
  n(outcome: string): number {
    return this.tally.get(outcome)?.n ?? 0;
  }
}

function frame(seq: number, ts_ms: number, channel_id = 1, bytes = 16): HubFrame {
  const buf = encodeFrame({
    channel_id,
    seq,
    ts_mono_ns: ts_ms * MS,
    ts_send_ns: ts_ms * MS + 2 * MS, // 2 ms of pipeline latency
    flags: FLAG_KEYFRAME,
    payload: new Uint8Array(bytes),
    vendor: [],
  });
  const h = peekFrame(buf);
  return { buf, channel_id, seq, ts_mono_ns: h.ts_mono_ns, ts_send_ns: h.ts_send_ns, flags: h.flags };
}

const proprio: SubscribedChannel = {
  name: 'proprio',
  channel_id: 1,
  rate_hz: 100,
  latest_wins: true,
  per_tick: false,
  stale_after_ms: 50,
};

interface Observer {
  sub: Subscriber | null;
  readonly conn: FakeConn;
}

function setup(n: number, declared = 100) {
  const server = new FakeServer();
  const counts = new Counts();
  const topics = new HubTopics<Observer>('hub', {
    highWaterBytes: HIGH_WATER,
    frames: counts,
    declaredRate: () => declared,
  });
  const observers: Observer[] = [];
  for (let i = 0; i < n; i++) {
    const conn = new FakeConn(server);
    const sub = new Subscriber({ send: () => undefined, bufferedAmount: 0 }, HIGH_WATER, 1 << 20);
    sub.subscribe(proprio);
    sub.attachStream(new WsStreamSink(conn, HIGH_WATER, 1 << 20, counts));
    observers.push({ sub, conn });
  }
  const note = { received_at: 0, channel: 'proprio' };
  /** A frame as the hub's pass fans it out: one publish per shard of members, the others one by one. */
  const fanOut = (f: HubFrame, now: number) => {
    for (const t of topics.targets(f, note, now, observers)) {
      if (t instanceof TopicShard) t.publish(f, note, () => now);
      else if (t.sub?.deliver(f, note) === 'forwarded') topics.consider(t, t.sub, f);
    }
  };
  return { server, counts, topics, observers, fanOut };
}

/** A frame every 10 ms (seq 1, 2, ...) through `fanOut`: `run(ms)` moves the clock on, `now()` reads it. */
function everyTenMs(fanOut: (f: HubFrame, now: number) => void) {
  let t = 0;
  let s = 1;
  return {
    run: (ms: number) => {
      for (const end = t + ms; t < end; t += 10, s++) fanOut(frame(s, t), t);
    },
    now: () => t,
  };
}

const note = (): FrameNote => ({ received_at: 0, channel: 'proprio' });

/** A flight recorder's tap as the edge's does it: numbers shared frames by seq, reads its shards on demand. */
class Recording implements FrameTap {
  /** Seqs in the order the recording took them, with the publish time (ms) of those read from a shard. */
  readonly frames: [seq: number, atMs?: number][] = [];
  readonly numbered: number[] = [];
  readonly following = new Map<number, SharedReader>();
  delivered(f: HubFrame, onStream: boolean): void {
    this.readAll();
    expect(onStream).toBe(true);
    this.frames.push([f.seq]);
  }
  shared(f: HubFrame): number {
    this.numbered.push(f.seq);
    return f.seq;
  }
  follow(channel_id: number, reader: SharedReader | undefined): void {
    if (reader !== undefined) return void this.following.set(channel_id, reader);
    this.readAll();
    this.following.delete(channel_id);
  }
  /** Returns how many publishes were lost. */
  readAll(): number {
    let lost = 0;
    for (const r of this.following.values()) lost += r.read((n, at) => this.frames.push([n, at]));
    return lost;
  }
}

function seqs(conn: FakeConn): number[] {
  return conn.received.map((b) => peekFrame(b as Buffer).seq);
}

describe('hub topics', () => {
  it('steady-state subscribers join after an individual delivery; then one publish per frame, counted once per member', () => {
    const { server, counts, topics, observers, fanOut } = setup(3);
    fanOut(frame(1, 0), 0); // the restart keyframe (resync), individually
    fanOut(frame(2, 10), 10); // the second one leaves them eligible: they join
    expect(topics.members(1)).toBe(3);
    const before = server.publishes;
    for (let s = 3; s <= 12; s++) fanOut(frame(s, (s - 1) * 10), (s - 1) * 10);
    expect(server.publishes - before).toBe(10);
    expect(topics.targets(frame(13, 120), note(), 120, observers).every((t) => t instanceof TopicShard)).toBe(
      true,
    );
    for (const o of observers) expect(seqs(o.conn)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    expect(counts.n('forwarded')).toBe(3 * 12);
  });

  it('AWP-DAT-001 a world repeating or going back in seq publishes nothing to members', () => {
    const { server, topics, observers, fanOut } = setup(2);
    for (let s = 1; s <= 5; s++) fanOut(frame(s, s * 10), s * 10);
    expect(topics.members(1)).toBe(2);
    const before = server.publishes;
    fanOut(frame(5, 60), 60); // a repeat
    fanOut(frame(3, 70), 70); // back in time
    expect(server.publishes).toBe(before);
    fanOut(frame(6, 80), 80);
    for (const o of observers) expect(seqs(o.conn)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('AWP-DAT-003 a world sending twice its declared rate gets members no more than their gates would pass', () => {
    const { counts, topics, observers, fanOut } = setup(2);
    for (let s = 1; s <= 400; s++) fanOut(frame(s, s * 5), s * 5); // 200 Hz for 2 s, declared 100 Hz
    expect(topics.members(1)).toBe(2);
    for (const o of observers) {
      const got = seqs(o.conn);
      expect(got.length).toBeGreaterThanOrEqual(195);
      expect(got.length).toBeLessThanOrEqual(205);
    }
    expect(counts.n('downsampled') + counts.n('forwarded')).toBe(2 * 400);
  });

  it('a subscriber granted less than the declared rate keeps its own gate (never a member)', () => {
    const { topics, fanOut } = setup(1, 200);
    for (let s = 1; s <= 20; s++) fanOut(frame(s, s * 10), s * 10);
    expect(topics.members(1)).toBe(0);
  });

  it('AWP-DAT-001 a member held up by backpressure leaves at the next scan with the topic last seq; seq goes on above it', () => {
    const { topics, observers, fanOut } = setup(2);
    fanOut(frame(1, 0), 0);
    fanOut(frame(2, 10), 10);
    expect(topics.members(1)).toBe(2);
    const slow = observers[1]!;
    slow.conn.buffered = HIGH_WATER; // the engine holds high water for it
    let t = 20;
    let s = 3;
    for (; t <= 20 + TOPIC_SCAN_MS; t += 10, s++) fanOut(frame(s, t), t);
    expect(topics.members(1)).toBe(1);
    expect(slow.sub!.isMember(1)).toBe(false);
    // It left at the scan before frame 3 with the topic's last seq (2); 3-5 went to its latest-wins slot.
    expect(seqs(slow.conn)).toEqual([1, 2]);
    expect(slow.sub!.positions().get('proprio')).toBe(5);
    // Back below high water: its next frame goes individually, then it joins again.
    slow.conn.buffered = 0;
    for (let i = 0; i < 3; i++, t += 10, s++) fanOut(frame(s, t), t);
    expect(topics.members(1)).toBe(2);
    for (const o of observers) {
      const got = seqs(o.conn);
      for (let i = 1; i < got.length; i++) expect(got[i]!).toBeGreaterThan(got[i - 1]!);
    }
    // The fast one missed nothing.
    expect(seqs(observers[0]!.conn)).toEqual(Array.from({ length: s - 1 }, (_, i) => i + 1));
  });

  it("members' buffers are read once what their shard published could have filled one, or BUFFERS_READ_MS after the last read", () => {
    const { topics, observers, fanOut } = setup(2);
    const { run, now } = everyTenMs(fanOut);
    run(100);
    expect(topics.members(1)).toBe(2);
    const [fast, slow] = observers as [Observer, Observer];
    fast.conn.reads = 0;
    run(1000); // 100 frames, 50 scans
    const perFrame = fast.conn.received.at(-1)!.byteLength;
    // Read when the published bytes reach high water (or BUFFERS_READ_MS passed), not at every scan.
    const every = Math.min(Math.ceil(HIGH_WATER / perFrame) * 10, BUFFERS_READ_MS);
    expect(fast.conn.reads).toBeLessThanOrEqual(Math.ceil(1000 / every) + 1);
    expect(fast.conn.reads).toBeGreaterThanOrEqual(Math.floor(1000 / (every + TOPIC_SCAN_MS)));
    // A buffer filled by other writes than the shard's is still found within BUFFERS_READ_MS.
    slow.conn.buffered = HIGH_WATER;
    const at = now();
    for (let i = 0; i < 100 && slow.sub!.isMember(1); i++) run(10);
    expect(now() - at).toBeLessThanOrEqual(BUFFERS_READ_MS + TOPIC_SCAN_MS + 10);
    expect(topics.members(1)).toBe(1);
  });

  it('a shard none of whose members is due a read is not looked at until BUFFERS_READ_MS after the last full scan; a stale member leaves then', () => {
    const { topics, observers, fanOut } = setup(2);
    // Observers that count how often the hub looks at them (each member's "still current?" reads `sub`).
    let looks = 0;
    observers.forEach((o, i) => {
      let sub = o.sub;
      observers[i] = {
        conn: o.conn,
        get sub() {
          looks++;
          return sub;
        },
        set sub(s) {
          sub = s;
        },
      };
    });
    const { run, now } = everyTenMs(fanOut);
    run(100);
    expect(topics.members(1)).toBe(2);
    looks = 0;
    run(1000); // 100 frames, 50 scans
    const perFrame = observers[0]!.conn.received.at(-1)!.byteLength;
    const every = Math.ceil(HIGH_WATER / perFrame) * 10;
    // Looked at when one could be due a read, and at each full scan: not at all 50 scans.
    expect(looks).toBeLessThanOrEqual(2 * (Math.ceil(1000 / every) + Math.ceil(1000 / BUFFERS_READ_MS) + 2));
    // A session that let go of its subscriber without leaving the topic: found by the next full scan.
    observers[1]!.sub = null;
    const at = now();
    for (let i = 0; i < 100 && topics.members(1) === 2; i++) run(10);
    expect(now() - at).toBeLessThanOrEqual(BUFFERS_READ_MS + TOPIC_SCAN_MS + 10);
    expect(topics.members(1)).toBe(1);
  });

  it('each member has its own room: one near high water is read at every scan, the others no more often than before', () => {
    const { topics, observers, fanOut } = setup(2);
    const { run } = everyTenMs(fanOut);
    run(100);
    expect(topics.members(1)).toBe(2);
    const [fast, full] = observers as [Observer, Observer];
    // Within one frame of high water: whatever the shard publishes next could take it there.
    full.conn.buffered = HIGH_WATER - 1;
    run(20); // its next read sees it near high water
    fast.conn.reads = 0;
    full.conn.reads = 0;
    run(1000); // 100 frames, 50 scans
    const perFrame = fast.conn.received.at(-1)!.byteLength;
    const every = Math.min(Math.ceil(HIGH_WATER / perFrame) * 10, BUFFERS_READ_MS);
    // Read at (nearly) every scan that follows a publish; the one with room, only as its own room runs out.
    expect(full.conn.reads).toBeGreaterThanOrEqual(0.8 * (1000 / TOPIC_SCAN_MS));
    expect(fast.conn.reads).toBeLessThanOrEqual(Math.ceil(1000 / every) + 1);
    expect(topics.members(1)).toBe(2); // below high water, both stay
  });

  it('a recorded session is a member too: its recording reads what the shard published, numbered once per publish; telemetry counts them', () => {
    const { server, topics, observers, fanOut } = setup(2);
    const [o, other] = observers as [Observer, Observer];
    for (let s = 1; s <= 10; s++) fanOut(frame(s, s * 10), s * 10);
    expect(topics.members(1)).toBe(2);
    const taken = o.sub!.takeTelemetry();
    expect(taken.channels.get(1)?.count).toBe(10);
    expect(taken.channels.get(1)?.p50).toBe(2 * MS);
    const rec = new Recording();
    o.sub!.frameTap = rec;
    // A new tap: the channel leaves, takes frame 11 one by one (told so), and rejoins with the tap.
    expect(topics.members(1)).toBe(1);
    const published = server.publishes;
    for (let s = 11; s <= 15; s++) fanOut(frame(s, s * 10), s * 10);
    expect(topics.members(1)).toBe(2);
    expect(server.publishes - published).toBe(5); // frame 11 to the other member, 12-15 to both
    expect(rec.numbered).toEqual([12, 13, 14, 15]); // once per publish, not per member
    expect(rec.frames).toEqual([[11]]); // the shard's publishes wait to be read
    rec.readAll();
    expect(rec.frames).toEqual([[11], ...[12, 13, 14, 15].map((s) => [s, s * 10])]);
    for (const x of [o, other]) expect(seqs(x.conn)).toEqual(Array.from({ length: 15 }, (_, i) => i + 1));
    expect(o.sub!.takeTelemetry().channels.get(1)?.count).toBe(5);
    fanOut(frame(16, 160), 160);
    o.sub!.frameTap = undefined; // the recording ends: the channel leaves, read one last time
    expect(rec.following.size).toBe(0);
    for (let s = 17; s <= 18; s++) fanOut(frame(s, s * 10), s * 10);
    expect(rec.frames.map(([seq]) => seq)).toEqual([11, 12, 13, 14, 15, 16]);
    expect(rec.numbered).toEqual([12, 13, 14, 15, 16]);
    expect(topics.members(1)).toBe(2);
  });

  it('a recording that does not read loses the oldest publishes beyond the bound, and is told how many', () => {
    const { topics, observers, fanOut } = setup(1);
    const [o] = observers as [Observer];
    const rec = new Recording();
    o.sub!.frameTap = rec;
    const n = MAX_SHARED + 500;
    for (let s = 1; s <= n; s++) fanOut(frame(s, s * 10), s * 10);
    expect(topics.members(1)).toBe(1);
    const lost = rec.readAll();
    expect(lost).toBeGreaterThan(0);
    // What it read is the newest, in order, with nothing in between missing; with what was lost, every publish.
    const seqsRead = rec.frames.filter(([, at]) => at !== undefined).map(([seq]) => seq);
    expect(seqsRead.at(-1)).toBe(n);
    expect(seqsRead.every((s, i) => i === 0 || s === seqsRead[i - 1]! + 1)).toBe(true);
    expect(seqsRead.length + lost).toBe(rec.numbered.length);
    // The bound is applied at each scan (every TOPIC_SCAN_MS; a frame every 10 ms here).
    expect(seqsRead.length).toBeLessThanOrEqual(MAX_SHARED + TOPIC_SCAN_MS / 10);
  });

  it('a shard log read up to a bound stops before it and names what comes next (how a recording merges its shards)', () => {
    const { observers, fanOut } = setup(1);
    const rec = new Recording();
    observers[0]!.sub!.frameTap = rec;
    for (let s = 1; s <= 10; s++) fanOut(frame(s, s * 10), s * 10);
    const r = rec.following.get(1)!;
    const first = r.nextN;
    expect(r.waiting).toBe(true);
    expect(r.nextAt).toBe(first * 10); // the recording numbers a frame by its seq; published at seq * 10 ms
    const got: number[] = [];
    // Up to (not including) the frame published at the same time with a lower number than first + 3.
    r.read((n) => got.push(n), (first + 3) * 10, first + 3);
    expect(got).toEqual([first, first + 1, first + 2]);
    expect([r.nextAt, r.nextN]).toEqual([(first + 3) * 10, first + 3]);
    r.read((n) => got.push(n), (first + 3) * 10, first + 4); // a tie in time: the lower number first
    expect(got.at(-1)).toBe(first + 3);
    r.read((n) => got.push(n));
    expect(got.at(-1)).toBe(10);
    expect(r.waiting).toBe(false);
    expect(r.nextAt).toBe(Infinity);
  });

  it('members are split into shards, one publish each; large frames in smaller shards; a join takes a shard that had its frame', () => {
    const n = SHARD_MAX_MEMBERS + 10;
    const { server, topics, observers, fanOut } = setup(n);
    fanOut(frame(1, 0), 0);
    fanOut(frame(2, 10), 10);
    expect(topics.members(1)).toBe(n);
    let before = server.publishes;
    fanOut(frame(3, 20), 20);
    expect(server.publishes - before).toBe(2); // SHARD_MAX_MEMBERS + 10 members: two shards
    for (const o of observers) expect(seqs(o.conn)).toEqual([1, 2, 3]);

    // A large-frame channel: shards of about SHARD_BYTES per publish.
    const big = 256 * 1024;
    const large = setup(10);
    large.fanOut(frame(1, 0, 1, big), 0);
    large.fanOut(frame(2, 10, 1, big), 10);
    expect(large.topics.members(1)).toBe(10);
    before = large.server.publishes;
    large.fanOut(frame(3, 20, 1, big), 20);
    expect(large.server.publishes - before).toBe(Math.ceil(10 / Math.max(4, SHARD_BYTES / big)));
    for (const o of large.observers) expect(seqs(o.conn)).toEqual([1, 2, 3]);
  });

  it('AWP-DAT-001 a pass that stops between shards: a channel joining meanwhile takes a shard that had its frame', () => {
    const { topics, observers } = setup(3);
    const serve = (targets: readonly (Observer | TopicShard)[], f: HubFrame) => {
      for (const t of targets) {
        if (t instanceof TopicShard) t.publish(f, note(), () => 0);
        else if (t.sub?.deliver(f, note()) === 'forwarded') topics.consider(t, t.sub, f);
      }
    };
    const at = (s: number) => frame(s, s * 10);
    // Two observers join (one shard, with room); the third takes no part yet.
    const [a, b, late] = observers as [Observer, Observer, Observer];
    for (let s = 1; s <= 2; s++) serve(topics.targets(at(s), note(), s * 10, [a, b]), at(s));
    expect(topics.members(1)).toBe(2);
    // Frame 3's pass reaches the third observer (individually: its restart keyframe) but not the shard yet.
    const pass3 = topics.targets(at(3), note(), 30, observers);
    serve(
      pass3.filter((t) => !(t instanceof TopicShard)),
      at(3),
    );
    // Frame 4 the same: the third observer joins after it, while the shard has had neither 3 nor 4.
    const pass4 = topics.targets(at(4), note(), 40, observers);
    serve(
      pass4.filter((t) => !(t instanceof TopicShard)),
      at(4),
    );
    expect(topics.members(1)).toBe(3);
    // The late passes reach the old shard: the third observer is not in it (it would get 3 and 4 again).
    serve(
      pass3.filter((t) => t instanceof TopicShard),
      at(3),
    );
    serve(
      pass4.filter((t) => t instanceof TopicShard),
      at(4),
    );
    serve(topics.targets(at(5), note(), 50, observers), at(5));
    expect(seqs(late.conn)).toEqual([3, 4, 5]);
    for (const o of [a, b]) expect(seqs(o.conn)).toEqual([1, 2, 3, 4, 5]);
  });

  it('stream lost, unsubscribe and a new grant leave the topic', () => {
    const { topics, observers, fanOut } = setup(3);
    fanOut(frame(1, 0), 0);
    fanOut(frame(2, 10), 10);
    expect(topics.members(1)).toBe(3);
    const [a, b, c] = observers as [Observer, Observer, Observer];
    a.sub!.closeStream(1000, 'test');
    b.sub!.unsubscribe(1);
    c.sub!.subscribe({ ...proprio, rate_hz: 50 });
    expect(topics.members(1)).toBe(0);
    expect(c.sub!.positions().get('proprio')).toBe(2);
  });
});
