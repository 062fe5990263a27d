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

/**
 * Runs `each` on `items` from index `next` until the turn's budget is spent; returns the index to go on
 * from. Each item's fault is its own (reported from `where`): the others still run.
 */
export function sliceThrough<T>(
  loop: SliceLoop,
  items: readonly T[],
  next: number,
  where: string,
  fault: FaultReporter,
  each: (item: T) => void,
): number {
  while (next < items.length) {
    const item = items[next++]!;
    guarded(where, fault, () => each(item));
    if (loop.spent()) break;
  }
  return next;
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
    const ctx = this.ctx;
    this.next = sliceThrough(loop, this.items, this.next, this.where, ctx.fault, (item) =>
      this.each(item, ctx.now()),
    );
    if (this.running) return true;
    this.items = [];
    this.next = 0;
    return false;
  }
}
