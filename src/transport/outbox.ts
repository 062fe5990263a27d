/**
 * Ordered output to one socket, where a latest-wins frame waiting for the socket is replaced by a
 * newer one on its channel instead of queueing behind it (AWP-TRN-009, AWP-DAT-002).
 *
 * Control messages, reliable frames and lockstep frames keep their order in one FIFO and are written
 * before any waiting latest-wins frame, so a stalled channel delays them by at most one frame.
 * Backpressure is read from the engine (`bufferedAmount`), never guessed.
 */

export interface Sink {
  send(data: string | Uint8Array, binary: boolean): void;
  readonly bufferedAmount: number;
}

/** What a caller attaches to a frame to observe its fate (latency, replacement). */
export interface FrameNote {
  /** Local ms when the edge received the frame. */
  readonly received_at: number;
  readonly channel: string;
}

/** Told when a noted frame reaches the engine or is replaced while waiting. */
export interface OutboxObserver {
  /** `count` messages of `bytes` bytes each (default 1: one write; more: one publish to `count` subscribers). */
  written(note: FrameNote, bytes: number, count?: number): void;
  replaced(note: FrameNote, bytes: number): void;
}

interface Item {
  readonly data: string | Uint8Array;
  readonly binary: boolean;
  readonly bytes: number;
  /** What the item counts against maxQueuedBytes (0: memory the caller holds anyway). */
  readonly counted: number;
  readonly note: FrameNote | undefined;
}

export type PushOutcome = 'sent' | 'queued' | 'replaced' | 'overflow';

export class Outbox {
  private fifo: Item[] = [];
  private head = 0;
  private fifoBytes = 0;
  private readonly slots = new Map<number, Item>();
  /**
   * The FIFO passed maxQueuedBytes: the caller is closing the connection, whose peer stopped reading.
   * Nothing more is queued or written (a closing `ws` socket can take many seconds to go, while its
   * peer's messages keep arriving), and what was queued is let go.
   */
  private over = false;

  constructor(
    private readonly sink: Sink,
    /** Write while the engine holds fewer bytes than this. */
    private readonly highWaterBytes: number,
    /** A FIFO above this many bytes means the peer stopped reading: the caller closes the connection. */
    private readonly maxQueuedBytes: number,
    private readonly observer?: OutboxObserver,
  ) {}

  /** Whether the FIFO overflowed (then every push reports it again, and nothing is written). */
  get overflowed(): boolean {
    return this.over;
  }

  /** Queued bytes not yet handed to the engine. */
  get queuedBytes(): number {
    let slotBytes = 0;
    for (const item of this.slots.values()) slotBytes += item.bytes;
    return this.fifoBytes + slotBytes;
  }

  /** Whether a latest-wins frame of the channel is waiting in its slot. */
  holds(latestWinsChannel: number): boolean {
    return this.slots.has(latestWinsChannel);
  }

  get idle(): boolean {
    return this.head === this.fifo.length && this.slots.size === 0;
  }

  /**
   * Queues one message; `latestWinsChannel` marks a frame that a newer one on its channel may replace.
   * `held`: the caller holds the message anyway (a journal's replay), so queueing it costs no memory and
   * it does not count against maxQueuedBytes: a replay longer than that could otherwise never be written.
   */
  push(
    data: string | Uint8Array,
    binary: boolean,
    latestWinsChannel?: number,
    note?: FrameNote,
    held = false,
  ): PushOutcome {
    if (this.over) return 'overflow';
    const bytes = typeof data === 'string' ? data.length : data.byteLength;
    if (this.idle && this.sink.bufferedAmount < this.highWaterBytes) {
      this.sink.send(data, binary);
      if (note !== undefined) this.observer?.written(note, bytes);
      return 'sent';
    }
    const item = { data, binary, bytes, counted: held ? 0 : bytes, note };
    let outcome: PushOutcome = 'queued';
    if (latestWinsChannel !== undefined) {
      const old = this.slots.get(latestWinsChannel);
      if (old !== undefined) {
        outcome = 'replaced';
        if (old.note !== undefined) this.observer?.replaced(old.note, old.bytes);
      }
      this.slots.delete(latestWinsChannel); // re-insert: slots drain in arrival order
      this.slots.set(latestWinsChannel, item);
    } else {
      this.fifo.push(item);
      this.fifoBytes += item.counted;
      if (this.fifoBytes > this.maxQueuedBytes) {
        this.over = true;
        this.fifo = [];
        this.head = 0;
        this.fifoBytes = 0;
        this.slots.clear();
        return 'overflow';
      }
    }
    this.drain();
    return outcome;
  }

  /** Writes what the engine can take now; call on the socket's drain event. */
  drain(): void {
    while (this.head < this.fifo.length && this.sink.bufferedAmount < this.highWaterBytes) {
      const item = this.fifo[this.head++]!;
      this.fifoBytes -= item.counted;
      this.write(item);
    }
    if (this.head === this.fifo.length) {
      this.fifo = [];
      this.head = 0;
    } else if (this.head > 1024) {
      this.fifo = this.fifo.slice(this.head);
      this.head = 0;
    }
    if (this.head !== this.fifo.length) return;
    for (const [channel, item] of this.slots) {
      if (this.sink.bufferedAmount >= this.highWaterBytes) return;
      this.slots.delete(channel);
      this.write(item);
    }
  }

  private write(item: Item): void {
    this.sink.send(item.data, item.binary);
    if (item.note !== undefined) this.observer?.written(item.note, item.bytes);
  }

  /** Hands everything to the engine regardless of backpressure (before a close). */
  flushAll(): void {
    for (let i = this.head; i < this.fifo.length; i++) this.write(this.fifo[i]!);
    for (const item of this.slots.values()) this.write(item);
    this.fifo = [];
    this.head = 0;
    this.fifoBytes = 0;
    this.slots.clear();
  }
}
