/**
 * Keeps an agent's command frames on a latest-wins command channel within the channel's granted rate
 * (AWP-DAT-003, agent side): a frame that arrives before the channel's next slot waits for it, and a
 * newer frame replaces it (the oldest is dropped first). Slots are those of the observers' rate gates
 * (slot-schedule.ts). Reliable command channels are never paced here: the edge cannot drop their frames, so
 * the world judges their rate.
 */
import { SlotSchedule } from './slot-schedule.js';

/**
 * The slowest rate paced as granted. The schema asks only rate_hz > 0 and a world grants what an agent
 * asks below its declared rate, so a grant may be 1e-7 Hz: a held frame would wait months for its slot.
 * Slower grants (and ones that are no rate: 0, negative, NaN) are paced at this one, a frame per 1000 s,
 * so a frame waits at most that long. That is far slower than any command loop; the little it lets
 * through beyond such a grant the world judges, as on reliable channels.
 */
export const MIN_PACED_RATE_HZ = 0.001;

interface Channel<T> {
  /** The granted rate the slots follow. */
  rate_hz: number;
  /** Slots in ms. */
  slots: SlotSchedule;
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
    if (c === undefined || !Object.is(c.rate_hz, rate_hz)) {
      // A channel's first frame, or its grant changed (a subscribe at another rate): slots of the new rate.
      const hz = rate_hz >= MIN_PACED_RATE_HZ ? rate_hz : MIN_PACED_RATE_HZ;
      const slots = new SlotSchedule(1000 / hz);
      if (c === undefined) this.channels.set(channel_id, (c = { rate_hz, slots, held: undefined }));
      else Object.assign(c, { rate_hz, slots });
    }
    if (c.held === undefined && c.slots.take(now)) return 'send';
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
      if (c.slots.take(now)) {
        frames.push(c.held);
        c.held = undefined;
      } else {
        const at = c.slots.opensAt()!; // a frame is held only after its first offer started the schedule
        if (next === undefined || at < next) next = at;
      }
    }
    return { frames, next };
  }
}
