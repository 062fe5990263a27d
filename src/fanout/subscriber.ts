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
}

export class Subscriber {
  private readonly channels = new Map<number, ChannelState>();
  private stream: StreamSink | null = null;
  /** Whether a stream connection ever carried this session's channels (then never inline again, AWP-TRN-012). */
  private streamed = false;
  readonly control: Outbox;
  /** The flight recorder's, when it records this session: told of every frame delivered (issue 14). */
  frameTap: FrameTap | undefined;

  constructor(controlSink: Sink, highWaterBytes: number, maxQueuedBytes: number, observer?: OutboxObserver) {
    this.control = new Outbox(controlSink, highWaterBytes, maxQueuedBytes, observer);
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
    // Only latest-wins channels are downsampled: dropping a reliable or per-tick frame would be loss (AWP-DAT-002).
    const gated = (c: SubscribedChannel) => (c.latest_wins && !c.per_tick ? c.rate_hz : null);
    const rate = gated(sub);
    const sameRate = old !== undefined && gated(old.sub) === rate;
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
    });
  }

  /** The last seq delivered per channel name (carried over when the session resumes on a new connection). */
  positions(): Map<string, number> {
    return new Map([...this.channels.values()].map((c) => [c.sub.name, c.lastSeq]));
  }

  unsubscribe(channel_id: number): void {
    this.channels.delete(channel_id);
  }

  /** A stream connection now carries every channel (the edge's endpoints name no `channels`). */
  attachStream(stream: StreamSink): void {
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
    if (c === undefined) return 'held';
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
    if (frame.ts_send_ns !== undefined) {
      c.pipeline.add(frame.ts_send_ns - frame.ts_mono_ns);
    }
    this.frameTap?.(frame, this.stream !== null);
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
      for (const x of v) all.push(x);
      channels.set(id, summarise(v));
    }
    return { overall: summarise(all), channels };
  }

  closeStream(code: number, reason: string): void {
    this.stream?.close(code, reason);
    this.stream = null;
  }
}
