import type { Counter, Histogram } from 'prom-client';
import type { FrameNote, OutboxObserver } from '../fanout/outbox.js';
import type { Direction, EdgeMetrics, FrameOutcome } from './metrics.js';

interface Children {
  forwarded: Counter.Internal;
  forwardedBytes: Counter.Internal;
  latency: Histogram.Internal<string>;
}

/**
 * Per-channel frame metrics for one route, binding and direction, with label children cached so the
 * frame path does no label hashing.
 */
export class FrameMetrics implements OutboxObserver {
  private readonly byChannel = new Map<string, Children>();
  private readonly outcomes = new Map<string, { n: Counter.Internal; bytes: Counter.Internal }>();

  constructor(
    private readonly metrics: EdgeMetrics,
    private readonly route: string,
    private readonly binding: string,
    private readonly direction: Direction,
    private readonly now: () => number,
  ) {}

  written(note: FrameNote, bytes: number): void {
    const c = this.children(note.channel);
    c.forwarded.inc();
    c.forwardedBytes.inc(bytes);
    c.latency.observe((this.now() - note.received_at) / 1000);
  }

  replaced(note: FrameNote, bytes: number): void {
    this.count(note.channel, 'replaced', bytes);
  }

  count(channel: string, outcome: FrameOutcome, bytes: number): void {
    const key = `${channel}\u0000${outcome}`;
    let c = this.outcomes.get(key);
    if (c === undefined) {
      const labels = { route: this.route, channel, direction: this.direction, outcome };
      c = { n: this.metrics.frames.labels(labels), bytes: this.metrics.frameBytes.labels(labels) };
      this.outcomes.set(key, c);
    }
    c.n.inc();
    c.bytes.inc(bytes);
  }

  /** A frame the edge received from a world (before fan-out or drops). */
  received(channel: string, bytes: number): void {
    this.count(channel, 'received', bytes);
  }

  /** World pipeline latency and staleness of an observation frame at the edge (ns on the session clock). */
  observeAge(
    channel: string,
    ts_mono_ns: number,
    ts_send_ns: number | undefined,
    sessionNow_ns: number | undefined,
  ): void {
    if (ts_send_ns !== undefined && ts_send_ns >= ts_mono_ns) {
      this.metrics.pipelineLatency.labels(this.route, channel).observe((ts_send_ns - ts_mono_ns) / 1e9);
    }
    if (sessionNow_ns !== undefined && sessionNow_ns >= ts_mono_ns) {
      this.metrics.staleness.labels(this.route, channel).observe((sessionNow_ns - ts_mono_ns) / 1e9);
    }
  }

  private children(channel: string): Children {
    let c = this.byChannel.get(channel);
    if (c === undefined) {
      const labels = { route: this.route, channel, direction: this.direction, outcome: 'forwarded' };
      c = {
        forwarded: this.metrics.frames.labels(labels),
        forwardedBytes: this.metrics.frameBytes.labels(labels),
        latency: this.metrics.forwardLatency.labels(this.route, channel, this.binding),
      };
      this.byChannel.set(channel, c);
    }
    return c;
  }
}
