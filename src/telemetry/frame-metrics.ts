import type { Counter, Histogram } from 'prom-client';
import type { Direction, EdgeMetrics, FrameOutcome } from './metrics.js';

/**
 * The note a frame carries through an outbox (transport/outbox.ts `FrameNote`). Declared here by shape:
 * telemetry and transport are peer layers, so FrameMetrics is an `OutboxObserver` without importing it.
 */
interface FrameNote {
  /** Local ms when the edge received the frame. */
  readonly received_at: number;
  readonly channel: string;
}

/**
 * Channel labels per route, binding and direction at most: channel names come from the world, and each
 * is a set of series (histograms of many buckets) in every scrape. Past them, frames count under OTHER.
 */
export const MAX_CHANNEL_LABELS = 256;
/** Not an AWP identifier, so no channel is named this. */
export const OTHER_CHANNELS = '(other)';

/** Above this many writes per second on a channel, forward latency is sampled uniformly. */
const LATENCY_OBSERVATIONS_PER_SECOND = 1000;

interface Tally {
  n: number;
  bytes: number;
  readonly counters: { n: Counter.Internal; bytes: Counter.Internal };
}

interface Latency {
  readonly histogram: Histogram.Internal<string>;
  /** Observe one write in `stride`; adapted once a second to the channel's write rate. */
  stride: number;
  writes: number;
  windowStart: number;
  windowWrites: number;
}

/**
 * Per-channel frame metrics for one route, binding and direction, shared by every connection that
 * has them. The frame path only adds to plain numbers: counts are folded into prom-client when
 * Prometheus scrapes, and forward latency is sampled on busy channels, so a frame written to many
 * subscribers costs no label hashing and at most a few histogram observations a millisecond.
 */
export class FrameMetrics {
  /** The channel names given labels so far (see MAX_CHANNEL_LABELS). */
  private readonly labelled = new Set<string>();
  private readonly tallies = new Map<string, Tally>();
  /** Frames received from the world, by channel. */
  private readonly receipts = new Map<string, Tally>();
  private readonly latencies = new Map<string, Latency>();
  /** Per channel, the children of the pipeline-latency and staleness histograms (labels hashed once). */
  private readonly ages = new Map<
    string,
    { pipeline: Histogram.Internal<string>; staleness: Histogram.Internal<string> }
  >();

  private constructor(
    private readonly metrics: EdgeMetrics,
    private readonly route: string,
    private readonly binding: string,
    private readonly direction: Direction,
    private readonly now: () => number,
  ) {
    metrics.beforeScrape.add(() => this.flush());
  }

  /** The shared instance for a route, binding and direction. */
  static for(
    metrics: EdgeMetrics,
    route: string,
    binding: string,
    direction: Direction,
    now: () => number,
  ): FrameMetrics {
    let byKey = shared.get(metrics);
    if (byKey === undefined) shared.set(metrics, (byKey = new Map<string, FrameMetrics>()));
    const key = `${route}\u0000${binding}\u0000${direction}`;
    let m = byKey.get(key);
    if (m === undefined) byKey.set(key, (m = new FrameMetrics(metrics, route, binding, direction, now)));
    return m;
  }

  /**
   * `n` writes of a frame of `bytes` bytes (n > 1: one publish reaching n subscribers at once). Counted n
   * times; its forward latency, the same for all n, is one observation (the histogram samples anyway).
   */
  written(note: FrameNote, bytes: number, n = 1): void {
    let l = this.latencies.get(note.channel);
    if (l === undefined) {
      const channel = this.label(note.channel);
      if (channel !== note.channel) return this.written({ ...note, channel }, bytes, n);
      l = {
        histogram: this.metrics.forwardLatency.labels(this.route, channel, this.binding),
        stride: 1,
        writes: 0,
        windowStart: this.now(),
        windowWrites: 0,
      };
      this.latencies.set(note.channel, l);
    }
    this.count(note.channel, 'forwarded', bytes * n, n);
    l.windowWrites += n;
    if ((l.writes += n) >= l.stride) {
      l.writes = 0;
      const now = this.now();
      l.histogram.observe((now - note.received_at) / 1000);
      if (now - l.windowStart >= 1000) {
        l.stride = Math.max(1, Math.ceil(l.windowWrites / LATENCY_OBSERVATIONS_PER_SECOND));
        l.windowStart = now;
        l.windowWrites = 0;
      }
    }
  }

  replaced(note: FrameNote, bytes: number): void {
    this.count(note.channel, 'replaced', bytes);
  }

  /** `n` frames of `bytes` bytes in all (e.g. one frame a newer one replaced for n subscribers). */
  count(channel: string, outcome: FrameOutcome, bytes: number, n = 1): void {
    const key = `${channel}\u0000${outcome}`;
    let t = this.tallies.get(key);
    if (t === undefined) {
      const label = this.label(channel);
      if (label !== channel) return this.count(label, outcome, bytes, n);
      const labels = { route: this.route, channel, direction: this.direction, outcome };
      t = {
        n: 0,
        bytes: 0,
        counters: { n: this.metrics.frames.labels(labels), bytes: this.metrics.frameBytes.labels(labels) },
      };
      this.tallies.set(key, t);
    }
    t.n += n;
    t.bytes += bytes;
  }

  /** A frame the edge received from a world, once (before fan-out or drops): its own counter. */
  received(channel: string, bytes: number): void {
    let t = this.receipts.get(channel);
    if (t === undefined) {
      const label = this.label(channel);
      if (label !== channel) return this.received(label, bytes);
      const labels = { route: this.route, channel };
      t = {
        n: 0,
        bytes: 0,
        counters: {
          n: this.metrics.framesReceived.labels(labels),
          bytes: this.metrics.frameBytesReceived.labels(labels),
        },
      };
      this.receipts.set(channel, t);
    }
    t.n++;
    t.bytes += bytes;
  }

  /** World pipeline latency and staleness of an observation frame at the edge (ns on the session clock). */
  observeAge(
    channel: string,
    ts_mono_ns: number,
    ts_send_ns: number | undefined,
    sessionNow_ns: number | undefined,
  ): void {
    let h = this.ages.get(channel);
    if (h === undefined) {
      const label = this.label(channel);
      if (label !== channel) return this.observeAge(label, ts_mono_ns, ts_send_ns, sessionNow_ns);
      h = {
        pipeline: this.metrics.pipelineLatency.labels(this.route, channel),
        staleness: this.metrics.staleness.labels(this.route, channel),
      };
      this.ages.set(channel, h);
    }
    if (ts_send_ns !== undefined && ts_send_ns >= ts_mono_ns)
      h.pipeline.observe((ts_send_ns - ts_mono_ns) / 1e9);
    if (sessionNow_ns !== undefined && sessionNow_ns >= ts_mono_ns)
      h.staleness.observe((sessionNow_ns - ts_mono_ns) / 1e9);
  }

  /** The label for `channel`: itself while there is room, else OTHER_CHANNELS (which always has room). */
  private label(channel: string): string {
    if (this.labelled.has(channel) || channel === OTHER_CHANNELS) return channel;
    if (this.labelled.size >= MAX_CHANNEL_LABELS) return OTHER_CHANNELS;
    this.labelled.add(channel);
    return channel;
  }

  /** Folds the counts into prom-client (before each scrape). */
  flush(): void {
    for (const t of [...this.tallies.values(), ...this.receipts.values()]) {
      if (t.n === 0) continue;
      t.counters.n.inc(t.n);
      t.counters.bytes.inc(t.bytes);
      t.n = 0;
      t.bytes = 0;
    }
  }
}

const shared = new WeakMap<EdgeMetrics, Map<string, FrameMetrics>>();
