/** Latency samples of one telemetry window, summarised as the spec's latency_stats (AWP-TIM-006). */
import { summarise, type LatencyStats } from '../protocol/latency-stats.js';

export { summarise, type LatencyStats };

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
