/**
 * Reliable channels an observer lost its stream connection for: if no new stream connection carries
 * them within the longest of their `stale_after_ms`, the observer hears `channel_degraded` (AWP-SAF-009).
 */
import type { SubscribedChannel } from './subscriber.js';

export class DegradedWatch<T> {
  private readonly due = new Map<T, { at: number; channels: SubscribedChannel[] }>();

  /** `channels` went undeliverable to `who` at `now` (reliable ones only count). */
  lost(who: T, channels: readonly SubscribedChannel[], now: number): void {
    const reliable = channels.filter((c) => !c.latest_wins);
    if (reliable.length === 0) return;
    this.due.set(who, { at: now + Math.max(...reliable.map((c) => c.stale_after_ms)), channels: reliable });
  }

  /** A stream connection is back, or the observer is gone. */
  clear(who: T): void {
    this.due.delete(who);
  }

  /** Each observer whose channels stayed undeliverable past their time, with those channels (once). */
  *expired(now: number): Generator<[T, SubscribedChannel[]]> {
    for (const [who, d] of this.due) {
      if (now < d.at) continue;
      this.due.delete(who);
      yield [who, d.channels];
    }
  }
}
