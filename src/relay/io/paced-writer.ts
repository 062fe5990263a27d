/**
 * A command pacer (policy/command-pacer.ts) on a timer: a command frame that waits for its channel's next
 * slot is written when the slot comes. Shared by the inline (control connection) and stream paths.
 */
import { CommandPacer } from '../../policy/command-pacer.js';
import { timerDelay } from '../../protocol/timer-delay.js';

export class PacedWriter<T> {
  private readonly pacer = new CommandPacer<T>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly now: () => number,
    /** Writes a frame whose slot came; false once the connection has ended (nothing more is written). */
    private readonly write: (frame: T) => boolean,
  ) {}

  /** 'send': write it now; 'held' or 'replaced': it waits for its slot (replacing the one waiting). */
  offer(channel_id: number, rate_hz: number, frame: T): 'send' | 'held' | 'replaced' {
    const outcome = this.pacer.offer(channel_id, rate_hz, this.now(), frame);
    if (outcome !== 'send') this.schedule();
    return outcome;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.timer !== undefined || this.stopped) return;
    const { frames, next } = this.pacer.due(this.now());
    for (const f of frames) if (!this.write(f)) return;
    if (next === undefined) return;
    // A slot beyond the longest timer is looked at again when that fires (see timer-delay.ts).
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.schedule();
      },
      timerDelay(next - this.now()),
    );
  }
}
