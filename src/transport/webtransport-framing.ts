/**
 * Frames on a WebTransport stream are written back to back: each is self-delimiting by its header
 * (28 bytes, `payload_len`, and `ext_len` when flags bit 2 is set), so a reader recovers them from the
 * byte stream without any added framing. Sans-IO: bytes in, whole frames out.
 */
import {
  FLAG_HAS_EXTENSIONS,
  FRAME_HEADER_BYTES,
  FRAME_VERSION,
  FrameError,
  peekFrame,
} from '../protocol/frame.js';

/** A frame longer than the endpoint's `max_frame_bytes` (AWP-TRN-011). */
export class FrameTooLarge extends Error {
  constructor(
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(`frame of ${bytes} bytes exceeds max_frame_bytes ${limit} (AWP-TRN-011)`);
  }
}

/**
 * Unfinished frames across a session's streams hold more than its bound: ended like a frame too large
 * (1009), since that is what they add up to.
 */
export class PartialFramesTooLarge extends FrameTooLarge {
  constructor(bytes: number, limit: number) {
    super(bytes, limit);
    this.message = `unfinished frames of ${bytes} bytes across the session's streams exceed ${limit}`;
  }
}

/** What one incoming stream's reader holds between chunks. */
export interface StreamFrames {
  /** Adds bytes; returns the whole frames they complete (FrameSkipper: none, it drops them). */
  push(chunk: Uint8Array): Buffer[];
  /** Bytes held for a frame not yet complete. */
  readonly pending: number;
  /** The stream ended: throws FrameError if it ended inside a frame. */
  end(): void;
}

/** A stream's bytes not yet consumed, and what its head says of the next frame. */
abstract class StreamBytes {
  private chunks: Uint8Array[] = [];
  private buffered = 0;

  constructor(private readonly maxFrameBytes: number) {}

  /** Bytes held. */
  get pending(): number {
    return this.buffered;
  }

  protected add(chunk: Uint8Array): void {
    if (chunk.byteLength === 0) return;
    this.chunks.push(chunk);
    this.buffered += chunk.byteLength;
  }

  /**
   * The frame at the head, once its header (and `ext_len`) is in: `block` is its bytes before the
   * payload. Checks what can be checked that early; throws FrameError or FrameTooLarge.
   */
  protected head(): { block: number; payload: number } | undefined {
    if (this.buffered < 6) return this.buffered === 0 ? undefined : this.checkPrefix(this.buffered);
    this.checkPrefix(6);
    const hasExt = (this.byteAt(5) & FLAG_HAS_EXTENSIONS) !== 0;
    const headerBytes = FRAME_HEADER_BYTES + (hasExt ? 2 : 0);
    if (this.buffered < headerBytes) return undefined;
    const payload =
      (this.byteAt(24) | (this.byteAt(25) << 8) | (this.byteAt(26) << 16) | (this.byteAt(27) << 24)) >>> 0;
    const block = headerBytes + (hasExt ? this.byteAt(28) | (this.byteAt(29) << 8) : 0);
    if (block + payload > this.maxFrameBytes) throw new FrameTooLarge(block + payload, this.maxFrameBytes);
    return { block, payload };
  }

  /** Magic and version as soon as their bytes arrive, so garbage is refused before it is buffered. */
  private checkPrefix(upTo: number): undefined {
    const magic = [0x41, 0x57, 0x50, 0x46];
    for (let i = 0; i < Math.min(upTo, 4); i++) {
      if (this.byteAt(i) !== magic[i])
        throw new FrameError('AWP_MALFORMED', 'bad magic (expected "AWPF") (AWP-DAT-010)');
    }
    if (upTo > 4 && this.byteAt(4) !== FRAME_VERSION) {
      throw new FrameError('AWP_MALFORMED', `version ${this.byteAt(4)} is not 1 (AWP-DAT-010)`);
    }
    return undefined;
  }

  private byteAt(i: number): number {
    for (const c of this.chunks) {
      if (i < c.byteLength) return c[i]!;
      i -= c.byteLength;
    }
    throw new RangeError('byteAt past the buffered bytes');
  }

  /** Removes the first `n` bytes; zero-copy when one chunk holds them. */
  protected take(n: number): Buffer {
    const first = this.chunks[0]!;
    let out: Buffer;
    if (first.byteLength >= n) {
      out = Buffer.from(first.buffer, first.byteOffset, n);
      if (first.byteLength === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
    } else {
      out = Buffer.allocUnsafe(n);
      // One splice for the chunks used up: a frame can arrive in many thousands of small chunks, and a
      // shift per chunk would move the rest of the list each time.
      let filled = 0;
      let used = 0;
      while (filled < n) {
        const c = this.chunks[used]!;
        const k = Math.min(c.byteLength, n - filled);
        out.set(c.subarray(0, k), filled);
        filled += k;
        if (k === c.byteLength) used++;
        else this.chunks[used] = c.subarray(k);
      }
      this.chunks.splice(0, used);
    }
    this.buffered -= n;
    return out;
  }

  /** Drops up to `n` bytes from the head; returns how many were dropped. */
  protected drop(n: number): number {
    const k = Math.min(n, this.buffered);
    if (k > 0) this.take(k);
    return k;
  }
}

/** Splits one stream's bytes into frames. Only the length is derived here; callers validate with `peekFrame`. */
export class FrameSplitter extends StreamBytes implements StreamFrames {
  /**
   * Adds bytes; returns the frames they complete. Throws FrameError (AWP_MALFORMED) on a header that
   * cannot start a frame, FrameTooLarge on a frame above the limit: either ends the stream connection.
   */
  push(chunk: Uint8Array): Buffer[] {
    this.add(chunk);
    const out: Buffer[] = [];
    for (;;) {
      const f = this.head();
      if (f === undefined || this.pending < f.block + f.payload) return out;
      out.push(this.take(f.block + f.payload));
    }
  }

  /** The stream ended: bytes of an unfinished frame are a truncated, malformed frame. */
  end(): void {
    if (this.pending > 0) {
      throw new FrameError(
        'AWP_MALFORMED',
        `stream ended inside a frame (${this.pending} bytes) (AWP-DAT-010)`,
      );
    }
  }
}

/**
 * Checks the frames on a stream whose frames have no use (an observer's: AWP-TRN-013) and drops them:
 * each frame's header and extension block is validated like `peekFrame` would, its payload discarded
 * as it arrives, so at most a header and extension block is ever held.
 */
export class FrameSkipper extends StreamBytes implements StreamFrames {
  /** Payload bytes of the current frame still to come (and be dropped). */
  private skipping = 0;

  /** Throws like FrameSplitter.push; returns no frames. */
  push(chunk: Uint8Array): Buffer[] {
    const n = Math.min(this.skipping, chunk.byteLength);
    this.skipping -= n;
    this.add(chunk.subarray(n));
    while (this.skipping === 0) {
      const f = this.head();
      if (f === undefined || this.pending < f.block) break;
      // The header and extension block as a frame with no payload: peekFrame checks all but the payload.
      const block = Buffer.from(this.take(f.block));
      block.writeUInt32LE(0, 24);
      peekFrame(block);
      this.skipping = f.payload - this.drop(f.payload);
    }
    return [];
  }

  end(): void {
    if (this.pending > 0 || this.skipping > 0) {
      throw new FrameError('AWP_MALFORMED', 'stream ended inside a frame (AWP-DAT-010)');
    }
  }
}

/**
 * The frames a peer writes on every stream it opens in one session. What is held for unfinished
 * frames counts against one bound for the whole session: a peer may open some 200 streams, each could
 * hold a frame up to `max_frame_bytes` short of its end, and the edge reads eagerly, so flow control
 * would never stop it. Once a push or an end threw, the session is ending: nothing more is held.
 */
export class IncomingFrames {
  private readonly streams = new Map<object, StreamFrames>();
  private held = 0;
  private failed = false;

  constructor(
    private readonly open: () => StreamFrames,
    private readonly maxHeldBytes: number,
  ) {}

  /** Bytes held for unfinished frames, across the streams. */
  get pending(): number {
    return this.held;
  }

  /** Adds a stream's bytes; returns the frames they complete. Throws like FrameSplitter.push, and PartialFramesTooLarge. */
  push(stream: object, chunk: Uint8Array): Buffer[] {
    if (this.failed) return [];
    let s = this.streams.get(stream);
    if (s === undefined) this.streams.set(stream, (s = this.open()));
    const before = s.pending;
    try {
      const frames = s.push(chunk);
      this.held += s.pending - before;
      if (this.held > this.maxHeldBytes) throw new PartialFramesTooLarge(this.held, this.maxHeldBytes);
      return frames;
    } catch (err) {
      this.fail();
      throw err;
    }
  }

  /** A stream stopped: a reset one's partial frame goes with it; one that finished inside a frame throws FrameError. */
  end(stream: object, finished: boolean): void {
    const s = this.streams.get(stream);
    if (s === undefined) return;
    this.streams.delete(stream);
    this.held -= s.pending;
    if (!finished) return;
    try {
      s.end();
    } catch (err) {
      this.fail();
      throw err;
    }
  }

  private fail(): void {
    this.failed = true;
    this.streams.clear();
    this.held = 0;
  }
}
