/**
 * Frames to a peer over one WebTransport session: one outgoing unidirectional stream per channel, so
 * each channel has its own flow control and a stalled channel holds back nobody else (binding
 * `webtransport` has independent flow control per channel, spec 1.3; AWP-ROB-006). Frames are written
 * back to back on their channel's stream; each is self-delimiting by its header.
 *
 * Per channel, what the stream cannot take yet waits here: a latest-wins channel keeps at most one
 * waiting frame, replaced by newer ones; a reliable channel queues in order up to `maxQueuedBytes`,
 * beyond which the push reports 'overflow' and the caller ends the stream connection.
 */
import type { WritableStreamDefaultWriter } from 'node:stream/web';
import { FLAG_KEYFRAME, FLAG_RESYNC } from '../protocol/frame.js';
import { withFlags } from '../protocol/frame-encode.js';
import type { WebTransportSession } from './webtransport.js';
import type { FrameNote, OutboxObserver, PushOutcome } from './outbox.js';

interface Pending {
  readonly buf: Uint8Array;
  readonly note: FrameNote | undefined;
}

/** One channel's stream and what waits for it. */
class ChannelStream {
  private writer: WritableStreamDefaultWriter<Uint8Array> | null = null;
  /** Bytes handed to the stream that the transport has not taken yet (its flow-control window is shut). */
  private inFlight = 0;
  private fifo: Pending[] = [];
  private fifoBytes = 0;
  private slot: Pending | null = null;

  constructor(
    private readonly highWaterBytes: number,
    private readonly maxQueuedBytes: number,
    private readonly observer: OutboxObserver | undefined,
    private readonly failed: (err: unknown) => void,
  ) {}

  get queuedBytes(): number {
    return this.fifoBytes + (this.slot?.buf.byteLength ?? 0);
  }

  opened(writer: WritableStreamDefaultWriter<Uint8Array>): void {
    this.writer = writer;
    this.drain();
  }

  push(buf: Uint8Array, latestWins: boolean, note: FrameNote | undefined): PushOutcome {
    if (
      this.writer !== null &&
      this.fifo.length === 0 &&
      this.slot === null &&
      this.inFlight < this.highWaterBytes
    ) {
      this.write({ buf, note });
      return 'sent';
    }
    let outcome: PushOutcome = 'queued';
    if (latestWins) {
      let item: Pending = { buf, note };
      const old = this.slot;
      if (old !== null) {
        outcome = 'replaced';
        if ((old.buf[5]! & FLAG_RESYNC) !== 0) {
          // The waiting frame starts the stream (AWP-TRN-012): only a keyframe may take its place, and
          // it inherits the resync flag (a copy: the hub's buffers are shared).
          if ((buf[5]! & FLAG_KEYFRAME) === 0) {
            if (note !== undefined) this.observer?.replaced(note, buf.byteLength);
            return 'replaced';
          }
          if ((buf[5]! & FLAG_RESYNC) === 0)
            item = { buf: withFlags(buf, FLAG_RESYNC | FLAG_KEYFRAME), note };
        }
        if (old.note !== undefined) this.observer?.replaced(old.note, old.buf.byteLength);
      }
      this.slot = item;
    } else {
      this.fifo.push({ buf, note });
      this.fifoBytes += buf.byteLength;
      if (this.fifoBytes > this.maxQueuedBytes) return 'overflow';
    }
    this.drain();
    return outcome;
  }

  close(): void {
    const w = this.writer;
    this.writer = null;
    this.fifo = [];
    this.fifoBytes = 0;
    this.slot = null;
    if (w !== null) void w.close().catch(() => undefined);
  }

  private drain(): void {
    while (this.writer !== null && this.inFlight < this.highWaterBytes) {
      // Reliable frames in order first; a latest-wins frame waits behind them by at most one frame.
      let item = this.fifo.shift();
      if (item !== undefined) this.fifoBytes -= item.buf.byteLength;
      else if (this.slot !== null) {
        item = this.slot;
        this.slot = null;
      } else return;
      this.write(item);
    }
  }

  private write(item: Pending): void {
    const n = item.buf.byteLength;
    this.inFlight += n;
    if (item.note !== undefined) this.observer?.written(item.note, n);
    // The write settles once the transport took the bytes within the stream's flow-control window.
    this.writer!.write(item.buf).then(
      () => {
        this.inFlight -= n;
        this.drain();
      },
      (err: unknown) => this.failed(err),
    );
  }
}

/** The per-channel streams of one session (used by observer sinks and by relayed agent streams). */
export class ChannelStreams {
  private readonly channels = new Map<number, ChannelStream>();
  private closed = false;

  constructor(
    private readonly session: WebTransportSession,
    private readonly highWaterBytes: number,
    private readonly maxQueuedBytes: number,
    private readonly observer: OutboxObserver | undefined,
    /** A stream could not be opened or written (the session is going away, or the peer reset it). */
    private readonly failed: (err: unknown) => void,
  ) {}

  /** Writes one frame on its channel's stream, opening the stream on the channel's first frame. */
  push(channel_id: number, buf: Uint8Array, latestWins: boolean, note?: FrameNote): PushOutcome {
    let stream = this.channels.get(channel_id);
    if (stream === undefined) {
      stream = this.open(channel_id);
      if (stream === undefined) return 'queued';
    }
    return stream.push(buf, latestWins, note);
  }

  /** Bytes waiting in the edge for a channel (for tests and metrics). */
  queuedBytes(channel_id: number): number {
    return this.channels.get(channel_id)?.queuedBytes ?? 0;
  }

  /** Finishes every stream (what was handed to the transport still goes out). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const s of this.channels.values()) s.close();
    this.channels.clear();
  }

  private open(channel_id: number): ChannelStream | undefined {
    if (this.closed) return undefined;
    const fail = (err: unknown) => {
      if (!this.closed) this.failed(err);
    };
    const stream = new ChannelStream(this.highWaterBytes, this.maxQueuedBytes, this.observer, fail);
    this.channels.set(channel_id, stream);
    let created;
    try {
      created = this.session.createUnidirectionalStream(); // throws once the session is closed
    } catch (err) {
      fail(err);
      return stream;
    }
    created.then((w) => {
      if (this.closed || this.channels.get(channel_id) !== stream) {
        void w.close().catch(() => undefined);
        return;
      }
      stream.opened(w.getWriter());
    }, fail);
    return stream;
  }
}
