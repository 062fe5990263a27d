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

/**
 * latency_stats of some samples, or undefined for none. Values are rounded to integers. Sorted as a
 * Float64Array: its numeric sort calls no comparator (an edge summarises every observer's window each
 * second, and `Array.prototype.sort` with one was most of that time at 1,819 observers in a profile).
 */
export function summarise(samples: readonly number[]): LatencyStats | undefined {
  if (samples.length === 0) return undefined;
  const v = Float64Array.from(samples).sort();
  const at = (q: number) => v[Math.min(v.length - 1, Math.floor(q * v.length))]!;
  return {
    count: v.length,
    p50: Math.round(at(0.5)),
    p95: Math.round(at(0.95)),
    max: Math.round(v[v.length - 1]!),
  };
}
