/** A FIFO of received items with a bounded wait for the next one. */

export class WaitTimeoutError extends Error {
  override readonly name = 'WaitTimeoutError';
}

interface Waiter<T> {
  readonly resolve: (item: T) => void;
  readonly reject: (err: Error) => void;
  readonly timer: NodeJS.Timeout;
}

export class Inbox<T> {
  private readonly items: T[] = [];
  private waiter: Waiter<T> | undefined;
  private cancelled: string | undefined;

  get size(): number {
    return this.items.length;
  }

  push(item: T): void {
    const waiter = this.waiter;
    if (waiter === undefined) {
      this.items.push(item);
      return;
    }
    this.waiter = undefined;
    clearTimeout(waiter.timer);
    waiter.resolve(item);
  }

  /** The next item; rejects with WaitTimeoutError (message from `describe`) after `timeoutMs`. */
  next(timeoutMs: number, describe: () => string): Promise<T> {
    if (this.cancelled !== undefined) return Promise.reject(new Error(this.cancelled));
    if (this.items.length > 0) return Promise.resolve(this.items.shift()!);
    if (this.waiter !== undefined)
      return Promise.reject(new Error('Inbox.next called while already waiting'));
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = undefined;
        reject(new WaitTimeoutError(describe()));
      }, timeoutMs);
      this.waiter = { resolve, reject, timer };
    });
  }

  /** Removes and returns everything queued. */
  drain(): T[] {
    return this.items.splice(0, this.items.length);
  }

  /** Rejects the pending wait and every later one (teardown, or the other side failed first). */
  cancel(reason: string): void {
    this.cancelled ??= reason;
    const waiter = this.waiter;
    if (waiter === undefined) return;
    this.waiter = undefined;
    clearTimeout(waiter.timer);
    waiter.reject(new Error(reason));
  }
}
