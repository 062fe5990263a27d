/**
 * Periodic work over many items (a hub's observer sessions' heartbeats and telemetry, a recorder's session
 * logs), done in slices within the process's one budget per event-loop turn (slice-loop.ts) rather than
 * all at once in the timer's turn: at 5x overload, 1,819 observers, half the samples of the turns over 4 ms
 * were one hub tick's telemetry and heartbeat pings. A pass visits every item once; a `start` while a pass
 * is under way starts none, so a saturated edge runs the work late rather than skipping the items at the
 * end of the list.
 */
import { guarded, type FaultReporter } from './contain.js';
import type { SliceLoop, SlicedWork } from './slice-loop.js';

export interface SlicedPassContext {
  now(): number;
  readonly fault: FaultReporter;
  readonly slices: SliceLoop;
}

export class SlicedPass<T> implements SlicedWork {
  private items: T[] = [];
  private next = 0;

  constructor(
    /** Where a fault is reported from (each item's fault is its own: the others still run). */
    private readonly where: string,
    private readonly each: (item: T, now: number) => void,
    private readonly ctx: SlicedPassContext,
  ) {}

  get running(): boolean {
    return this.next < this.items.length;
  }

  /** Starts a pass over `items` (a copy: items may come and go meanwhile), unless one is under way. */
  start(items: Iterable<T>): void {
    if (this.running) return;
    this.items = [...items];
    this.next = 0;
    if (this.items.length > 0) this.ctx.slices.want(this);
  }

  /** Drops the rest of the pass (its owner is done). */
  clear(): void {
    this.items = [];
    this.next = 0;
    this.ctx.slices.drop(this);
  }

  slice(loop: SliceLoop): boolean {
    while (this.next < this.items.length) {
      const item = this.items[this.next++]!;
      guarded(this.where, this.ctx.fault, () => this.each(item, this.ctx.now()));
      if (loop.spent()) break;
    }
    if (this.running) return true;
    this.items = [];
    this.next = 0;
    return false;
  }
}
