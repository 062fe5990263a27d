/**
 * A hub's world events on their way to its observers: handed out in slices, within the process's one
 * budget per event-loop turn (slice-loop.ts), rather than to every observer in the turn that read the
 * event. Each observer's copy costs the socket write of the whole event (about 3 ms for 1.9 MB), so a
 * big event and a thousand observers blocked the loop for seconds; control messages now run between
 * slices. An event reaches all its observers before the next starts, so each observer hears them in the
 * world's order. At most `maxBacklog` events wait: beyond that the oldest are handed out at once, in the
 * turn that read the newest, so the hub stops reading its world meanwhile (TCP backpressure), as ordered
 * frames do (hub-fanout.ts).
 */
import type { Sequenced } from '../protocol/jsonrpc.js';
import { guarded } from '../transport/contain.js';
import type { SliceLoop, SlicedWork } from '../transport/slice-loop.js';
import { sliceThrough, type SlicedPassContext } from '../transport/sliced-pass.js';

export const MAX_EVENT_BACKLOG = 64;

/** Where an observer's fault is reported from: like a fault on the world's message (hub-fanout.ts). */
const WHERE = 'upstream_message';

export interface EventListener {
  worldEvent(event: Sequenced): void;
}

interface Pass<T> {
  readonly event: Sequenced;
  /** The observers the hub had when the event arrived (later ones did not see it happen). */
  readonly observers: readonly T[];
  next: number;
}

export class HubEvents<T extends EventListener> implements SlicedWork {
  private readonly passes: Pass<T>[] = [];

  constructor(
    private readonly ctx: Omit<SlicedPassContext, 'now'>,
    private readonly maxBacklog = MAX_EVENT_BACKLOG,
  ) {}

  get pending(): number {
    return this.passes.length;
  }

  add(event: Sequenced, observers: Iterable<T>): void {
    const pass = { event, observers: [...observers], next: 0 };
    if (pass.observers.length === 0) return;
    this.passes.push(pass);
    while (this.passes.length > this.maxBacklog) this.finishOldest();
    this.ctx.slices.want(this);
  }

  /** Hands out every waiting event now (the hub is about to end its observers). */
  flush(): void {
    while (this.passes.length > 0) this.finishOldest();
    this.ctx.slices.drop(this);
  }

  clear(): void {
    this.passes.length = 0;
    this.ctx.slices.drop(this);
  }

  slice(loop: SliceLoop): boolean {
    for (let pass = this.passes[0]; pass !== undefined; pass = this.passes[0]) {
      const { event, observers } = pass;
      // One observer's fault is its own: the others still hear the event.
      pass.next = sliceThrough(loop, observers, pass.next, WHERE, this.ctx.fault, (o) => o.worldEvent(event));
      if (pass.next < observers.length) return true;
      this.passes.shift();
      if (loop.spent()) break;
    }
    return this.passes.length > 0;
  }

  private finishOldest(): void {
    const { event, observers, next } = this.passes.shift()!;
    for (const o of observers.slice(next)) guarded(WHERE, this.ctx.fault, () => o.worldEvent(event));
  }
}
