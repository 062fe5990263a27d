/**
 * Downsamples one channel for one subscriber to its granted rate (AWP-DAT-003), on the frames' own
 * capture times: a frame passes once its slot is due; the slot schedule advances by exactly one
 * period, so capture jitter neither drops frames at the full rate nor lets the average exceed it.
 */
export class RateGate {
  private due: number | undefined;

  /** `rate_hz` null or not below the source rate: every frame passes (per-tick channels never drop). */
  constructor(private readonly period_ns: number | null) {}

  static forRate(rate_hz: number | null): RateGate {
    return new RateGate(rate_hz === null || rate_hz <= 0 ? null : 1e9 / rate_hz);
  }

  pass(ts_mono_ns: number): boolean {
    const p = this.period_ns;
    if (p === null) return true;
    if (this.due === undefined || ts_mono_ns - this.due > p) {
      this.due = ts_mono_ns + p; // first frame, or a pause longer than a period: restart the schedule
      return true;
    }
    if (ts_mono_ns < this.due - p / 2) return false;
    this.due += p;
    return true;
  }
}
