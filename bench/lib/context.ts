/** What every scenario gets from the runner, and small helpers shared by scenarios. */
import type { Runtime } from './runtime.js';
import { LogHistogram, type HistogramData, type LatencySummary } from './histogram.js';

export interface BenchContext {
  readonly runtime: Runtime;
  /** --full: the sizes (1,000 observers, 10,000 sessions); otherwise the quick sizes. */
  readonly full: boolean;
  /** Measurement window per case, seconds (--duration overrides the scenario's default). */
  readonly durationS: number | undefined;
  /** Progress on stderr (stdout carries the JSON). */
  log(line: string): void;
}

export function ratio(a: number, b: number, digits = 3): number | null {
  if (!Number.isFinite(a) || !Number.isFinite(b) || b === 0) return null;
  const f = 10 ** digits;
  return Math.round((a / b) * f) / f;
}

export function diff(a: number | undefined, b: number | undefined, digits = 2): number | null {
  if (a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b)) return null;
  const f = 10 ** digits;
  return Math.round((a - b) * f) / f;
}

export function summarise(parts: readonly (HistogramData | undefined)[]): LatencySummary {
  return LogHistogram.from(parts.filter((p): p is HistogramData => p !== undefined)).summary();
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
