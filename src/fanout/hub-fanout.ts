/**
 * The I/O side of a hub's fan-out passes (hub-passes.ts): a frame is queued where it arrives and offered
 * in slices of at most `budgetMs`, one per event-loop turn (setImmediate), so sockets, timers and control
 * messages are served between slices however many subscribers a frame has. Ordered frames (reliable,
 * per-tick) wait at most `maxOrdered` deep: beyond that the oldest are fanned out at once, in the turn
 * that read them, so the hub stops reading its world meanwhile (TCP backpressure) rather than queue
 * without bound. A slice that faults is reported like a fault on the world's message it carries.
 */
import type { FrameMetrics } from '../telemetry/frame-metrics.js';
import { guarded, type FaultReporter } from '../transport/contain.js';
import type { FrameNote } from '../transport/outbox.js';
import { HubPasses } from './hub-passes.js';
import type { HubFrame } from './keyframe-cache.js';

/**
 * A slice's time budget. A relay round trip waits for the loop twice (the agent's message, the world's
 * answer), so shorter slices shorten it: at 5x overload 1-2 ms took the relay ping's p99 from +31 to
 * +15-18 ms over idle against 4 ms, but 1 ms cost up to a fifth of the fan-out's frames per CPU-second at
 * 1,000 observers (uWS writes fewer frames per socket write) and 2 ms the flight recorder's mixed workload
 * a tenth. bench/RESULTS.md, "Slice budget and timer pass".
 */
export const SLICE_BUDGET_MS = 4;
export const MAX_ORDERED_BACKLOG = 64;

/** What the scheduler needs from its hub's context. */
export interface FanoutContext {
  now(): number;
  readonly fault: FaultReporter;
  /** Superseded frames are counted `replaced`, as an outbox slot counts a frame replaced while waiting. */
  readonly frames: Pick<FrameMetrics, 'count'>;
}

export class FanoutScheduler<T> {
  private readonly passes: HubPasses<T>;
  private scheduled = false;
  /** The engine's work after this slice that its offers caused (ms; queued publishes, hub-topics.ts). */
  private deferredMs = 0;

  /**
   * `offer` returns the work it leaves to the engine after the turn (ms), which the slice's budget counts;
   * `weight` says how many subscribers a target stands for.
   */
  constructor(
    offer: (target: T, frame: HubFrame, note: FrameNote) => number,
    private readonly ctx: FanoutContext,
    weight?: (target: T) => number,
    private readonly budgetMs = SLICE_BUDGET_MS,
    private readonly maxOrdered = MAX_ORDERED_BACKLOG,
  ) {
    this.passes = new HubPasses({
      offer: (t, f, note) => {
        this.deferredMs += offer(t, f, note);
      },
      superseded: (f, note, n) => ctx.frames.count(note.channel, 'replaced', n * f.buf.length, n),
      ...(weight !== undefined && { weight }),
    });
  }

  get idle(): boolean {
    return this.passes.idle;
  }

  add(frame: HubFrame, note: FrameNote, targets: readonly T[], latestWins: boolean): void {
    this.passes.add(frame, note, targets, latestWins);
    this.passes.drainOrdered(this.maxOrdered);
    this.schedule();
  }

  clear(): void {
    this.passes.clear();
  }

  private schedule(): void {
    if (this.scheduled || this.passes.idle) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      guarded(
        'upstream_message',
        this.ctx.fault,
        () => this.slice(),
        () => this.schedule(),
      );
    });
  }

  private slice(): void {
    const end = this.ctx.now() + this.budgetMs;
    this.deferredMs = 0;
    if (this.passes.run(() => this.ctx.now() + this.deferredMs >= end)) this.schedule();
  }
}
