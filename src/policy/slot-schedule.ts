/**
 * A rate as a schedule of slots, in any time unit: a slot opens every `period`, with half a period of
 * tolerance for jitter. The schedule advances by exactly one period per slot taken, so jitter neither
 * drops items at the full rate nor lets the average exceed it; after a pause longer than a period it
 * restarts at the next item. Used by the observers' rate gates (fanout) and the command pacer.
 */
export class SlotSchedule {
  /** When the next slot is due; undefined before the first item. */
  private due: number | undefined;

  constructor(readonly period: number) {}

  /** Takes the slot open at `now`, if one is. */
  take(now: number): boolean {
    const p = this.period;
    if (this.due === undefined || now - this.due > p) {
      this.due = now + p; // first item, or a pause longer than a period: restart the schedule
      return true;
    }
    if (now < this.due - p / 2) return false;
    this.due += p;
    return true;
  }

  /** Continues where `other` (of the same period) stands: the next slot is due when its is. */
  follow(other: SlotSchedule): void {
    if (other.period === this.period) this.due = other.due;
  }

  /** The earliest time `take` succeeds again; undefined before the first item (it succeeds at once). */
  opensAt(): number | undefined {
    return this.due === undefined ? undefined : this.due - this.period / 2;
  }
}
