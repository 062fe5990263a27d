/**
 * One time budget per event-loop turn for all of a process's sliced work: every hub's fan-out passes
 * (fanout/hub-fanout.ts), its observers' timers and the flight recorder's tick (sliced-pass.ts) run in
 * the same slice of at most `budgetMs`, taking turns, instead of each taking a budget of its own. With one
 * budget each, a turn grew with the work that was waiting: a hub's fan-out slice and its timer slice made
 * 8 ms, three busy worlds 12 ms and more, and a relay message waits for the turn on its way in and again
 * on its way back.
 *
 * Round robin: a work that used up the budget goes to the back, so the next turn starts with the others
 * (none starves behind a busy hub); a work the budget did not reach starts the next turn.
 */

import type { EngineBacklog } from './engine.js';

/**
 * A slice's time budget. A relay round trip waits for the loop twice (the agent's message, the world's
 * answer), so shorter slices shorten it: at 5x overload 1-2 ms took the relay ping's p99 from +31 to
 * +15-18 ms over idle against 4 ms, but 1 ms cost up to a fifth of the fan-out's frames per CPU-second at
 * 1,000 observers (uWS writes fewer frames per socket write) and 2 ms the flight recorder's mixed workload
 * a tenth. bench/RESULTS.md, "Slice budget and timer pass".
 */
export const SLICE_BUDGET_MS = 4;

/** Work done in slices. */
export interface SlicedWork {
  /** Does work until `loop.spent()`; returns whether some is left. Faults are the work's own to contain. */
  slice(loop: SliceLoop): boolean;
}

export class SliceLoop {
  /** Works with something left to do, in the order they run next. */
  private readonly waiting = new Set<SlicedWork>();
  private scheduled = false;
  private end = 0;
  /** Work the engine does after the turn that this turn's slices caused (ms; see `defer`). */
  private deferredMs = 0;

  constructor(
    private readonly now: () => number,
    private readonly budgetMs = SLICE_BUDGET_MS,
  ) {}

  /** The engine the slices write to, where it can fall behind (a stream worker); see `follow`. */
  private backlog: EngineBacklog | undefined;
  /** A turn found the engine behind: the next one waits for it to catch up. */
  private held = false;

  /**
   * Slices wait while `backlog` is behind: fan-out passes left unfinished meanwhile are superseded by
   * newer latest-wins frames (hub-passes.ts), so the engine gets the newest frames at the rate it
   * writes them, instead of a queue that grows with the overload.
   */
  follow(backlog: EngineBacklog): void {
    this.backlog = backlog;
    backlog.onCaughtUp(() => {
      if (!this.held) return;
      this.held = false;
      if (this.waiting.size > 0) this.schedule();
    });
  }

  /** `work` has something to do: it gets a slice in the next turn (its place kept if it was waiting). */
  want(work: SlicedWork): void {
    this.waiting.add(work);
    this.schedule();
  }

  /** `work` has nothing left (a retired hub). */
  drop(work: SlicedWork): void {
    this.waiting.delete(work);
  }

  /**
   * Whether this turn's budget is used up: by the slices' time and the engine work they left, or, for an
   * engine on another thread, by what they handed it (its own estimate).
   */
  spent(): boolean {
    if (this.backlog !== undefined && this.backlog.full()) return true;
    return this.now() + this.deferredMs >= this.end;
  }

  /**
   * The engine will do `ms` of work after this turn because of the slice (a queued publish's writes); an
   * engine on another thread does it there, and bounds the turn with its own estimate (`full`).
   */
  defer(ms: number): void {
    if (this.backlog === undefined) this.deferredMs += ms;
  }

  private turn(): void {
    this.scheduled = false;
    if (this.backlog?.behind() === true) {
      this.held = true;
      return;
    }
    this.end = this.now() + this.budgetMs;
    this.deferredMs = 0;
    try {
      for (const work of [...this.waiting]) {
        this.waiting.delete(work);
        // To the back of the line: those the budget did not reach go first next turn.
        if (work.slice(this)) this.waiting.add(work);
        if (this.spent()) break;
      }
    } finally {
      // A work that threw (its faults are its own to contain) leaves the line; the others stay on it.
      if (this.waiting.size > 0) this.schedule();
    }
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.turn());
  }
}
