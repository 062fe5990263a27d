/**
 * A log-bucketed latency histogram (1 % relative resolution, ns values), cheap to fill per frame,
 * mergeable across processes (generators send theirs over IPC), and summarised in microseconds.
 */

/** Buckets per factor e: ln(1.01)^-1, i.e. ~1 % wide buckets. */
const PER_E = 1 / Math.log(1.01);
const BUCKETS = 2600; // up to e^(2600/100.5) ns ~ 170 s

export interface HistogramData {
  readonly buckets: [number, number][];
  readonly count: number;
  readonly sum: number;
  readonly min: number;
  readonly max: number;
  /** Samples below zero (a receiver's clock ahead of the sender's stamp): counted, not bucketed. */
  readonly negative: number;
}

export interface LatencySummary {
  readonly count: number;
  readonly mean_us: number;
  readonly p50_us: number;
  readonly p90_us: number;
  readonly p99_us: number;
  readonly p999_us: number;
  readonly max_us: number;
  readonly negative?: number;
}

export class LogHistogram {
  private readonly counts = new Float64Array(BUCKETS);
  count = 0;
  sum = 0;
  min = Infinity;
  max = -Infinity;
  negative = 0;

  add(ns: number): void {
    if (ns < 0) {
      this.negative++;
      return;
    }
    const i = ns < 1 ? 0 : Math.min(BUCKETS - 1, Math.floor(Math.log(ns) * PER_E));
    this.counts[i]! += 1;
    this.count++;
    this.sum += ns;
    if (ns < this.min) this.min = ns;
    if (ns > this.max) this.max = ns;
  }

  merge(d: HistogramData): void {
    for (const [i, n] of d.buckets) this.counts[i]! += n;
    this.count += d.count;
    this.sum += d.sum;
    this.min = Math.min(this.min, d.min);
    this.max = Math.max(this.max, d.max);
    this.negative += d.negative;
  }

  /** The value below which a share `q` of the samples fall (bucket midpoint, clamped to min/max). */
  quantile(q: number): number {
    if (this.count === 0) return NaN;
    const rank = q * this.count;
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i]!;
      if (seen >= rank && this.counts[i]! > 0) {
        const mid = Math.exp((i + 0.5) / PER_E);
        return Math.min(this.max, Math.max(this.min, mid));
      }
    }
    return this.max;
  }

  data(): HistogramData {
    const buckets: [number, number][] = [];
    for (let i = 0; i < BUCKETS; i++) if (this.counts[i]! > 0) buckets.push([i, this.counts[i]!]);
    return {
      buckets,
      count: this.count,
      sum: this.sum,
      min: this.min,
      max: this.max,
      negative: this.negative,
    };
  }

  static from(parts: readonly HistogramData[]): LogHistogram {
    const h = new LogHistogram();
    for (const p of parts) h.merge(p);
    return h;
  }

  summary(): LatencySummary {
    const us = (ns: number) => (Number.isFinite(ns) ? Math.round(ns / 10) / 100 : NaN);
    return {
      count: this.count,
      mean_us: us(this.count > 0 ? this.sum / this.count : NaN),
      p50_us: us(this.quantile(0.5)),
      p90_us: us(this.quantile(0.9)),
      p99_us: us(this.quantile(0.99)),
      p999_us: us(this.quantile(0.999)),
      max_us: us(this.count > 0 ? this.max : NaN),
      ...(this.negative > 0 ? { negative: this.negative } : {}),
    };
  }
}
