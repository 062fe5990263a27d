/**
 * The hub's timer work over its observer sessions (heartbeat pings, session.telemetry, silence and the
 * reconnect window), in slices like the frame passes (hub-fanout.ts): at most `budgetMs` per event-loop
 * turn, so that with thousands of observers one tick does not hold the loop while relay messages and
 * pings wait (profile at 5x overload, 1,819 observers: half the samples of the turns over 4 ms were one
 * tick's telemetry and heartbeat pings). A pass visits every session once; a tick while a pass is under way starts none, so
 * a saturated edge runs timers late rather than skipping sessions at the end of the list.
 */
import { guarded, type FaultReporter } from '../transport/contain.js';
import { SLICE_BUDGET_MS } from './hub-fanout.js';

export interface TimerPassContext {
  now(): number;
  readonly fault: FaultReporter;
}

export class TimerPass<T> {
  private items: T[] = [];
  private next = 0;
  private scheduled = false;

  constructor(
    private readonly each: (item: T, now: number) => void,
    private readonly ctx: TimerPassContext,
    private readonly budgetMs = SLICE_BUDGET_MS,
  ) {}

  get running(): boolean {
    return this.next < this.items.length;
  }

  /** Starts a pass over `items` (a copy: sessions may come and go meanwhile), unless one is under way. */
  start(items: Iterable<T>): void {
    if (this.running) return;
    this.items = [...items];
    this.next = 0;
    this.slice();
  }

  /** Drops the rest of the pass (the hub retired). */
  clear(): void {
    this.items = [];
    this.next = 0;
  }

  private slice(): void {
    const end = this.ctx.now() + this.budgetMs;
    while (this.next < this.items.length) {
      const item = this.items[this.next++]!;
      // One session's fault is its own: the others' timers still run.
      guarded('hub_timer', this.ctx.fault, () => this.each(item, this.ctx.now()));
      if (this.ctx.now() >= end) break;
    }
    if (!this.running) {
      this.items = [];
      this.next = 0;
      return;
    }
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (this.running) this.slice();
    });
  }
}
