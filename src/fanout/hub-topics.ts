/**
 * A hub's topics (issue 15 item 3): on an engine with pub/sub (uWebSockets.js), the stream subscribers of a
 * latest-wins channel that are in their steady state are served with one `publish` per frame, fanned out
 * by the engine, instead of one write per subscriber. Everyone else keeps the per-observer path
 * (`Subscriber.deliver`); a channel moves between the two:
 *
 * - It joins (`consider`) after an individual delivery that leaves it eligible (`Subscriber.joinable`: a
 *   `ws` stream with pub/sub, full rate, not restarting, no resync pending, not renumbered, nothing queued
 *   and the engine below high water).
 * - It leaves (`Subscriber.leaveTopic`/`leaveTopics`) on a new grant, unsubscribe, stream lost or replaced,
 *   resumed or released session, a new frame tap, and when the engine holds high water for it: the engine's
 *   per-connection limit is off (maxBackpressure 0), so the members' buffers are read every
 *   `TOPIC_SCAN_MS` before a publish, and a slow member leaves with at most what was published meanwhile
 *   beyond high water. Once left, its frames wait in its outbox's latest-wins slots again.
 * - One topic per channel and gate rate, with one rate gate: a world sending faster than it declared gets
 *   no more to members than their own gates would have passed; a leaving member's gate goes on from the
 *   topic's.
 * - seq: the topic publishes strictly increasing seqs; a member's last seq is the topic's, and becomes its
 *   own when it leaves (AWP-DAT-001 across join and leave).
 * - Metrics: one publish counts `forwarded` once with n = members (and one forward-latency observation);
 *   the topic keeps the pipeline latency of what it published once, members take their share of it for
 *   their session.telemetry (AWP-TIM-006).
 * - Recorded sessions (issue 14) are members too: the topic tells each one's tap of every frame it
 *   publishes, as `Subscriber.deliver` would, so recording costs a reference per delivery, not the write.
 */
import type { FrameMetrics } from '../telemetry/frame-metrics.js';
import type { FrameNote } from '../transport/outbox.js';
import type { HubFrame } from './keyframe-cache.js';
import { RateGate } from './rate-gate.js';
import type { FrameTap } from './observer-tap.js';
import type { Membership, Subscriber, TopicPort } from './subscriber.js';

/**
 * Frames this large or larger are written one by one: uWS publishes them at once to every subscriber
 * (`publishBig`, its cork buffer's size), a write per subscriber in one call that the hub's time-bounded
 * passes (hub-fanout.ts) cannot split, and the per-write saving is small next to the bytes. Smaller ones
 * uWS queues and writes, corked, per subscriber once per loop iteration.
 */
export const TOPIC_MAX_FRAME_BYTES = 16 * 1024;
/** How often members' engine buffers are read, at most (ms; before a publish). */
export const TOPIC_SCAN_MS = 20;
/** Pipeline latency samples a topic keeps for members that have not taken them (oldest dropped beyond). */
const MAX_SAMPLES = 65_536;

export interface TopicsContext {
  readonly highWaterBytes: number;
  /** Downsampled publishes are counted here (n = members). */
  readonly frames: Pick<FrameMetrics, 'count'>;
  /** The declared rate of a channel, by name (null: none declared). */
  declaredRate(channel: string): number | null | undefined;
}

class Member implements Membership {
  cursor: number;

  constructor(
    readonly topic: ChannelTopic,
    readonly sub: Subscriber,
    readonly port: TopicPort,
    /** Whether the member is still what its session delivers to (the same Subscriber and stream). */
    readonly current: () => boolean,
    /** The flight recorder's tap of the session, if it is recorded. */
    readonly tap: FrameTap | undefined,
  ) {
    this.cursor = topic.end;
  }

  get lastSeq(): number {
    return this.topic.lastSeq;
  }

  get gate(): RateGate {
    return this.topic.gate;
  }

  takeLatency(): number[] {
    const v = this.topic.samplesSince(this.cursor);
    this.cursor = this.topic.end;
    return v;
  }

  leave(): void {
    this.topic.remove(this);
  }
}

class ChannelTopic {
  readonly members = new Set<Member>();
  /** The members whose sessions are recorded. */
  private readonly tapped = new Set<Member>();
  lastSeq = -1;
  readonly gate: RateGate;
  private samples: number[] = [];
  /** Index (since the topic began) of samples[0]. */
  private base = 0;

  constructor(
    readonly name: string,
    readonly channel_id: number,
    rate_hz: number | null,
    private readonly changed: (channel_id: number) => void,
  ) {
    this.gate = RateGate.forRate(rate_hz);
  }

  get end(): number {
    return this.base + this.samples.length;
  }

  samplesSince(cursor: number): number[] {
    return this.samples.slice(Math.max(0, cursor - this.base));
  }

  add(m: Member): void {
    this.members.add(m);
    if (m.tap !== undefined) this.tapped.add(m);
    this.changed(this.channel_id);
  }

  remove(m: Member): void {
    if (!this.members.delete(m)) return;
    this.tapped.delete(m);
    m.port.leave(this.name);
    this.changed(this.channel_id);
  }

  publish(frame: HubFrame, note: FrameNote, ctx: TopicsContext): void {
    const n = this.members.size;
    if (n === 0 || frame.seq <= this.lastSeq) return;
    const bytes = frame.buf.length;
    if (bytes >= TOPIC_MAX_FRAME_BYTES) {
      // Everyone leaves: this frame and what follows go one by one (hub-fanout.ts).
      for (const m of [...this.members]) {
        m.sub.leaveTopic(this.channel_id);
        this.remove(m);
      }
      return;
    }
    if (!this.gate.pass(frame.ts_mono_ns)) {
      ctx.frames.count(note.channel, 'downsampled', n * bytes, n);
      return;
    }
    this.lastSeq = frame.seq;
    if (frame.ts_send_ns !== undefined) this.samples.push(frame.ts_send_ns - frame.ts_mono_ns);
    // The server's publish: any member's connection reaches it.
    const first = this.members.values().next().value!;
    first.port.publish(this.name, frame, note, n);
    for (const m of this.tapped) m.tap!(frame, true);
  }

  /** Slow or stale members leave; samples every member has taken are let go. */
  scan(highWaterBytes: number): void {
    for (const m of [...this.members]) {
      if (m.current() && m.port.bufferedAmount < highWaterBytes) continue;
      m.sub.leaveTopic(this.channel_id);
      this.remove(m); // if its session no longer holds it
    }
    let low = this.end;
    for (const m of this.members) low = Math.min(low, m.cursor);
    low = Math.max(low, this.end - MAX_SAMPLES);
    if (low > this.base) {
      this.samples = this.samples.slice(low - this.base);
      this.base = low;
    }
  }
}

export class HubTopics<T extends { readonly sub: Subscriber | null }> {
  /** Topics by channel id (one per gate rate). */
  private readonly topics = new Map<number, ChannelTopic[]>();
  /** Each channel's individual targets (not members), rebuilt when members change. */
  private readonly individual = new Map<number, { from: readonly T[]; list: T[] }>();
  private lastScan = -Infinity;

  constructor(
    /** Names the hub's topics (unique on the server). */
    private readonly prefix: string,
    private readonly ctx: TopicsContext,
  ) {}

  /** After an individual delivery of `frame`: the subscriber's channel joins its topic if it may. */
  consider(o: T, sub: Subscriber, frame: HubFrame): void {
    if (frame.buf.length >= TOPIC_MAX_FRAME_BYTES) return;
    const channel_id = frame.channel_id;
    const j = sub.joinable(channel_id, this.ctx.highWaterBytes);
    if (j === null) return;
    const declared = this.ctx.declaredRate(j.name);
    if (declared === undefined) return;
    if (j.rate_hz !== null && (declared === null || j.rate_hz < declared)) return; // downsampled: its own gate
    const topic = this.topicFor(channel_id, j.rate_hz);
    if (!j.port.join(topic.name)) return;
    if (topic.members.size === 0) topic.gate.follow(j.gate);
    topic.lastSeq = Math.max(topic.lastSeq, j.lastSeq);
    const port = j.port;
    const m = new Member(topic, sub, port, () => o.sub === sub && sub.isMember(channel_id), j.tap);
    topic.add(m);
    sub.joined(channel_id, m);
  }

  /** Publishes a frame to its channel's topics (before the individual pass: members never wait behind it). */
  publish(frame: HubFrame, note: FrameNote, now: number): void {
    const list = this.topics.get(frame.channel_id);
    if (list === undefined) return;
    if (now - this.lastScan >= TOPIC_SCAN_MS) {
      this.lastScan = now;
      for (const ts of this.topics.values()) for (const t of ts) t.scan(this.ctx.highWaterBytes);
    }
    for (const t of list) t.publish(frame, note, this.ctx);
  }

  /** The channel's subscribers that are not served by a topic (a new array whenever that changes). */
  targets(channel_id: number, all: readonly T[]): readonly T[] {
    const list = this.topics.get(channel_id);
    if (list === undefined || list.every((t) => t.members.size === 0)) return all;
    const cached = this.individual.get(channel_id);
    if (cached !== undefined && cached.from === all) return cached.list;
    const individual = all.filter((o) => !(o.sub?.isMember(channel_id) ?? false));
    this.individual.set(channel_id, { from: all, list: individual });
    return individual;
  }

  /** Members of a channel's topics (tests, metrics). */
  members(channel_id: number): number {
    let n = 0;
    for (const t of this.topics.get(channel_id) ?? []) n += t.members.size;
    return n;
  }

  /** Every member leaves (the hub is done). */
  clear(): void {
    for (const ts of this.topics.values())
      for (const t of ts)
        for (const m of [...t.members]) {
          m.sub.leaveTopic(t.channel_id);
          t.remove(m);
        }
    this.topics.clear();
    this.individual.clear();
  }

  private topicFor(channel_id: number, rate_hz: number | null): ChannelTopic {
    let list = this.topics.get(channel_id);
    if (list === undefined) this.topics.set(channel_id, (list = []));
    const name = `${this.prefix}/${channel_id}@${rate_hz ?? 'all'}`;
    let t = list.find((x) => x.name === name);
    if (t === undefined) {
      t = new ChannelTopic(name, channel_id, rate_hz, (id) => this.individual.delete(id));
      list.push(t);
    }
    return t;
  }
}
