/**
 * What the viewer page shows of the edge itself, computed from its metrics registry: per route and channel,
 * forward latency and staleness (p50/p99 over the last seconds) and frame counts by outcome, and sessions by
 * kind and state. Only bounded labels (route, channel, outcome, kind, state): never a token or a session id.
 */
import type { MetricValue } from 'prom-client';
import type { EdgeMetrics } from '../telemetry/metrics.js';

/** Quantiles over this window (cumulative histograms are diffed against a snapshot this old). */
const WINDOW_MS = 10_000;

export interface Quantiles {
  readonly p50_ms: number | null;
  readonly p99_ms: number | null;
  /** Observations in the window. */
  readonly n: number;
}

export interface ChannelStats {
  readonly forward: Quantiles;
  readonly staleness: Quantiles;
  /** Frames since the edge started, by outcome (received, forwarded, replaced, downsampled, dropped_slow, ...). */
  readonly frames: Record<string, number>;
  /** Frames not forwarded to a subscriber (every outcome but received and forwarded), since start. */
  readonly not_forwarded: number;
}

export interface RouteStats {
  readonly name: string;
  readonly path: string;
  readonly channels: Record<string, ChannelStats>;
  /** `kind/state` -> sessions this replica holds (e.g. `observer/attached`). */
  readonly sessions: Record<string, number>;
}

export interface StatsDocument {
  readonly generated_at: string;
  readonly window_s: number;
  readonly routes: RouteStats[];
}

/** Cumulative bucket counts per `route\0channel`, upper bounds ascending. */
type Buckets = Map<string, { le: number[]; counts: number[] }>;

interface Snapshot {
  readonly at: number;
  readonly forward: Buckets;
  readonly staleness: Buckets;
}

export interface RouteRef {
  readonly name: string;
  readonly path: string;
}

export class ViewerStats {
  private snapshots: Snapshot[] = [];
  private document = '';
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly metrics: EdgeMetrics,
    private readonly routes: readonly RouteRef[],
    /** Brings scrape-time gauges up to date (the edge's sampleGauges). */
    private readonly sample: () => void,
    private readonly now: () => number = () => Date.now(),
  ) {}

  /** Refreshes once a second; the page reads the latest document, so a request costs nothing. */
  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => void this.refresh().catch(() => undefined), 1000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  json(): string {
    return this.document;
  }

  async refresh(): Promise<void> {
    this.sample();
    for (const f of this.metrics.beforeScrape) f();
    const [forward, staleness, frames, sessions] = await Promise.all([
      this.metrics.forwardLatency.get(),
      this.metrics.staleness.get(),
      this.metrics.frames.get(),
      this.metrics.sessions.get(),
    ]);
    const at = this.now();
    const snap: Snapshot = { at, forward: buckets(forward.values), staleness: buckets(staleness.values) };
    this.snapshots.push(snap);
    while (this.snapshots.length > 1 && at - this.snapshots[1]!.at >= WINDOW_MS) this.snapshots.shift();
    const base = this.snapshots[0]!;
    const routes = this.routes.map((r) => {
      const channels: Record<string, ChannelStats> = {};
      const channel = (name: string) =>
        (channels[name] ??= {
          forward: quantiles(snap.forward.get(key(r.name, name)), base.forward.get(key(r.name, name))),
          staleness: quantiles(snap.staleness.get(key(r.name, name)), base.staleness.get(key(r.name, name))),
          frames: {},
          not_forwarded: 0,
        });
      for (const v of frames.values) {
        if (v.labels.route !== r.name || v.labels.direction !== 'world_to_agent') continue;
        const c = channel(String(v.labels.channel));
        const outcome = String(v.labels.outcome);
        c.frames[outcome] = (c.frames[outcome] ?? 0) + v.value;
        if (outcome !== 'forwarded') (c as { not_forwarded: number }).not_forwarded += v.value;
      }
      for (const k of snap.forward.keys())
        if (k.startsWith(`${r.name}\u0000`)) channel(k.split('\u0000')[1]!);
      const held: Record<string, number> = {};
      for (const v of sessions.values) {
        if (v.labels.route !== r.name) continue;
        const k = `${String(v.labels.kind)}/${String(v.labels.state)}`;
        held[k] = (held[k] ?? 0) + v.value;
      }
      return { name: r.name, path: r.path, channels, sessions: held };
    });
    const doc: StatsDocument = {
      generated_at: new Date(at).toISOString(),
      window_s: Math.round((at - base.at) / 1000),
      routes,
    };
    this.document = JSON.stringify(doc);
  }
}

function key(route: string, channel: string): string {
  return `${route}\u0000${channel}`;
}

/** Bucket counts per route and channel, summed over the other labels (e.g. the binding). */
function buckets(values: MetricValue<string>[]): Buckets {
  const out: Buckets = new Map();
  for (const v of values) {
    const m = v as MetricValue<string> & { metricName?: string };
    if (m.metricName?.endsWith('_bucket') !== true) continue;
    const le = v.labels.le === '+Inf' ? Infinity : Number(v.labels.le);
    const k = key(String(v.labels.route), String(v.labels.channel));
    let b = out.get(k);
    if (b === undefined) out.set(k, (b = { le: [], counts: [] }));
    const i = b.le.indexOf(le);
    if (i >= 0) b.counts[i]! += v.value;
    else {
      b.le.push(le);
      b.counts.push(v.value);
    }
  }
  for (const b of out.values()) {
    const order = b.le.map((_, i) => i).sort((x, y) => b.le[x]! - b.le[y]!);
    b.le = order.map((i) => b.le[i]!);
    b.counts = order.map((i) => b.counts[i]!);
  }
  return out;
}

/** p50 and p99 of the observations between two cumulative snapshots, interpolated within a bucket. */
export function quantiles(
  now: { le: number[]; counts: number[] } | undefined,
  before: { le: number[]; counts: number[] } | undefined,
): Quantiles {
  if (now === undefined) return { p50_ms: null, p99_ms: null, n: 0 };
  const counts = now.counts.map((c, i) => c - (before?.le[i] === now.le[i] ? (before?.counts[i] ?? 0) : 0));
  const total = counts.at(-1) ?? 0;
  if (total <= 0) return { p50_ms: null, p99_ms: null, n: 0 };
  const q = (phi: number): number => {
    const rank = phi * total;
    const i = counts.findIndex((c) => c >= rank);
    const hi = now.le[i]!;
    const lo = i === 0 ? 0 : now.le[i - 1]!;
    if (!Number.isFinite(hi)) return lo * 1000; // beyond the last finite bucket: its bound
    const below = i === 0 ? 0 : counts[i - 1]!;
    const inBucket = counts[i]! - below;
    const f = inBucket > 0 ? (rank - below) / inBucket : 1;
    return Math.round((lo + (hi - lo) * f) * 1e6) / 1000; // ms, to the microsecond
  };
  return { p50_ms: q(0.5), p99_ms: q(0.99), n: total };
}
