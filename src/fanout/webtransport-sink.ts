/**
 * Frames to a peer over one WebTransport session: one outgoing unidirectional stream per channel, so
 * each channel has its own flow control and a stalled channel holds back nobody else (binding
 * `webtransport` has independent flow control per channel, spec 1.3; AWP-ROB-006). Frames are written
 * back to back on their channel's stream; each is self-delimiting by its header.
 *
 * Per channel, an Outbox holds what the stream cannot take yet: a latest-wins channel keeps at most one
 * waiting frame, replaced by newer ones; a reliable channel queues in order up to `maxQueuedBytes`,
 * beyond which the push reports 'overflow' and the caller ends the stream connection.
 */
import type { WritableStreamDefaultWriter } from 'node:stream/web';
import type { WebTransportSession } from '../transport/webtransport.js';
import type { HubFrame } from './keyframe-cache.js';
import { Outbox, type FrameNote, type OutboxObserver, type PushOutcome, type Sink } from './outbox.js';
import type { StreamSink } from './subscriber.js';

/** One channel's stream as the Outbox sees it: bytes handed to the stream and not yet taken by the transport. */
class ChannelStream implements Sink {
  private writer: WritableStreamDefaultWriter<Uint8Array> | null = null;
  private inFlight = 0;
  readonly out: Outbox;

  constructor(
    highWaterBytes: number,
    maxQueuedBytes: number,
    observer: OutboxObserver | undefined,
    private readonly failed: (err: unknown) => void,
  ) {
    this.out = new Outbox(this, highWaterBytes, maxQueuedBytes, observer);
  }

  /** Until the stream is open everything waits (latest-wins frames replaced meanwhile). */
  get bufferedAmount(): number {
    return this.writer === null ? Number.POSITIVE_INFINITY : this.inFlight;
  }

  opened(writer: WritableStreamDefaultWriter<Uint8Array>): void {
    this.writer = writer;
    this.out.drain();
  }

  send(data: string | Uint8Array): void {
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    this.inFlight += bytes.byteLength;
    // The write settles once the transport took the bytes within the stream's flow-control window.
    this.writer!.write(bytes).then(
      () => {
        this.inFlight -= bytes.byteLength;
        this.out.drain();
      },
      (err: unknown) => this.failed(err),
    );
  }

  close(): void {
    const w = this.writer;
    this.writer = null;
    if (w !== null) void w.close().catch(() => undefined);
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
    return stream.out.push(buf, true, latestWins ? channel_id : undefined, note);
  }

  /** Bytes waiting in the edge for a channel (for tests and metrics). */
  queuedBytes(channel_id: number): number {
    return this.channels.get(channel_id)?.out.queuedBytes ?? 0;
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
    this.session.createUnidirectionalStream().then((w) => {
      if (this.closed || this.channels.get(channel_id) !== stream) {
        void w.close().catch(() => undefined);
        return;
      }
      stream.opened(w.getWriter());
    }, fail);
    return stream;
  }
}

/** An observer's `webtransport` stream connection, served by the hub (see StreamSink). */
export class WebTransportStreamSink implements StreamSink {
  private readonly streams: ChannelStreams;
  private ended = false;

  constructor(
    private readonly session: WebTransportSession,
    highWaterBytes: number,
    maxQueuedBytes: number,
    observer?: OutboxObserver,
  ) {
    this.streams = new ChannelStreams(session, highWaterBytes, maxQueuedBytes, observer, () =>
      this.close(1011, 'stream write failed'),
    );
  }

  push(frame: HubFrame, latestWins: boolean, note: FrameNote): 'sent' | 'queued' | 'replaced' | 'overflow' {
    if (this.ended) return 'queued';
    return this.streams.push(frame.channel_id, frame.buf, latestWins, note);
  }

  queuedBytes(channel_id: number): number {
    return this.streams.queuedBytes(channel_id);
  }

  close(code: number, reason: string): void {
    if (this.ended) return;
    this.ended = true;
    this.streams.close();
    this.session.close({ closeCode: code, reason });
  }
}
