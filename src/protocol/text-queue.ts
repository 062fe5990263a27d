/**
 * What a peer sent while the edge cannot pass it on yet (a dial, a handshake, a session lookup), in
 * order, bounded in characters like any queue for a peer (transport.max_queued_bytes). Past the bound the
 * queue is full for good: the peer that filled it is being closed, and what it held stays for the caller
 * to send or drop. Each text counts one character more than its length, so empty texts fill it too.
 * Taken from the front in O(1), so a queue of many small texts drains in linear time.
 */
export class TextQueue {
  private items: string[] = [];
  private head = 0;
  private chars = 0;
  private full = false;

  constructor(private readonly maxChars = Infinity) {}

  get length(): number {
    return this.items.length - this.head;
  }

  /** A push passed the bound: nothing more is kept. */
  get overflowed(): boolean {
    return this.full;
  }

  /** Queues `text`; false, keeping nothing, if it would pass the bound or an earlier push did. */
  push(text: string): boolean {
    if (this.full) return false;
    if (this.chars + text.length + 1 > this.maxChars) {
      this.full = true;
      return false;
    }
    this.chars += text.length + 1;
    this.items.push(text);
    return true;
  }

  shift(): string | undefined {
    if (this.head === this.items.length) return undefined;
    const text = this.items[this.head]!;
    this.items[this.head++] = ''; // let go of it now
    this.chars -= text.length + 1;
    if (this.head === this.items.length) this.reset();
    else if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      // Pushed and shifted in turns without ever emptying: drop the spent slots.
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return text;
  }

  /** Everything queued, oldest first; the queue is empty after (and stays full if it was). */
  take(): string[] {
    const all = this.head === 0 ? this.items : this.items.slice(this.head);
    this.reset();
    return all;
  }

  private reset(): void {
    this.items = [];
    this.head = 0;
    this.chars = 0;
  }
}
