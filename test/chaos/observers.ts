/**
 * Fan-out load for the chaos run: observers (test/fanout/observer-client.ts) on the edge's fan-out
 * route, subscribed to every arm channel over the `ws` stream binding. Each slot keeps one observer
 * session; when the edge closes it (the world went away), the slot opens a new one, retrying within a
 * deadline, as a dashboard would. Every session's frames are checked: seq order per connection, no
 * unexplained gap on the reliable channel, and its first reliable frame a keyframe with `resync`.
 */
import { ObserverClient, isResyncKeyframe, type ChannelLog } from '../fanout/observer-client.js';
import { errMessage, sleep } from './relay-agent.js';

const SUBSCRIBE = [{ channel: 'proprio' }, { channel: 'camera' }, { channel: 'state' }];
const RELIABLE = 'state';

export interface ObserverStats {
  readonly slots: number;
  readonly sessions: number;
  readonly reopened: number;
  readonly frames: number;
  readonly order_violations: number;
  /** Reliable-channel gaps whose next frame is not a resync keyframe. */
  readonly reliable_gaps: number;
  /** Sessions whose first reliable frame was not a keyframe with resync (AWP-DAT-009, AWP-TRN-012). */
  readonly first_reliable_without_resync: number;
  /** Sessions that received no reliable frame at all. */
  readonly sessions_without_reliable_frames: number;
  readonly open_retries: number;
  readonly errors: string[];
}

interface Slot {
  readonly credential: string;
  current: ObserverClient | null;
  readonly history: ObserverClient[];
}

export class ObserverPool {
  private readonly slots: Slot[];
  private stopped = false;
  private openRetries = 0;
  private readonly errors: string[] = [];
  private readonly reopening = new Set<Promise<void>>();

  constructor(
    private readonly url: string,
    credentials: readonly string[],
    private readonly reopenDeadlineMs: number,
  ) {
    this.slots = credentials.map((credential) => ({ credential, current: null, history: [] }));
  }

  async start(): Promise<void> {
    await Promise.all(this.slots.map((s) => this.openSlot(s)));
  }

  /** Waits until every slot has an open session that has received a reliable frame (bounded). */
  async settled(timeoutMs: number): Promise<boolean> {
    const end = performance.now() + timeoutMs;
    while (performance.now() < end) {
      if (
        this.slots.every(
          (s) => s.current !== null && s.current.closed === null && reliableCount(s.current) > 0,
        )
      )
        return true;
      await sleep(50);
    }
    return false;
  }

  stats(): ObserverStats {
    let frames = 0;
    let order = 0;
    let gaps = 0;
    let withoutResync = 0;
    let withoutReliable = 0;
    let sessions = 0;
    for (const slot of this.slots) {
      for (const c of slot.history) {
        sessions += 1;
        for (const log of c.channels.values()) {
          frames += log.count;
          order += log.orderViolations.length;
        }
        const reliable = reliableLog(c);
        if (reliable === undefined || reliable.count === 0) {
          withoutReliable += 1;
          continue;
        }
        if (!isResyncKeyframe(reliable.flags[0]!)) withoutResync += 1;
        for (let i = 1; i < reliable.count; i++) {
          if (reliable.seq[i]! !== reliable.seq[i - 1]! + 1 && !isResyncKeyframe(reliable.flags[i]!))
            gaps += 1;
        }
      }
    }
    return {
      slots: this.slots.length,
      sessions,
      reopened: sessions - this.slots.length,
      frames,
      order_violations: order,
      reliable_gaps: gaps,
      first_reliable_without_resync: withoutResync,
      sessions_without_reliable_frames: withoutReliable,
      open_retries: this.openRetries,
      errors: [...this.errors],
    };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const s of this.slots) s.current?.terminate();
    await Promise.all([...this.reopening]);
  }

  private async openSlot(slot: Slot): Promise<void> {
    const deadline = performance.now() + this.reopenDeadlineMs;
    let backoff = 100;
    while (!this.stopped) {
      try {
        const c = await ObserverClient.open(this.url, {
          kind: 'ws',
          credential: slot.credential,
          subscribe: SUBSCRIBE,
          timeoutMs: 8000,
        });
        slot.current = c;
        slot.history.push(c);
        c.control.once('close', () => {
          if (this.stopped || slot.current !== c) return;
          slot.current = null;
          c.terminate();
          const p = this.openSlot(slot).finally(() => this.reopening.delete(p));
          this.reopening.add(p);
        });
        return;
      } catch (err) {
        this.openRetries += 1;
        if (performance.now() > deadline) {
          this.errors.push(`observer ${slot.credential}: cannot open: ${errMessage(err)}`);
          return;
        }
        await sleep(backoff);
        backoff = Math.min(1000, backoff * 2);
      }
    }
  }
}

function reliableLog(c: ObserverClient): ChannelLog | undefined {
  const id = c.ids.get(RELIABLE);
  return id === undefined ? undefined : c.channels.get(id);
}

function reliableCount(c: ObserverClient): number {
  return reliableLog(c)?.count ?? 0;
}
