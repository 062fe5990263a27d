/**
 * The I/O side of a hub's fan-out passes (hub-passes.ts): a frame is queued where it arrives and offered
 * in slices, within the process's one budget per event-loop turn (slice-loop.ts), so sockets, timers and
 * control messages are served between slices however many subscribers a frame has. Ordered frames (reliable,
 * per-tick) wait at most `maxOrdered` deep: beyond that the oldest are fanned out at once, in the turn
 * that read them, so the hub stops reading its world meanwhile (TCP backpressure) rather than queue
 * without bound. A slice that faults is reported like a fault on the world's message it carries.
 */
import type { FrameMetrics } from '../telemetry/frame-metrics.js';
import { guarded, type FaultReporter } from '../transport/contain.js';
import type { FrameNote } from '../transport/outbox.js';
import { HubPasses } from './hub-passes.js';
import type { HubFrame } from './keyframe-cache.js';
import type { SliceLoop, SlicedWork } from '../transport/slice-loop.js';

export const MAX_ORDERED_BACKLOG = 64;

/** What the scheduler needs from its hub's context. */
export interface FanoutContext {
  readonly fault: FaultReporter;
  /** Superseded frames are counted `replaced`, as an outbox slot counts a frame replaced while waiting. */
  readonly frames: Pick<FrameMetrics, 'count'>;
  /** The process's one budget per turn, shared with the other hubs' passes (slice-loop.ts). */
  readonly slices: SliceLoop;
}

export class FanoutScheduler<T> implements SlicedWork {
  private readonly passes: HubPasses<T>;

  /**
   * `offer` returns the work it leaves to the engine after the turn (ms), which the turn's budget counts;
   * `weight` says how many subscribers a target stands for.
   */
  constructor(
    offer: (target: T, frame: HubFrame, note: FrameNote) => number,
    private readonly ctx: FanoutContext,
    weight?: (target: T) => number,
    private readonly maxOrdered = MAX_ORDERED_BACKLOG,
  ) {
    this.passes = new HubPasses({
      offer: (t, f, note) => ctx.slices.defer(offer(t, f, note)),
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
    this.ctx.slices.drop(this);
  }

  slice(loop: SliceLoop): boolean {
    let more = true;
    guarded(
      'upstream_message',
      this.ctx.fault,
      () => (more = this.passes.run(() => loop.spent())),
      () => (more = !this.passes.idle),
    );
    return more;
  }

  private schedule(): void {
    if (!this.passes.idle) this.ctx.slices.want(this);
  }
}
