/**
 * The spec's `latency_stats` object (AWP-TIM-006: `{count, p50, p95, max}`, all u53) computed from samples.
 * One rank rule for every producer (the edge's observer telemetry and the demo worlds): the q-quantile is the
 * sample at index floor(q * n) of the sorted samples, clamped to the last one.
 */
export interface LatencyStats {
  count: number;
  p50: number;
  p95: number;
  max: number;
}

/** latency_stats of some samples (sorts them in place), or undefined for none. Values are rounded to integers. */
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
