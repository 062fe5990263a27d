/**
 * The JSON messages a test client received, in arrival order, with bounded waits for one that matches:
 * the base of the test clients (awp-client.ts, fanout/observer-client.ts).
 */
export type Json = Record<string, unknown>;

export class JsonInbox {
  /** Every message taken in, in order. */
  readonly received: Json[] = [];
  private readonly waiters: { match: (m: Json) => boolean; resolve: (m: Json) => void }[] = [];

  /** Records a message and hands it to the first waiter it matches. */
  protected take(msg: Json): void {
    this.received.push(msg);
    const i = this.waiters.findIndex((w) => w.match(msg));
    if (i >= 0) this.waiters.splice(i, 1)[0]!.resolve(msg);
  }

  /** Resolves with the first message (already received or arriving) that matches; bounded. */
  waitFor(match: (m: Json) => boolean, timeoutMs = 5000, what = 'a message', fromIndex = 0): Promise<Json> {
    const seen = this.received.slice(fromIndex).find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const waiter = {
        match,
        resolve: (m: Json) => {
          clearTimeout(timer);
          resolve(m);
        },
      };
      const timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }

  /** Waits for a notification of `method` whose params match; resolves with its params. */
  waitNotification(
    method: string,
    match: (p: Json) => boolean = () => true,
    timeoutMs = 5000,
    fromIndex = 0,
  ): Promise<Json> {
    return this.waitFor(
      (m) => m.method === method && m.id === undefined && match((m.params ?? {}) as Json),
      timeoutMs,
      `${method} notification`,
      fromIndex,
    ).then((m) => m.params as Json);
  }
}
