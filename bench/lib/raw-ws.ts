/**
 * A minimal WebSocket client on a raw TCP socket, for load generators: thousands of connections per
 * process, frames parsed in place without building message buffers. A binary message is reported
 * with its first bytes (enough for an AWP frame header) and its length once its last byte is read,
 * stamped with the time of the read that completed it. Text messages are assembled (control traffic
 * is small). Pings are answered; client frames are masked as RFC 6455 requires.
 */
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';

/** Bytes of a binary message kept for the handler: an AWP header with its registered extensions fits. */
export const HEAD_BYTES = 64;

export interface RawWsHandlers {
  /** A complete binary message: `head` holds its first min(length, HEAD_BYTES) bytes (reused: copy to keep). */
  binary?(head: Buffer, headLen: number, length: number, recvNs: bigint): void;
  /** Every piece of a binary message's payload as it is read (before `binary` at the message's end). */
  binaryChunk?(buf: Buffer, offset: number, length: number): void;
  text?(text: string): void;
  close?(code: number): void;
}

export class HttpRefused extends Error {
  constructor(
    readonly status: number,
    text: string,
  ) {
    super(`HTTP ${status}: ${text}`);
  }
}

export class RawWs {
  /** Bytes read from the socket (headers and payloads). */
  bytesRead = 0;
  closed = false;
  private pending: Buffer | null = null;
  /** Payload bytes left in the current frame. */
  private remaining = 0;
  private frameOp = 0;
  private frameFin = true;
  /** The data message being assembled (op 1 or 2) across continuation frames. */
  private msgOp = 0;
  private msgLen = 0;
  private readonly head = Buffer.allocUnsafe(HEAD_BYTES);
  private headLen = 0;
  private textParts: Buffer[] = [];
  private control: Buffer[] = [];
  private readonly mask = randomBytes(4);
  private recvNs: bigint | null = null;

  private constructor(
    readonly socket: Socket,
    private readonly handlers: RawWsHandlers,
  ) {}

  /** Opens `url` (ws://host:port/path) with the subprotocol `awp` and extra headers. */
  static connect(
    url: string,
    headers: Readonly<Record<string, string>>,
    handlers: RawWsHandlers,
    timeoutMs = 10_000,
  ): Promise<RawWs> {
    const u = new URL(url);
    const key = randomBytes(16).toString('base64');
    const lines = [
      `GET ${u.pathname}${u.search} HTTP/1.1`,
      `Host: ${u.host}`,
      'Upgrade: websocket',
      'Connection: Upgrade',
      `Sec-WebSocket-Key: ${key}`,
      'Sec-WebSocket-Version: 13',
      'Sec-WebSocket-Protocol: awp',
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    ];
    return new Promise((resolve, reject) => {
      const socket = connect({ host: u.hostname, port: Number(u.port), noDelay: true });
      const ws = new RawWs(socket, handlers);
      let buffered: Buffer = Buffer.alloc(0);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`upgrade to ${url} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      const fail = (err: Error) => {
        clearTimeout(timer);
        socket.destroy();
        reject(err);
      };
      socket.once('error', fail);
      socket.once('connect', () => socket.write(`${lines.join('\r\n')}\r\n\r\n`));
      const onHandshake = (chunk: Buffer) => {
        buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        socket.off('data', onHandshake);
        socket.off('error', fail);
        clearTimeout(timer);
        const head = buffered.subarray(0, end).toString('latin1');
        const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
        if (status !== 101) {
          socket.destroy();
          reject(
            new HttpRefused(
              status,
              buffered
                .subarray(end + 4)
                .toString('utf8')
                .trim(),
            ),
          );
          return;
        }
        socket.on('error', () => socket.destroy());
        socket.on('close', () => ws.gone(1006));
        socket.on('data', (c: Buffer) => ws.read(c));
        resolve(ws);
        const rest = buffered.subarray(end + 4);
        if (rest.length > 0) ws.read(rest);
      };
      socket.on('data', onHandshake);
    });
  }

  sendText(text: string): void {
    this.sendFrame(0x1, Buffer.from(text, 'utf8'));
  }

  sendBinary(payload: Buffer): void {
    this.sendFrame(0x2, payload);
  }

  /** Stops reading at the TCP level (the peer's send buffers fill), or reads again. */
  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  close(code = 1000): void {
    if (this.closed) return;
    const body = Buffer.allocUnsafe(2);
    body.writeUInt16BE(code, 0);
    this.sendFrame(0x8, body);
    this.socket.end();
  }

  destroy(): void {
    this.socket.destroy();
  }

  private gone(code: number): void {
    if (this.closed) return;
    this.closed = true;
    this.handlers.close?.(code);
  }

  private sendFrame(op: number, payload: Buffer): void {
    if (this.closed || this.socket.destroyed) return;
    const n = payload.length;
    const ext = n < 126 ? 0 : n < 65536 ? 2 : 8;
    const frame = Buffer.allocUnsafe(2 + ext + 4 + n);
    frame[0] = 0x80 | op;
    if (ext === 0) frame[1] = 0x80 | n;
    else if (ext === 2) {
      frame[1] = 0x80 | 126;
      frame.writeUInt16BE(n, 2);
    } else {
      frame[1] = 0x80 | 127;
      frame.writeUInt32BE(Math.floor(n / 2 ** 32), 2);
      frame.writeUInt32BE(n >>> 0, 6);
    }
    const m = 2 + ext;
    this.mask.copy(frame, m);
    for (let i = 0; i < n; i++) frame[m + 4 + i] = payload[i]! ^ this.mask[i & 3]!;
    this.socket.write(frame);
  }

  private read(chunk: Buffer): void {
    this.bytesRead += chunk.length;
    this.recvNs = null;
    let buf = chunk;
    if (this.pending !== null) {
      buf = Buffer.concat([this.pending, chunk]);
      this.pending = null;
    }
    let off = 0;
    const len = buf.length;
    while (off < len) {
      if (this.remaining > 0) {
        const take = Math.min(this.remaining, len - off);
        this.collect(buf, off, take);
        off += take;
        this.remaining -= take;
        if (this.remaining === 0) this.frameDone();
        continue;
      }
      if (len - off < 2) {
        this.pending = Buffer.from(buf.subarray(off));
        return;
      }
      const b0 = buf[off]!;
      const b1 = buf[off + 1]!;
      let size = b1 & 0x7f;
      let hlen = 2;
      if (size === 126) hlen = 4;
      else if (size === 127) hlen = 10;
      if ((b1 & 0x80) !== 0) hlen += 4; // servers never mask; skip a key if one came anyway
      if (len - off < hlen) {
        this.pending = Buffer.from(buf.subarray(off));
        return;
      }
      if (size === 126) size = buf.readUInt16BE(off + 2);
      else if (size === 127) size = buf.readUInt32BE(off + 2) * 2 ** 32 + buf.readUInt32BE(off + 6);
      off += hlen;
      this.frameFin = (b0 & 0x80) !== 0;
      this.frameOp = b0 & 0x0f;
      if (this.frameOp === 0x1 || this.frameOp === 0x2) {
        this.msgOp = this.frameOp;
        this.msgLen = 0;
        this.headLen = 0;
        this.textParts = [];
      } else if (this.frameOp >= 0x8) {
        this.control = [];
      }
      this.remaining = size;
      if (size === 0) this.frameDone();
    }
  }

  private collect(buf: Buffer, off: number, n: number): void {
    if (this.frameOp >= 0x8) {
      this.control.push(Buffer.from(buf.subarray(off, off + n)));
      return;
    }
    this.msgLen += n;
    if (this.msgOp === 0x2) {
      this.handlers.binaryChunk?.(buf, off, n);
      if (this.headLen < HEAD_BYTES) {
        const k = Math.min(n, HEAD_BYTES - this.headLen);
        buf.copy(this.head, this.headLen, off, off + k);
        this.headLen += k;
      }
    } else {
      this.textParts.push(Buffer.from(buf.subarray(off, off + n)));
    }
  }

  private frameDone(): void {
    const op = this.frameOp;
    if (op >= 0x8) {
      const body = Buffer.concat(this.control);
      if (op === 0x9) this.sendFrame(0xa, body);
      else if (op === 0x8) {
        const code = body.length >= 2 ? body.readUInt16BE(0) : 1005;
        this.sendFrame(0x8, body.subarray(0, 2));
        this.socket.end();
        this.gone(code);
      }
      return;
    }
    if (!this.frameFin) return;
    if (this.msgOp === 0x2) {
      this.recvNs ??= process.hrtime.bigint();
      this.handlers.binary?.(this.head, this.headLen, this.msgLen, this.recvNs);
    } else if (this.msgOp === 0x1) {
      this.handlers.text?.(Buffer.concat(this.textParts).toString('utf8'));
    }
  }
}

/** Header facts of an AWP frame from its first bytes (bench-side; the product's peekFrame needs the whole frame). */
export interface FrameFacts {
  channel_id: number;
  seq: number;
  flags: number;
  /** -1 when the frame carries no ts_send_ns. */
  ts_send_ns: number;
}

export function frameFacts(head: Buffer, headLen: number, out: FrameFacts): FrameFacts {
  out.channel_id = head.readUInt16LE(6);
  out.flags = head[5]!;
  out.seq = head.readUInt32LE(8) + head.readUInt32LE(12) * 2 ** 32;
  out.ts_send_ns = -1;
  if ((out.flags & 0x04) !== 0 && headLen >= 30) {
    const end = Math.min(30 + head.readUInt16LE(28), headLen);
    for (let p = 30; p + 2 <= end;) {
      const type = head[p]!;
      const n = head[p + 1]!;
      if (type === 0x03 && n === 8 && p + 10 <= end) {
        out.ts_send_ns = head.readUInt32LE(p + 2) + head.readUInt32LE(p + 6) * 2 ** 32;
        break;
      }
      p += 2 + n;
    }
  }
  return out;
}
