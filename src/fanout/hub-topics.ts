/**
 * A hub's topics (issue 15): on an engine with pub/sub (uWebSockets.js), the stream subscribers of a
 * latest-wins channel that are in their steady state are served with one `publish` per frame and group of
 * members, fanned out by the engine, instead of one write per subscriber. Everyone else keeps the
 * per-observer path (`Subscriber.deliver`); a channel moves between the two:
 *
 * - It joins (`consider`) after an individual delivery that leaves it eligible (`Subscriber.joinable`: a
 *   `ws` stream with pub/sub, full rate, not restarting, no resync pending, not renumbered, nothing queued
 *   and the engine below high water).
 * - It leaves (`Subscriber.leaveTopic`/`leaveTopics`) on a new grant, unsubscribe, stream lost or replaced,
 *   resumed or released session, a new frame tap, and when the engine holds high water for it: the engine's
 *   per-connection limit is off (maxBackpressure 0), so each member's buffer is read once what its shard
 *   published since the last read could have taken it to high water (looked for every `TOPIC_SCAN_MS` as
 *   frames arrive, `TopicShard.scan`), and every member's every `BUFFERS_READ_MS`; a slow member leaves
 *   with at most what was published meanwhile beyond high water. Once left, its frames wait in its
 *   outbox's latest-wins slots again.
 * - One topic per channel and gate rate, with one rate gate: a world sending faster than it declared gets
 *   no more to members than their own gates would have passed; a leaving member's gate goes on from the
 *   topic's.
 * - A topic's members are split into shards (an engine topic each), and the shards are targets of the hub's
 *   time-bounded passes (hub-passes.ts) like single observers: no event-loop turn writes a frame to a
 *   thousand sockets at once, and a newer latest-wins frame supersedes an older one for the shards it has
 *   not reached yet. The engine writes a small frame to a shard's members after the turn (once per loop
 *   iteration), so a publish tells the pass what that will cost (`DEFERRED_MS_PER_DELIVERY`); large frames
 *   it writes at once, in smaller shards (`SHARD_BYTES`).
 * - seq: each shard publishes strictly increasing seqs; a member's last seq is its shard's, and becomes
 *   its own when it leaves (AWP-DAT-001 across join and leave). A channel joins a shard that has already
 *   had the frame it was just given, or a new one.
 * - Metrics: one publish counts `forwarded` once with n = members (and one forward-latency observation);
 *   the topic keeps the pipeline latency of what it passed once, members take their share of it for
 *   their session.telemetry (AWP-TIM-006).
 * - Recorded sessions (issue 14) are members too: a shard that has recorded members has each frame it
 *   publishes numbered once by the recorder (`FrameTap.shared`) and keeps the numbers and times in a
 *   bounded log, which each recorded member's recording reads when it next writes (`SharedReader`): a
 *   publish costs the recorder one number, not a call per recorded member.
 */
import type { FrameMetrics } from '../telemetry/frame-metrics.js';
import type { FrameNote } from '../transport/outbox.js';
import type { HubFrame } from './keyframe-cache.js';
import { RateGate } from './rate-gate.js';
import type { FrameTap, SharedReader } from './observer-tap.js';
import type { Membership, Subscriber, TopicPort } from './subscriber.js';

/** How often members are looked at, at most (ms; as frames arrive). */
export const TOPIC_SCAN_MS = 20;
/**
 * How often members' engine buffers are read at least, while frames arrive, when what was published since
 * could not have taken any of them to high water (other writes on the same connection, which stop at high
 * water themselves, and the engine's own buffering may add some).
 */
export const BUFFERS_READ_MS = 200;
/** Members of a shard, at most: one publish writes to this many sockets. */
export const SHARD_MAX_MEMBERS = 64;
/** A shard of a topic whose frames are large holds fewer members: about this many bytes per publish. */
export const SHARD_BYTES = 1024 * 1024;
/**
 * Frames smaller than this the engine queues and writes after the turn (uWS: its cork buffer); larger
 * ones it writes in the publish itself.
 */
export const ENGINE_QUEUED_BELOW_BYTES = 16 * 1024;
/** What the engine's write of a queued frame to one member costs later (ms; uWS publish, measured ~3 us). */
export const DEFERRED_MS_PER_DELIVERY = 0.003;
/** Pipeline latency samples a topic keeps for members that have not taken them (oldest dropped beyond). */
const MAX_SAMPLES = 65_536;
/**
 * Publishes a shard's log keeps for recorded members that have not read them (oldest dropped beyond):
 * minutes at any channel's rate, where recordings read at least every tick (250 ms).
 */
export const MAX_SHARED = 65_536;

export interface TopicsContext {
  readonly highWaterBytes: number;
  /** Downsampled publishes are counted here (n = members). */
  readonly frames: Pick<FrameMetrics, 'count'>;
  /** The declared rate of a channel, by name (null: none declared). */
  declaredRate(channel: string): number | null | undefined;
}

class Member implements Membership, SharedReader {
  cursor: number;
  /** The next entry of the shard's log of publishes this member's recording reads. */
  sharedCursor: number;
  /** What the shard may have published before this member's buffer could hold high water (see `scan`). */
  checkAt = 0;

  constructor(
    readonly shard: TopicShard,
    readonly sub: Subscriber,
    readonly port: TopicPort,
    /** Whether the member is still what its session delivers to (the same Subscriber and stream). */
    readonly current: () => boolean,
    /** The flight recorder's tap of the session, if it is recorded. */
    readonly tap: FrameTap | undefined,
  ) {
    this.cursor = shard.topic.end;
    this.sharedCursor = shard.sharedEnd;
  }

  get waiting(): boolean {
    return this.sharedCursor < this.shard.sharedEnd;
  }

  /** Where the next entry it has not read is in the shard's log (past what the log no longer holds). */
  private get index(): number {
    return 2 * Math.max(0, this.sharedCursor - this.shard.sharedBase);
  }

  get nextAt(): number {
    return this.shard.shared[this.index + 1] ?? Infinity;
  }

  get nextN(): number {
    return this.shard.shared[this.index] ?? Infinity;
  }

  read(each: (n: number, atMs: number) => void, beforeAt = Infinity, beforeN = Infinity): number {
    const s = this.shard;
    const lost = Math.max(0, s.sharedBase - this.sharedCursor);
    const log = s.shared;
    let i = this.index;
    for (; i < log.length; i += 2) {
      const n = log[i]!;
      const at = log[i + 1]!;
      if (at > beforeAt || (at === beforeAt && n >= beforeN)) break;
      each(n, at);
    }
    this.sharedCursor = s.sharedBase + i / 2;
    return lost;
  }

  get lastSeq(): number {
    return this.shard.lastSeq;
  }

  get gate(): RateGate {
    return this.shard.topic.gate;
  }

  takeLatency(): number[] {
    const t = this.shard.topic;
    const v = t.samplesSince(this.cursor);
    this.cursor = t.end;
    return v;
  }

  leave(): void {
    this.shard.remove(this);
  }
}

/** A group of a topic's members, one engine topic: what a hub pass offers a frame to, as to an observer. */
export class TopicShard {
  readonly members = new Set<Member>();
  /** The members whose sessions are recorded. */
  private readonly tapped = new Set<Member>();
  /** Publishes since `sharedBase`, while members are recorded: flat pairs (the frame's number, ms). */
  shared: number[] = [];
  sharedBase = 0;
  /** Bytes published to the shard so far. */
  private publishedBytes = 0;
  /** The lowest of its members' `checkAt`: before the shard has published that much, none is due a read. */
  private dueAt = 0;

  constructor(
    readonly topic: ChannelTopic,
    readonly name: string,
    /** The last seq published to this shard. */
    public lastSeq: number,
  ) {}

  get size(): number {
    return this.members.size;
  }

  /** The index of the next publish in the shared log. */
  get sharedEnd(): number {
    return this.sharedBase + this.shared.length / 2;
  }

  add(m: Member): void {
    this.members.add(m);
    this.dueAt = Math.min(this.dueAt, m.checkAt);
    if (m.tap !== undefined) {
      this.tapped.add(m);
      m.tap.follow(this.topic.channel_id, m);
    }
    this.topic.changed();
  }

  remove(m: Member): void {
    if (!this.members.delete(m)) return;
    if (this.tapped.delete(m)) m.tap!.follow(this.topic.channel_id, undefined);
    m.port.leave(this.name);
    this.topic.changed();
  }

  /**
   * Members whose engine buffer holds high water, or that are stale (their session no longer holds them),
   * leave. A member's buffer is read (a call into the engine) only once what the shard published since its
   * last read could have taken it to high water, or on a full scan (`all`, every BUFFERS_READ_MS): members
   * that keep up hold little, and at a thousand of them the reads every TOPIC_SCAN_MS were a tenth of an
   * overloaded edge's longest turns. Each member has its own room, and a shard none of whose members is
   * due is not looked at until the full scan: looking at all 3,600 members of 1,819 observers every
   * TOPIC_SCAN_MS, only to find most not due, took a tenth of the edge's main thread at 5x overload
   * (bench/RESULTS.md). Returns the lowest latency-sample cursor of its members (on a full scan).
   */
  scan(highWaterBytes: number, all: boolean): number {
    this.trimShared();
    let low = this.topic.end;
    if (!all && this.publishedBytes < this.dueAt) return low;
    let due = Infinity;
    // A Set's iteration goes on past a member deleted from it.
    for (const m of this.members) {
      let buffered = 0;
      if (all || this.publishedBytes >= m.checkAt) {
        buffered = m.port.bufferedAmount;
        m.checkAt = this.publishedBytes + (highWaterBytes - buffered);
      }
      if (m.current() && buffered < highWaterBytes) {
        low = Math.min(low, m.cursor);
        due = Math.min(due, m.checkAt);
        continue;
      }
      m.sub.leaveTopic(this.topic.channel_id);
      this.remove(m); // if its session no longer holds it
    }
    this.dueAt = due;
    return low;
  }

  /** Lets go of the publishes every recorded member has read (all of them when none is left). */
  trimShared(): void {
    let low = this.sharedEnd;
    for (const m of this.tapped) low = Math.min(low, m.sharedCursor);
    low = Math.max(low, this.sharedEnd - MAX_SHARED);
    if (low <= this.sharedBase) return;
    this.shared = this.shared.slice(2 * (low - this.sharedBase));
    this.sharedBase = low;
  }

  /** Publishes `frame` to the members; returns the engine's deferred work it caused (ms). */
  /** `now`: monotonic ms, asked when recorded members are published to. */
  publish(frame: HubFrame, note: FrameNote, now: () => number): number {
    const n = this.members.size;
    if (n === 0 || frame.seq <= this.lastSeq) return 0;
    this.lastSeq = frame.seq;
    this.publishedBytes += frame.buf.length;
    // The server's publish: any member's connection reaches it.
    const first = this.members.values().next().value!;
    first.port.publish(this.name, frame, note, n);
    if (this.tapped.size > 0) {
      const one = this.tapped.values().next().value!;
      this.shared.push(one.tap!.shared(frame), now());
      if (this.shared.length > 4 * MAX_SHARED) this.trimShared();
    }
    return frame.buf.length < ENGINE_QUEUED_BELOW_BYTES ? n * DEFERRED_MS_PER_DELIVERY : 0;
  }
}

class ChannelTopic {
  readonly shards: TopicShard[] = [];
  /** The last seq that passed the gate (a world repeating or going back in seq passes nothing). */
  lastSeq = -1;
  readonly gate: RateGate;
  private samples: number[] = [];
  /** Index (since the topic began) of samples[0]. */
  private base = 0;
  private nextShard = 0;
  private members = 0;

  constructor(
    readonly name: string,
    readonly channel_id: number,
    rate_hz: number | null,
    /** Members per shard (fewer for large frames). */
    private readonly shardSize: number,
    private readonly onChange: (channel_id: number) => void,
  ) {
    this.gate = RateGate.forRate(rate_hz);
  }

  get size(): number {
    return this.members;
  }

  get end(): number {
    return this.base + this.samples.length;
  }

  changed(): void {
    this.members = this.shards.reduce((n, s) => n + s.size, 0);
    this.onChange(this.channel_id);
  }

  samplesSince(cursor: number): number[] {
    return this.samples.slice(Math.max(0, cursor - this.base));
  }

  /** A shard for a channel whose last seq is `lastSeq`: one that has had that frame, with room, or a new one. */
  shardFor(lastSeq: number): TopicShard {
    const fit = this.shards.find((s) => s.size < this.shardSize && s.lastSeq >= lastSeq);
    if (fit !== undefined) return fit;
    const s = new TopicShard(this, `${this.name}/s${this.nextShard++}`, lastSeq);
    this.shards.push(s);
    return s;
  }

  /** A frame arrived: whether the topic's shards take it (its gate passes it). */
  admit(frame: HubFrame, note: FrameNote, ctx: TopicsContext): boolean {
    const n = this.members;
    if (n === 0 || frame.seq <= this.lastSeq) return false;
    if (!this.gate.pass(frame.ts_mono_ns)) {
      ctx.frames.count(note.channel, 'downsampled', n * frame.buf.length, n);
      return false;
    }
    this.lastSeq = frame.seq;
    if (frame.ts_send_ns !== undefined) this.samples.push(frame.ts_send_ns - frame.ts_mono_ns);
    return true;
  }

  /** Slow or stale members leave; empty shards go; on a full scan, samples every member took are let go. */
  scan(highWaterBytes: number, all: boolean): void {
    let low = this.end;
    let emptied = false;
    for (const s of this.shards) {
      low = Math.min(low, s.scan(highWaterBytes, all));
      emptied ||= s.size === 0;
    }
    if (emptied) {
      this.shards.splice(0, this.shards.length, ...this.shards.filter((s) => s.size > 0));
      this.changed();
    }
    if (!all) return;
    low = Math.max(low, this.end - MAX_SAMPLES);
    if (low > this.base) {
      this.samples = this.samples.slice(low - this.base);
      this.base = low;
    }
  }

  clear(): void {
    for (const s of this.shards)
      for (const m of s.members) {
        m.sub.leaveTopic(this.channel_id);
        s.remove(m);
      }
  }
}

/** What a channel's frames are offered to: single observers, and shards of members. */
export type TopicTarget<T> = T | TopicShard;

interface TargetCache<T> {
  readonly from: readonly T[];
  readonly version: number;
  /** By the set of topics (bit i: topic i) that take the frame. */
  readonly lists: Map<number, readonly TopicTarget<T>[]>;
  readonly individual: readonly T[];
}

export class HubTopics<T extends { readonly sub: Subscriber | null }> {
  /** Topics by channel id (one per gate rate). */
  private readonly topics = new Map<number, ChannelTopic[]>();
  /** Membership versions by channel id: the target lists are rebuilt when they change. */
  private readonly versions = new Map<number, number>();
  private readonly cache = new Map<number, TargetCache<T>>();
  private lastScan = -Infinity;
  /** When every member's buffer was last read. */
  private readAt = -Infinity;

  constructor(
    /** Names the hub's topics (unique on the server). */
    private readonly prefix: string,
    private readonly ctx: TopicsContext,
  ) {}

  /** After an individual delivery of `frame`: the subscriber's channel joins its topic if it may. */
  consider(o: T, sub: Subscriber, frame: HubFrame): void {
    const channel_id = frame.channel_id;
    const j = sub.joinable(channel_id, this.ctx.highWaterBytes);
    if (j === null) return;
    const declared = this.ctx.declaredRate(j.name);
    if (declared === undefined) return;
    if (j.rate_hz !== null && (declared === null || j.rate_hz < declared)) return; // downsampled: its own gate
    const topic = this.topicFor(channel_id, j.rate_hz, frame.buf.length);
    if (topic === null) return;
    const shard = topic.shardFor(j.lastSeq);
    if (!j.port.join(shard.name)) return;
    if (topic.size === 0) topic.gate.follow(j.gate);
    topic.lastSeq = Math.max(topic.lastSeq, j.lastSeq);
    const m = new Member(shard, sub, j.port, () => o.sub === sub && sub.isMember(channel_id), j.tap);
    shard.add(m);
    sub.joined(channel_id, m);
  }

  /**
   * What a frame that arrived is offered to: the channel's subscribers that are not members, and the shards
   * of the topics that take it (a new array whenever that changes).
   */
  targets(frame: HubFrame, note: FrameNote, now: number, all: readonly T[]): readonly TopicTarget<T>[] {
    const channel_id = frame.channel_id;
    const list = this.topics.get(channel_id);
    if (list === undefined) return all;
    if (now - this.lastScan >= TOPIC_SCAN_MS) {
      this.lastScan = now;
      const all = now - this.readAt >= BUFFERS_READ_MS;
      if (all) this.readAt = now;
      for (const ts of this.topics.values()) for (const t of ts) t.scan(this.ctx.highWaterBytes, all);
    }
    let taking = 0;
    let members = 0;
    for (let i = 0; i < list.length; i++) {
      const t = list[i]!;
      members += t.size;
      if (t.admit(frame, note, this.ctx)) taking |= 1 << i;
    }
    if (members === 0) return all;
    const version = this.versions.get(channel_id) ?? 0;
    let c = this.cache.get(channel_id);
    if (c === undefined || c.from !== all || c.version !== version) {
      const individual = all.filter((o) => !(o.sub?.isMember(channel_id) ?? false));
      this.cache.set(channel_id, (c = { from: all, version, lists: new Map(), individual }));
    }
    let targets = c.lists.get(taking);
    if (targets === undefined) {
      const shards = list.filter((_, i) => (taking & (1 << i)) !== 0).flatMap((t) => t.shards);
      targets = shards.length === 0 ? c.individual : [...shards, ...c.individual];
      c.lists.set(taking, targets);
    }
    return targets;
  }

  /** Members of a channel's topics (tests, metrics). */
  members(channel_id: number): number {
    let n = 0;
    for (const t of this.topics.get(channel_id) ?? []) n += t.size;
    return n;
  }

  /** Every member leaves (the hub is done). */
  clear(): void {
    for (const ts of this.topics.values()) for (const t of ts) t.clear();
    this.topics.clear();
    this.cache.clear();
  }

  /** The channel's topic for a gate rate (null: a channel with 31 rates already, which stays one by one). */
  private topicFor(channel_id: number, rate_hz: number | null, frameBytes: number): ChannelTopic | null {
    let list = this.topics.get(channel_id);
    if (list === undefined) this.topics.set(channel_id, (list = []));
    const name = `${this.prefix}/${channel_id}@${rate_hz ?? 'all'}`;
    const found = list.find((x) => x.name === name);
    if (found !== undefined) return found;
    if (list.length >= 31) return null; // `targets` keeps which topics take a frame in one int's bits
    const size = Math.max(4, Math.min(SHARD_MAX_MEMBERS, Math.floor(SHARD_BYTES / Math.max(1, frameBytes))));
    const t = new ChannelTopic(name, channel_id, rate_hz, size, (id) =>
      this.versions.set(id, (this.versions.get(id) ?? 0) + 1),
    );
    list.push(t);
    return t;
  }
}

/** How many deliveries a target of a hub pass stands for (a shard: its members). */
export function targetWeight(t: unknown): number {
  return t instanceof TopicShard ? Math.max(1, t.size) : 1;
}
