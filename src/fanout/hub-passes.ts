/**
 * A hub's fan-out work (sans-IO): frames waiting to be offered to their channels' subscribers, served in
 * slices its caller bounds in time, so that the event loop returns to I/O between slices and control
 * messages, heartbeats and relay traffic never wait behind a long fan-out pass (issue 15).
 *
 * - A latest-wins channel has one pass at a time. A newer frame supersedes the rest of an unfinished pass:
 *   the subscribers not yet served get the newer frame instead (the older one is `superseded` for them,
 *   as an outbox slot replaces a waiting frame, AWP-DAT-002/AWP-TRN-009). The pass goes on where it
 *   stopped and wraps around, so every subscriber is served in turn and none starves at the end of a list.
 * - Every other frame (reliable, per-tick, any lockstep frame) is offered to every subscriber it had when
 *   it arrived, in arrival order: one FIFO whose head pass completes before the next begins, so no
 *   subscriber has one skipped or reordered (AWP-DAT-001/002).
 * Slices rotate between the FIFO and the latest-wins channels, a chunk of offers each (a target that
 * stands for several subscribers, a shard of a topic's members, counts as that many); a latest-wins
 * channel's chunk is in proportion to how many frames it brings (a 100 Hz channel gets ~3x the offers of a
 * 30 Hz one), so an overloaded edge delivers each subscriber the same share of every channel, in the mix
 * the world sends, rather than as many large frames as small ones.
 */
import type { FrameNote } from '../transport/outbox.js';
import type { HubFrame } from './keyframe-cache.js';
import type { SubscribedChannel } from './subscriber.js';

/** Offers between two looks at the clock. */
const CHUNK = 16;

interface OrderedPass<T> {
  readonly frame: HubFrame;
  readonly note: FrameNote;
  readonly targets: readonly T[];
  next: number;
}

interface LatestPass<T> {
  /** Null once the pass is complete (nothing held for it: not the frame, not its subscribers). */
  frame: HubFrame | null;
  note: FrameNote | null;
  targets: readonly T[];
  /** The next subscriber to serve (kept across frames: the round goes on where it stopped). */
  pos: number;
  /** Subscribers this frame still has to reach. */
  left: number;
  /** Frames the channel brought lately (halved as they accumulate): its share of each rotation. */
  arrivals: number;
}

/** When the channels' arrival counts reach this in all, they are halved (recent rates weigh most). */
const ARRIVALS_DECAY_AT = 4096;

export interface PassSink<T> {
  offer(target: T, frame: HubFrame, note: FrameNote): void;
  /** A latest-wins frame that `count` subscribers will not get: a newer one replaced it. */
  superseded(frame: HubFrame, note: FrameNote, count: number): void;
  /** How many subscribers a target stands for (a shard of a topic's members, hub-topics.ts); default 1. */
  weight?(target: T): number;
}

export class HubPasses<T> {
  private ordered: (OrderedPass<T> | undefined)[] = [];
  private head = 0;
  private readonly latest = new Map<number, LatestPass<T>>();
  private latestLeft = 0;
  private arrivals = 0;

  constructor(private readonly sink: PassSink<T>) {}

  /** Whether nothing waits. */
  get idle(): boolean {
    return this.head === this.ordered.length && this.latestLeft === 0;
  }

  /** Ordered frames whose pass has not completed. */
  get orderedBacklog(): number {
    return this.ordered.length - this.head;
  }

  /**
   * A frame for `targets` (an array the caller never mutates: a new one when its subscribers change).
   * `latestWins`: every target takes the channel latest-wins, so a newer frame may supersede this one.
   */
  add(frame: HubFrame, note: FrameNote, targets: readonly T[], latestWins: boolean): void {
    if (targets.length === 0) return;
    if (!latestWins) {
      this.ordered.push({ frame, note, targets, next: 0 });
      return;
    }
    if (++this.arrivals >= ARRIVALS_DECAY_AT) {
      this.arrivals = 0;
      for (const q of this.latest.values()) this.arrivals += q.arrivals = Math.ceil(q.arrivals / 2);
    }
    const p = this.latest.get(frame.channel_id);
    if (p === undefined) {
      this.latest.set(frame.channel_id, { frame, note, targets, pos: 0, left: targets.length, arrivals: 1 });
      this.latestLeft += targets.length;
      return;
    }
    p.arrivals++;
    if (p.left > 0 && p.frame !== null) this.sink.superseded(p.frame, p.note!, this.unserved(p));
    this.latestLeft += targets.length - p.left;
    p.frame = frame;
    p.note = note;
    p.targets = targets;
    p.pos %= targets.length;
    p.left = targets.length;
  }

  /**
   * Offers waiting frames until `expired()` (asked after every chunk) says the slice is over. Returns
   * whether work remains. State advances before each offer, so an offer that throws is not repeated.
   */
  run(expired: () => boolean): boolean {
    for (;;) {
      if (this.head < this.ordered.length) {
        this.orderedChunk();
        if (expired()) break;
      }
      if (this.latestLeft > 0) {
        let most = 1;
        for (const p of this.latest.values()) if (p.left > 0) most = Math.max(most, p.arrivals);
        for (const p of this.latest.values()) {
          if (p.left === 0) continue;
          this.latestChunk(p, Math.max(1, Math.round((CHUNK * p.arrivals) / most)));
          if (expired()) return !this.idle;
        }
      }
      if (this.idle) return false;
    }
    return !this.idle;
  }

  /** Completes ordered passes until at most `max` remain (the caller's bound on what it holds). */
  drainOrdered(max: number): void {
    while (this.orderedBacklog > max) this.orderedChunk();
  }

  /** Drops everything waiting (the hub is done). */
  clear(): void {
    this.ordered = [];
    this.head = 0;
    this.latest.clear();
    this.latestLeft = 0;
  }

  private weight(target: T): number {
    return this.sink.weight?.(target) ?? 1;
  }

  /** Subscribers the pass has not served its frame yet. */
  private unserved(p: LatestPass<T>): number {
    if (this.sink.weight === undefined) return p.left;
    let n = 0;
    for (let i = 0, at = p.pos; i < p.left; i++, at = (at + 1) % p.targets.length)
      n += this.weight(p.targets[at]!);
    return n;
  }

  private orderedChunk(): void {
    const p = this.ordered[this.head]!;
    // `next` moves before each offer: if one throws, the pass resumes with the subscriber after it.
    for (let w = 0; w < CHUNK && p.next < p.targets.length;) {
      const target = p.targets[p.next++]!;
      w += this.weight(target);
      this.sink.offer(target, p.frame, p.note);
    }
    if (p.next < p.targets.length) return;
    this.ordered[this.head++] = undefined;
    if (this.head === this.ordered.length) {
      this.ordered = [];
      this.head = 0;
    } else if (this.head > 1024) {
      this.ordered = this.ordered.slice(this.head);
      this.head = 0;
    }
  }

  /** Offers the pass's frame to targets standing for about `chunk` subscribers. */
  private latestChunk(p: LatestPass<T>, chunk: number): void {
    const { frame, note, targets } = p;
    for (let w = 0; w < chunk && p.left > 0;) {
      const target = targets[p.pos]!;
      w += this.weight(target);
      p.pos = (p.pos + 1) % targets.length;
      p.left--;
      this.latestLeft--;
      // A newer frame arrives only from I/O, never inside an offer: `p` still holds `frame` after it.
      this.sink.offer(target, frame!, note!);
    }
    if (p.left === 0) {
      p.frame = p.note = null;
      p.targets = [];
    }
  }
}

/** A hub's subscribers by channel, for HubPasses: new arrays every time (passes keep the ones they had). */
export interface ChannelIndex<T> {
  readonly targets: Map<number, T[]>;
  /** Channels every subscriber takes latest-wins (not per tick): their frames may supersede each other. */
  readonly latestWins: Set<number>;
  /** Channel names someone needs. */
  readonly needed: Set<string>;
}

export function indexChannels<T extends { needs(): Iterable<SubscribedChannel> }>(
  observers: Iterable<T>,
): ChannelIndex<T> {
  const index: ChannelIndex<T> = { targets: new Map(), latestWins: new Set(), needed: new Set() };
  const ordered = new Set<number>();
  for (const o of observers) {
    for (const g of o.needs()) {
      index.needed.add(g.name);
      let list = index.targets.get(g.channel_id);
      if (list === undefined) index.targets.set(g.channel_id, (list = []));
      list.push(o);
      if (!g.latest_wins || g.per_tick) ordered.add(g.channel_id);
    }
  }
  for (const id of index.targets.keys()) if (!ordered.has(id)) index.latestWins.add(id);
  return index;
}
