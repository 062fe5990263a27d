/**
 * Per-channel streams and their backpressure, against an in-memory session whose streams are real
 * WHATWG writable streams that take a frame only when the test opens their flow-control window.
 */
import { ReadableStream, WritableStream } from 'node:stream/web';
import { describe, expect, it } from 'vitest';
import { ChannelStreams } from '../../src/transport/webtransport-streams.js';
import { FLAG_KEYFRAME, FLAG_RESYNC, peekFrame } from '../../src/protocol/frame.js';
import { encodeFrame } from '../../src/protocol/frame-encode.js';
import type { WebTransportSession } from '../../src/transport/webtransport.js';

/** One outgoing stream: what reached it, and whether its window is open. */
class MemoryStream {
  readonly chunks: Buffer[] = [];
  private waiting: (() => void)[] = [];
  constructor(public open: boolean) {}

  release(): void {
    this.open = true;
    for (const w of this.waiting.splice(0)) w();
  }

  writable(): WritableStream<Uint8Array> {
    return new WritableStream<Uint8Array>({
      write: (chunk) => {
        this.chunks.push(Buffer.from(chunk));
        if (this.open) return;
        return new Promise<void>((resolve) => this.waiting.push(resolve));
      },
    });
  }

  seqs(): number[] {
    return this.chunks.map((c) => peekFrame(c).seq);
  }
}

class MemorySession implements WebTransportSession {
  readonly streams: MemoryStream[] = [];
  closeInfo: { closeCode?: number; reason?: string } | null = null;
  readonly closed = new Promise<{ closeCode?: number; reason?: string }>(() => undefined);
  readonly incomingUnidirectionalStreams = new ReadableStream<ReadableStream<Uint8Array>>();
  readonly incomingBidirectionalStreams = new ReadableStream<{
    readable: ReadableStream<Uint8Array>;
    writable: WritableStream<Uint8Array>;
  }>();
  readonly datagrams = { readable: new ReadableStream<Uint8Array>() };
  /** Whether the next stream opened starts with its window shut. */
  stallNext = false;

  close(info?: { closeCode?: number; reason?: string }): void {
    this.closeInfo = info ?? {};
  }

  createUnidirectionalStream(): Promise<WritableStream<Uint8Array>> {
    const s = new MemoryStream(!this.stallNext);
    this.streams.push(s);
    return Promise.resolve(s.writable());
  }
}

const tick = () => new Promise<void>((r) => setImmediate(r));

function frame(channel_id: number, seq: number, flags = FLAG_KEYFRAME, bytes = 16): Buffer {
  return encodeFrame({
    channel_id,
    seq,
    ts_mono_ns: seq,
    flags,
    vendor: [],
    payload: Buffer.alloc(bytes, seq),
  });
}

describe('per-channel streams', () => {
  it('AWP-ROB-006 a channel whose stream is stalled holds at most one waiting latest-wins frame and delays no other channel', async () => {
    const session = new MemorySession();
    const streams = new ChannelStreams(session, 1, 1 << 20, undefined, () => undefined);
    session.stallNext = true;
    streams.push(1, frame(1, 1), true); // channel 1's stream: window shut
    await tick();
    session.stallNext = false;
    streams.push(2, frame(2, 1), true); // channel 2's stream: open
    await tick();
    for (let seq = 2; seq <= 10; seq++) {
      streams.push(1, frame(1, seq), true);
      streams.push(2, frame(2, seq), true);
      await tick();
    }
    const [one, two] = session.streams;
    expect(two!.seqs()).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(one!.seqs()).toEqual([1]); // taken by the stream, not yet by the transport
    expect(streams.queuedBytes(1)).toBe(frame(1, 10).length); // one frame waits: the newest
    one!.release();
    await tick();
    expect(one!.seqs()).toEqual([1, 10]);
    expect(streams.queuedBytes(1)).toBe(0);
  });

  it('AWP-TRN-012 AWP-DAT-009 the frame that starts a stream keeps its resync flag when a newer keyframe replaces it', async () => {
    const session = new MemorySession();
    const streams = new ChannelStreams(session, 1, 1 << 20, undefined, () => undefined);
    // Both pushed before the stream exists: the second replaces the first.
    const start = frame(3, 7, FLAG_KEYFRAME | FLAG_RESYNC);
    const newer = frame(3, 8, FLAG_KEYFRAME);
    expect(streams.push(3, start, true)).toBe('queued');
    expect(streams.push(3, newer, true)).toBe('replaced');
    // A delta never takes the place of the waiting resync keyframe.
    expect(streams.push(3, frame(3, 9, 0), true)).toBe('replaced');
    await tick();
    const got = session.streams[0]!.chunks;
    expect(got.map((c) => peekFrame(c).seq)).toEqual([8]);
    expect(got[0]![5]! & (FLAG_KEYFRAME | FLAG_RESYNC)).toBe(FLAG_KEYFRAME | FLAG_RESYNC);
    expect(newer[5]).toBe(FLAG_KEYFRAME); // the shared buffer is untouched: the flag went on a copy
  });

  it('reliable frames queue in order and overflow past the bound', async () => {
    const session = new MemorySession();
    session.stallNext = true;
    const streams = new ChannelStreams(session, 1, 1000, undefined, () => undefined);
    const outcomes: string[] = [];
    for (let seq = 1; seq <= 12; seq++) {
      outcomes.push(streams.push(4, frame(4, seq, FLAG_KEYFRAME, 72), false)); // 100 bytes each
      await tick();
    }
    // The first is taken by the stream; ten wait (1000 bytes); the twelfth is one too many.
    expect(outcomes.slice(0, 11).every((o) => o === 'queued' || o === 'sent')).toBe(true);
    expect(outcomes[11]).toBe('overflow');
    session.streams[0]!.release();
    await tick();
    expect(session.streams[0]!.seqs().slice(0, 11)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
  });

  it('writes frames back to back on one stream per channel, and finishes the streams on close', async () => {
    const session = new MemorySession();
    const streams = new ChannelStreams(session, 1 << 20, 1 << 20, undefined, () => undefined);
    for (let seq = 1; seq <= 3; seq++) for (const ch of [5, 6]) streams.push(ch, frame(ch, seq), false);
    await tick();
    expect(session.streams.length).toBe(2);
    for (const s of session.streams) expect(s.seqs()).toEqual([1, 2, 3]);
    streams.close();
    expect(streams.push(5, frame(5, 4), false)).toBe('queued'); // nothing is opened after close
    await tick();
    expect(session.streams.length).toBe(2);
  });
});
