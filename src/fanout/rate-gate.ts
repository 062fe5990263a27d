/**
 * Downsamples one channel for one subscriber to its granted rate (AWP-DAT-003), on the frames' own
 * capture times: a frame passes once its slot is due (policy/slot-schedule.ts).
 */
import { SlotSchedule } from '../policy/slot-schedule.js';

export class RateGate {
  private readonly slots: SlotSchedule | null;

  /** `rate_hz` null or not below the source rate: every frame passes (per-tick channels never drop). */
  constructor(period_ns: number | null) {
    this.slots = period_ns === null ? null : new SlotSchedule(period_ns);
  }

  static forRate(rate_hz: number | null): RateGate {
    return new RateGate(rate_hz === null || rate_hz <= 0 ? null : 1e9 / rate_hz);
  }

  /** Continues where another gate of the same rate stands (a subscriber moving to or from a topic's gate). */
  follow(other: RateGate): void {
    if (this.slots !== null && other.slots !== null) this.slots.follow(other.slots);
  }

  pass(ts_mono_ns: number): boolean {
    return this.slots === null || this.slots.take(ts_mono_ns);
  }
}
