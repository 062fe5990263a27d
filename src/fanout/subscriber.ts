/**
 * Frame delivery to one observer: per channel, its granted rate, its binding (inline on the control
 * connection, or a stream connection), and strictly increasing `seq` (AWP-DAT-001). Frames are the
 * hub's shared buffers: a binary frame is written as is to every stream subscriber, an inline frame's
 * text is encoded once and shared (zero-copy fan-out).
 */
import { Outbox, type FrameNote, type OutboxObserver, type Sink } from '../transport/outbox.js';
import { FLAG_KEYFRAME } from '../protocol/frame.js';
import { asResync, inlineText, renumbered, type HubFrame } from './keyframe-cache.js';
import { RateGate } from './rate-gate.js';
import { LatencyWindow, summarise, type LatencyStats } from './latency-window.js';
import type { FrameTap } from './observer-tap.js';

export interface SubscribedChannel {
  readonly name: string;
  readonly channel_id: number;
  readonly rate_hz: number | null;
  readonly latest_wins: boolean;
  readonly per_tick: boolean;
  readonly stale_after_ms: number;
}

/** A stream connection of an observer (ws, or a WebTransport session with a stream per channel). */
export interface StreamSink {
  /** Writes one frame; `latestWins` lets a newer frame on the channel replace it while waiting. */
  push(frame: HubFrame, latestWins: boolean, note: FrameNote): 'sent' | 'queued' | 'replaced' | 'overflow';
  /** Whether a latest-wins frame of the channel is still waiting to be written (absent: never). */
  holds?(channel_id: number): boolean;
  close(code: number, reason: string): void;
  /** The engine's pub/sub on this stream connection, when it has one (uWS `ws` streams). */
  readonly topics?: TopicPort | undefined;
}

/** A stream connection's side of its hub's topics (hub-topics.ts). */
export interface TopicPort {
  /** Bytes the engine holds for the connection (published frames included, once uWS has drained them). */
  readonly bufferedAmount: number;
  /** Nothing waits in the edge's own queue for the connection. */
  readonly idle: boolean;
  join(topic: string): boolean;
  leave(topic: string): void;
  /** One publish of `frame` to the topic's `members` subscribers (counted as that many writes). */
  publish(topic: string, frame: HubFrame, note: FrameNote, members: number): void;
}

/**
 * A channel served through its hub's topic instead of one write per frame (hub-topics.ts): while it is a
 * member, its frames, seq and pipeline latency are the topic's.
 */
export interface Membership {
  /** The last seq published to the topic: what the member last received on the channel. */
  readonly lastSeq: number;
  /** The topic's rate gate, which members pass instead of their own. */
  readonly gate: RateGate;
  /** Pipeline latency (ns) of the frames published to the member since it last took them. */
  takeLatency(): number[];
  /** Unsubscribes the stream connection from the topic. */
  leave(): void;
}

/** What a channel that may join its hub's topic brings (Subscriber.joinable). */
export interface Joinable {
  readonly port: TopicPort;
  readonly name: string;
  /** The rate its gate passes (null: every frame). */
  readonly rate_hz: number | null;
  readonly lastSeq: number;
  readonly gate: RateGate;
  /** The flight recorder's tap of the session: it reads what the topic's shard publishes (hub-topics.ts). */
  readonly tap: FrameTap | undefined;
}

export type Delivery =
  'forwarded' | 'downsampled' | 'stale' | 'held' | 'overflow-control' | 'overflow-stream';

interface ChannelState {
  readonly sub: SubscribedChannel;
  readonly gate: RateGate;
  lastSeq: number;
  readonly pipeline: LatencyWindow;
  /** Set when the channel's stream connection was lost: not delivered at all until one is back (AWP-TRN-010). */
  down: boolean;
  /**
   * The channel (re)starts here (subscription, new stream connection, resumed session): its next frame
   * must be a keyframe carrying `resync`, so deltas wait for one (AWP-DAT-009, AWP-TRN-010/012, AWP-OBS-004).
   */
  restart: boolean;
  /** The restart's resync frame may still wait in a latest-wins slot: whatever replaces it carries resync on. */
  resyncWaiting: boolean;
  /**
   * The session delivered this channel at another replica, whose upstream session numbered it
   * differently: each restart renumbers from the keyframe on so seq continues above `lastSeq`.
   */
  readonly rebase: boolean;
  /** Added to this hub's seq for this observer (0 unless rebased onto a hub that counts lower). */
  offset: number;
  /** Served through the hub's topic (no frame is delivered one by one meanwhile); null otherwise. */
  member: Membership | null;
}

/** The rate a channel's gate passes: only latest-wins channels are downsampled (AWP-DAT-002). */
function gatedRate(c: SubscribedChannel): number | null {
  return c.latest_wins && !c.per_tick ? c.rate_hz : null;
}

export class Subscriber {
  private readonly channels = new Map<number, ChannelState>();
  private stream: StreamSink | null = null;
  /** Whether a stream connection ever carried this session's channels (then never inline again, AWP-TRN-012). */
  private streamed = false;
  readonly control: Outbox;
  private tap: FrameTap | undefined;
  /**
   * Whether frames' pipeline latency is sampled for session.telemetry (AWP-TIM-006). Off in lockstep,
   * where no telemetry window drains the samples: a world stamping ts_send_ns would grow them per frame.
   */
  sampleLatency = true;

  constructor(controlSink: Sink, highWaterBytes: number, maxQueuedBytes: number, observer?: OutboxObserver) {
    this.control = new Outbox(controlSink, highWaterBytes, maxQueuedBytes, observer);
  }

  /**
   * The flight recorder's, when it records this session: told of every frame delivered (issue 14), by its
   * topic for a member (hub-topics.ts), which takes the tap the channel had when it joined: channels leave
   * their topics when it changes.
   */
  get frameTap(): FrameTap | undefined {
    return this.tap;
  }

  set frameTap(tap: FrameTap | undefined) {
    if (tap !== this.tap) this.leaveTopics();
    this.tap = tap;
  }

  get hasStream(): boolean {
    return this.stream !== null;
  }

  subscribed(): IterableIterator<SubscribedChannel> {
    return [...this.channels.values()].map((c) => c.sub)[Symbol.iterator]();
  }

  isSubscribed(channel_id: number): boolean {
    return this.channels.has(channel_id);
  }

  /**
   * Adds a channel, or updates its grant. `fromSeq`: the last seq this session already delivered on it
   * (a resumed session continues above it, AWP-DAT-001).
   */
  subscribe(sub: SubscribedChannel, fromSeq = -1, rebase = false): void {
    const old = this.channels.get(sub.channel_id);
    if (old !== undefined) this.leave(old); // a new grant: delivered one by one until it may join again
    // Only latest-wins channels are downsampled: dropping a reliable or per-tick frame would be loss (AWP-DAT-002).
    const rate = gatedRate(sub);
    const sameRate = old !== undefined && gatedRate(old.sub) === rate;
    this.channels.set(sub.channel_id, {
      sub,
      gate: sameRate ? old.gate : RateGate.forRate(rate),
      lastSeq: old?.lastSeq ?? fromSeq,
      pipeline: old?.pipeline ?? new LatencyWindow(),
      down: old?.down ?? false,
      restart: old?.restart ?? true,
      resyncWaiting: old?.resyncWaiting ?? false,
      rebase: old?.rebase ?? rebase,
      offset: old?.offset ?? 0,
      member: null,
    });
  }

  /** The last seq delivered per channel name (carried over when the session resumes on a new connection). */
  positions(): Map<string, number> {
    return new Map([...this.channels.values()].map((c) => [c.sub.name, lastSeqOf(c)]));
  }

  unsubscribe(channel_id: number): void {
    const c = this.channels.get(channel_id);
    if (c !== undefined) this.leave(c);
    this.channels.delete(channel_id);
  }

  // ------------------------------------------------------------------ topics (hub-topics.ts)

  /** Whether the channel is served through its hub's topic. */
  isMember(channel_id: number): boolean {
    return this.channels.get(channel_id)?.member != null;
  }

  /**
   * What the channel brings to its hub's topic, if it may join now: a `ws` stream connection with pub/sub,
   * a latest-wins channel in its steady state (not restarting, no resync pending, not renumbered), nothing
   * queued for the connection and the engine below `highWaterBytes`.
   */
  joinable(channel_id: number, highWaterBytes: number): Joinable | null {
    const port = this.stream?.topics;
    if (port === undefined) return null; // no pub/sub (the `ws` engine): at once
    const c = this.channels.get(channel_id);
    if (c === undefined || c.member !== null) return null;
    if (!c.sub.latest_wins || c.sub.per_tick || c.offset !== 0) return null;
    if (c.restart || c.resyncWaiting || c.down) return null;
    if (!port.idle || port.bufferedAmount >= highWaterBytes) return null;
    return {
      port,
      name: c.sub.name,
      rate_hz: gatedRate(c.sub),
      lastSeq: c.lastSeq,
      gate: c.gate,
      tap: this.tap,
    };
  }

  /** The channel joined its hub's topic. */
  joined(channel_id: number, m: Membership): void {
    const c = this.channels.get(channel_id);
    if (c === undefined || c.member !== null) return m.leave();
    c.member = m;
  }

  /** Back to one write per frame (backpressure, or the hub's topic closing). */
  leaveTopic(channel_id: number): void {
    const c = this.channels.get(channel_id);
    if (c !== undefined) this.leave(c);
  }

  /** Every channel leaves its topic. */
  leaveTopics(): void {
    for (const c of this.channels.values()) this.leave(c);
  }

  /** The topic's last seq becomes the channel's (seq strictly increases across leave and join, AWP-DAT-001). */
  private leave(c: ChannelState): void {
    const m = c.member;
    if (m === null) return;
    c.member = null;
    c.lastSeq = Math.max(c.lastSeq, m.lastSeq);
    for (const ns of m.takeLatency()) c.pipeline.add(ns);
    c.gate.follow(m.gate);
    m.leave();
  }

  /** A stream connection now carries every channel (the edge's endpoints name no `channels`). */
  attachStream(stream: StreamSink): void {
    this.leaveTopics();
    this.stream?.close(1000, 'replaced by a newer stream connection');
    this.stream = stream;
    this.streamed = true;
    for (const c of this.channels.values()) {
      c.down = false;
      c.restart = true;
      c.resyncWaiting = false;
    }
  }

  /** The stream connection is gone: its channels stop, not even inline, until a new one (AWP-TRN-010). */
  streamLost(stream: StreamSink): number[] {
    if (this.stream !== stream) return [];
    this.leaveTopics();
    this.stream = null;
    const reliable: number[] = [];
    for (const c of this.channels.values()) {
      c.down = true;
      if (!c.sub.latest_wins) reliable.push(c.sub.channel_id);
    }
    return reliable;
  }

  /** A resumed session starts inline again until a stream is re-established (AWP-TRN-008). */
  resetBindings(): void {
    this.leaveTopics();
    this.stream?.close(1001, 'session resumed');
    this.stream = null;
    this.streamed = false;
    for (const c of this.channels.values()) {
      c.down = false;
      c.restart = true;
      c.resyncWaiting = false;
    }
  }

  /**
   * Offers one frame. `start` frames (the cached keyframe, sent with resync, and what followed it) bypass
   * the rate gate: they are the channel's current state.
   */
  deliver(frame: HubFrame, note: FrameNote, start = false): Delivery {
    const c = this.channels.get(frame.channel_id);
    if (c === undefined || c.member !== null) return 'held'; // a member has its frames from the topic
    const keyframe = (frame.flags & FLAG_KEYFRAME) !== 0;
    if (c.rebase && c.restart && keyframe) c.offset = Math.max(0, c.lastSeq + 1 - frame.seq);
    if (c.offset !== 0) {
      if (!Number.isSafeInteger(frame.seq + c.offset)) return 'stale';
      frame = renumbered(frame, c.offset); // a copy: only for sessions that moved to a hub counting lower
    }
    if (frame.seq <= c.lastSeq) return 'stale';
    if (c.down || (this.streamed && this.stream === null)) return 'held';
    const latestWins = c.sub.latest_wins && !c.sub.per_tick;
    if (c.restart) {
      // Deltas before the restart's keyframe are skipped: the gap before a resync is not loss.
      if (!keyframe) return 'held';
      frame = asResync(frame);
      c.restart = false;
      c.resyncWaiting = latestWins;
      c.gate.pass(frame.ts_mono_ns); // the restart frame counts against the granted rate (AWP-DAT-003)
    } else if (!start && !c.gate.pass(frame.ts_mono_ns)) {
      return 'downsampled';
    } else if (c.resyncWaiting) {
      if (this.slotHolds(frame.channel_id)) {
        // It would replace the unsent resync frame: it carries the resync on (AWP-DAT-009, AWP-TRN-012).
        if (!keyframe) return 'held';
        frame = asResync(frame);
      } else {
        c.resyncWaiting = false;
      }
    }
    c.lastSeq = frame.seq;
    if (frame.ts_send_ns !== undefined && this.sampleLatency) {
      c.pipeline.add(frame.ts_send_ns - frame.ts_mono_ns);
    }
    this.tap?.delivered(frame, this.stream !== null);
    if (this.stream !== null) {
      return this.stream.push(frame, latestWins, note) === 'overflow' ? 'overflow-stream' : 'forwarded';
    }
    return this.control.push(inlineText(frame), false, latestWins ? frame.channel_id : undefined, note) ===
      'overflow'
      ? 'overflow-control'
      : 'forwarded';
  }

  private slotHolds(channel_id: number): boolean {
    return this.stream !== null ? (this.stream.holds?.(channel_id) ?? false) : this.control.holds(channel_id);
  }

  /**
   * Pipeline latency of what this observer received in the window (AWP-TIM-006): by channel id, and over
   * every channel together.
   */
  takeTelemetry(): { overall: LatencyStats | undefined; channels: Map<number, LatencyStats | undefined> } {
    const all: number[] = [];
    const channels = new Map<number, LatencyStats | undefined>();
    for (const [id, c] of this.channels) {
      const v = c.pipeline.drain();
      if (c.member !== null) for (const x of c.member.takeLatency()) v.push(x);
      for (const x of v) all.push(x);
      channels.set(id, summarise(v));
    }
    return { overall: summarise(all), channels };
  }

  closeStream(code: number, reason: string): void {
    this.leaveTopics();
    this.stream?.close(code, reason);
    this.stream = null;
  }
}

/** The last seq the channel delivered: a member's is its topic's. */
function lastSeqOf(c: ChannelState): number {
  return c.member === null ? c.lastSeq : Math.max(c.lastSeq, c.member.lastSeq);
}
