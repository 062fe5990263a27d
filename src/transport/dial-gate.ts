/**
 * How many WebSocket handshakes the edge has in flight toward one upstream (scheme, host and port) at
 * once. An upstream that is itself an edge closes the handshakes beyond its
 * `transport.max_pending_handshakes_per_address` (64 by default) from one address at once, and every
 * connection of this edge comes from one address: a burst (a dashboard of 200 opening, every agent
 * resuming after an outage) would be refused beyond the 64th. Beyond the limit, dials wait their turn,
 * within their own connect timeout.
 */

/** Handshakes in flight per upstream: half the default per-address limit, so two processes fit. */
export const MAX_PENDING_DIALS_PER_UPSTREAM = 32;

interface Waiter {
  readonly grant: () => void;
  readonly timer: NodeJS.Timeout;
}

export class DialGate {
  private readonly inFlight = new Map<string, number>();
  /** Waiters in arrival order (a set: one timing out leaves in O(1), and thousands may at once). */
  private readonly queues = new Map<string, Set<Waiter>>();

  constructor(private readonly limit = MAX_PENDING_DIALS_PER_UPSTREAM) {}

  /**
   * Resolves with a release function once a handshake toward `key` may start; rejects when none could
   * start within `timeoutMs`. The release must be called exactly once, when the handshake is over.
   */
  acquire(key: string, timeoutMs: number): Promise<() => void> {
    const n = this.inFlight.get(key) ?? 0;
    if (n < this.limit) {
      this.inFlight.set(key, n + 1);
      return Promise.resolve(this.releaser(key));
    }
    return new Promise((resolve, reject) => {
      const queue = this.queues.get(key) ?? new Set<Waiter>();
      this.queues.set(key, queue);
      const waiter: Waiter = {
        grant: () => {
          clearTimeout(waiter.timer);
          resolve(this.releaser(key));
        },
        timer: setTimeout(() => {
          queue.delete(waiter);
          if (queue.size === 0) this.queues.delete(key);
          reject(new Error(`${this.limit} connections to it were being opened for ${timeoutMs} ms`));
        }, timeoutMs),
      };
      queue.add(waiter);
    });
  }

  /** Handshakes in flight toward `key` (for tests). */
  pending(key: string): number {
    return this.inFlight.get(key) ?? 0;
  }

  private releaser(key: string): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const queue = this.queues.get(key);
      const next = queue?.values().next().value;
      if (next !== undefined) queue!.delete(next);
      if (queue?.size === 0) this.queues.delete(key);
      // The slot passes to the next waiter as is; otherwise it is freed.
      if (next !== undefined) return next.grant();
      const n = (this.inFlight.get(key) ?? 1) - 1;
      if (n <= 0) this.inFlight.delete(key);
      else this.inFlight.set(key, n);
    };
  }
}

/** The key of an upstream URL: scheme, host and port (paths of one upstream share its handshake limit). */
export function upstreamKey(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}`;
  } catch {
    return url;
  }
}
