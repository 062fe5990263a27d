/**
 * Drains of many stream connections, run in slices bounded in time (issue 15).
 *
 * When an overloaded edge's sockets become writable together, each one's drain event writes what waits
 * in its outbox. Run as the events arrive, a thousand of them (each writing frames of up to 64 KiB) hold
 * one poll phase of the event loop, and a ping or a relay message read in that phase waits behind them.
 * Here a drain event only queues its connection; the writes run on a later turn, a slice at a time, so
 * the event loop returns to I/O between slices (as the hubs' fan-out passes do, fanout/hub-passes.ts).
 * Meanwhile a waiting latest-wins frame can only be replaced by a newer one: nothing is lost by waiting.
 */

/** Drains between two looks at the clock. */
const CHUNK = 16;

export class DrainScheduler<T> {
  private queue: T[] = [];
  private readonly queued = new Set<T>();
  private scheduled = false;

  constructor(
    /** Writes what `target` can take now (its outbox's drain); an exception is the caller's to contain. */
    private readonly drain: (target: T) => void,
    private readonly now: () => number,
    private readonly sliceMs: number,
    private readonly defer: (run: () => void) => void = setImmediate,
  ) {}

  /** Connections waiting for their slice. */
  get pending(): number {
    return this.queue.length;
  }

  /** `target`'s socket drained: its outbox is written on a later turn (once, however often it asks). */
  request(target: T): void {
    if (this.queued.has(target)) return;
    this.queued.add(target);
    this.queue.push(target);
    this.schedule();
  }

  /** `target` is gone: it is not drained any more. */
  forget(target: T): void {
    if (!this.queued.delete(target)) return;
    this.queue = this.queue.filter((t) => t !== target);
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    this.defer(() => this.slice());
  }

  private slice(): void {
    this.scheduled = false;
    const end = this.now() + this.sliceMs;
    let i = 0;
    try {
      while (i < this.queue.length) {
        const target = this.queue[i++]!;
        // Dequeued before it drains: a drain that throws is not repeated, and it may ask again.
        this.queued.delete(target);
        this.drain(target);
        if (i % CHUNK === 0 && this.now() >= end) break;
      }
    } finally {
      this.queue = this.queue.slice(i);
      if (this.queue.length > 0) this.schedule();
    }
  }
}
