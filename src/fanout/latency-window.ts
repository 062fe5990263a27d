/** Latency samples of one telemetry window, summarised as the spec's latency_stats (AWP-TIM-006). */
export interface LatencyStats {
  count: number;
  p50: number;
  p95: number;
  max: number;
}

export class LatencyWindow {
  private values: number[] = [];

  add(ns: number): void {
    this.values.push(ns);
  }

  /** The window's samples; starts the next window. */
  drain(): number[] {
    const v = this.values;
    this.values = [];
    return v;
  }

  /** The window's statistics, or undefined when no sample fell in it; starts the next window. */
  take(): LatencyStats | undefined {
    return summarise(this.drain());
  }
}

/** latency_stats of some samples (sorts them in place), or undefined for none. */
export function summarise(v: number[]): LatencyStats | undefined {
  if (v.length === 0) return undefined;
  v.sort((a, b) => a - b);
  const at = (q: number) => v[Math.min(v.length - 1, Math.floor(q * v.length))]!;
  return {
    count: v.length,
    p50: Math.round(at(0.5)),
    p95: Math.round(at(0.95)),
    max: Math.round(v[v.length - 1]!),
  };
}
