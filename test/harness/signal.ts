/** A one-shot signal between the two sides of a play, waited on with a bound. */
import { WaitTimeoutError } from './inbox.js';

export class Signal {
  private fired = false;
  private failure: Error | undefined;
  private readonly listeners = new Set<() => void>();

  fire(): void {
    this.fired = true;
    this.wake();
  }

  /** Makes current and later waits reject (the other side failed). */
  abort(reason: string): void {
    this.failure ??= new Error(reason);
    this.wake();
  }

  wait(timeoutMs: number, describe: () => string): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        if (this.failure !== undefined) reject(this.failure);
        else if (this.fired) resolve();
        else return false;
        return true;
      };
      if (check()) return;
      const timer = setTimeout(() => {
        this.listeners.delete(listener);
        reject(new WaitTimeoutError(describe()));
      }, timeoutMs);
      const listener = (): void => {
        if (!check()) return;
        clearTimeout(timer);
        this.listeners.delete(listener);
      };
      this.listeners.add(listener);
    });
  }

  private wake(): void {
    for (const listener of [...this.listeners]) listener();
  }
}
