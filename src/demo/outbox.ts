/**
 * A per-connection send queue in which a `latest-wins` channel holds at most one pending frame: a newer frame of
 * that channel replaces the pending one in place instead of queueing behind it (AWP-TRN-009, AWP-DAT-002). Every
 * other item (control messages, reliable frames) keeps its order and is never dropped. So a stalled connection
 * delays control by at most one frame per latest-wins channel. Sans-IO: the server pops items when the socket
 * can take more.
 */

export interface OutboxEntry<T> {
  readonly item: T;
  /** Latest-wins slot key (the channel id); undefined for items that must all be sent. */
  readonly slot?: number;
  /** A keyframe may replace a pending frame; a pending frame is never replaced by a delta it depends on. */
  readonly keyframe?: boolean;
  /** The item restarts its channel (resync): a replacement must carry that on (AWP-DAT-009). */
  readonly resync?: boolean;
}

export type PushResult = 'queued' | 'replaced' | 'dropped' | 'full';

interface Cell<T> {
  entry: OutboxEntry<T>;
}

export class LatestWinsOutbox<T> {
  private queue: Cell<T>[] = [];
  private head = 0;
  private readonly slots = new Map<number, Cell<T>>();
  /** Replacements and drops so far (frames that never reached the socket). */
  dropped = 0;

  /**
   * @param limit most items held (latest-wins slots count once); `push` answers `full` beyond it, and the
   *   caller disconnects the peer rather than buffer without bound.
   * @param markResync applied to a newer frame that replaces a pending resync frame.
   */
  constructor(
    private readonly limit = 10_000,
    private readonly markResync: (item: T) => T = (item) => item,
  ) {}

  get length(): number {
    return this.queue.length - this.head;
  }

  push(entry: OutboxEntry<T>): PushResult {
    if (entry.slot !== undefined) {
      const pending = this.slots.get(entry.slot);
      if (pending !== undefined) {
        this.dropped += 1;
        if (entry.keyframe === false && pending.entry.keyframe !== false) return 'dropped';
        const resync = pending.entry.resync === true || entry.resync === true;
        pending.entry =
          resync && entry.resync !== true ? { ...entry, item: this.markResync(entry.item), resync } : entry;
        return 'replaced';
      }
    }
    if (this.length >= this.limit) return 'full';
    const cell: Cell<T> = { entry };
    this.queue.push(cell);
    if (entry.slot !== undefined) this.slots.set(entry.slot, cell);
    return 'queued';
  }

  shift(): T | undefined {
    if (this.head >= this.queue.length) return undefined;
    const cell = this.queue[this.head]!;
    this.head += 1;
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    const slot = cell.entry.slot;
    if (slot !== undefined && this.slots.get(slot) === cell) this.slots.delete(slot);
    return cell.entry.item;
  }
}
