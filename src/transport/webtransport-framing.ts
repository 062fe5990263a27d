/**
 * Frames on a WebTransport stream are written back to back: each is self-delimiting by its header
 * (28 bytes, `payload_len`, and `ext_len` when flags bit 2 is set), so a reader recovers them from the
 * byte stream without any added framing. Sans-IO: bytes in, whole frames out.
 */
import { FLAG_HAS_EXTENSIONS, FRAME_HEADER_BYTES, FRAME_VERSION, FrameError } from '../protocol/frame.js';

/** A frame longer than the endpoint's `max_frame_bytes` (AWP-TRN-011). */
export class FrameTooLarge extends Error {
  constructor(
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(`frame of ${bytes} bytes exceeds max_frame_bytes ${limit} (AWP-TRN-011)`);
  }
}

/** Splits one stream's bytes into frames. Only the length is derived here; callers validate with `peekFrame`. */
export class FrameSplitter {
  private chunks: Uint8Array[] = [];
  private buffered = 0;

  constructor(private readonly maxFrameBytes: number) {}

  /** Bytes of a frame not yet complete. */
  get pending(): number {
    return this.buffered;
  }

  /**
   * Adds bytes; returns the frames they complete. Throws FrameError (AWP_MALFORMED) on a header that
   * cannot start a frame, FrameTooLarge on a frame above the limit: either ends the stream connection.
   */
  push(chunk: Uint8Array): Buffer[] {
    if (chunk.byteLength > 0) {
      this.chunks.push(chunk);
      this.buffered += chunk.byteLength;
    }
    const out: Buffer[] = [];
    for (;;) {
      const length = this.nextLength();
      if (length === undefined || this.buffered < length) return out;
      out.push(this.take(length));
    }
  }

  /** The stream ended: bytes of an unfinished frame are a truncated, malformed frame. */
  end(): void {
    if (this.buffered > 0) {
      throw new FrameError(
        'AWP_MALFORMED',
        `stream ended inside a frame (${this.buffered} bytes) (AWP-DAT-010)`,
      );
    }
  }

  /** Length of the frame at the head, once its header is in; checks what can be checked that early. */
  private nextLength(): number | undefined {
    if (this.buffered < 6) return this.buffered === 0 ? undefined : this.checkPrefix(this.buffered);
    this.checkPrefix(6);
    const hasExt = (this.byteAt(5) & FLAG_HAS_EXTENSIONS) !== 0;
    const headerBytes = FRAME_HEADER_BYTES + (hasExt ? 2 : 0);
    if (this.buffered < headerBytes) return undefined;
    const payloadLen =
      (this.byteAt(24) | (this.byteAt(25) << 8) | (this.byteAt(26) << 16) | (this.byteAt(27) << 24)) >>> 0;
    const extLen = hasExt ? this.byteAt(28) | (this.byteAt(29) << 8) : 0;
    const length = headerBytes + extLen + payloadLen;
    if (length > this.maxFrameBytes) throw new FrameTooLarge(length, this.maxFrameBytes);
    return length;
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
  private take(n: number): Buffer {
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
}
