/**
 * Keeps an agent's command frames on a latest-wins command channel within the channel's granted rate
 * (AWP-DAT-003, agent side): a frame that arrives before the channel's next slot waits for it, and a
 * newer frame replaces it (the oldest is dropped first). Slots advance by exactly one period, with half a
 * period of tolerance for jitter, as the observers' rate gates do. Reliable command channels are never
 * paced here: the edge cannot drop their frames, so the world judges their rate.
 */
interface Channel<T> {
  readonly period_ms: number;
  /** When the next slot opens (ms); undefined before the first frame. */
  due: number | undefined;
  held: T | undefined;
}

export class CommandPacer<T> {
  private readonly channels = new Map<number, Channel<T>>();

  /**
   * Offers a frame at `now` (ms): 'send' (write it now), 'held' (it waits for its slot), or 'replaced'
   * (it waits, and the frame that was waiting is dropped).
   */
  offer(channel_id: number, rate_hz: number, now: number, frame: T): 'send' | 'held' | 'replaced' {
    let c = this.channels.get(channel_id);
    if (c === undefined)
      this.channels.set(channel_id, (c = { period_ms: 1000 / rate_hz, due: undefined, held: undefined }));
    if (c.held === undefined && this.open(c, now)) return 'send';
    const outcome = c.held === undefined ? 'held' : 'replaced';
    c.held = frame;
    return outcome;
  }

  /** Waiting frames whose slot has come (write them now), and when to look again. */
  due(now: number): { frames: T[]; next: number | undefined } {
    const frames: T[] = [];
    let next: number | undefined;
    for (const c of this.channels.values()) {
      if (c.held === undefined) continue;
      if (this.open(c, now)) {
        frames.push(c.held);
        c.held = undefined;
      } else {
        const at = c.due! - c.period_ms / 2;
        if (next === undefined || at < next) next = at;
      }
    }
    return { frames, next };
  }

  private open(c: Channel<T>, now: number): boolean {
    const p = c.period_ms;
    if (c.due === undefined || now - c.due > p) {
      c.due = now + p;
      return true;
    }
    if (now < c.due - p / 2) return false;
    c.due += p;
    return true;
  }
}
