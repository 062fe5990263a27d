/**
 * A minimal WebTransport-over-HTTP/2 client (draft-ietf-webtrans-http2 capsules on an extended
 * CONNECT stream) that grants flow-control credit per stream explicitly. It exists because a
 * receiver that stops reading one stream must really withhold that stream's credit for the sender to
 * feel it; the library's client keeps granting credit whether or not the application reads. It can
 * also send an `Authorization` header, which the library's client cannot.
 */
import http2 from 'node:http2';

const WT_STREAM = 0x190b4d3b;
const WT_STREAM_FIN = 0x190b4d3c;
const WT_MAX_DATA = 0x190b4d3d;
const WT_MAX_STREAM_DATA = 0x190b4d3e;
const WT_CLOSE_SESSION = 0x2843;

export interface RawStream {
  readonly id: bigint;
  /** Every byte received, in order. */
  readonly chunks: Buffer[];
  received: number;
  fin: boolean;
}

export interface RawOptions {
  readonly authorization?: string;
  readonly protocols?: readonly string[];
  /** Called for each server stream's first bytes (its credit can be granted from here). */
  readonly onStream?: (s: RawStream, client: RawWtClient) => void;
  readonly onData?: (s: RawStream, client: RawWtClient) => void;
}

export class RawWtClient {
  readonly streams = new Map<bigint, RawStream>();
  status = 0;
  closeInfo: { code: number; reason: string } | null = null;
  private buf = Buffer.alloc(0);
  private ends = false;
  // Client-initiated unidirectional stream ids as the library numbers them (bit 0 set for the client's: 3, 7, ...).
  private nextUni = 3n;
  private readonly closeWaiters: (() => void)[] = [];

  private constructor(
    private readonly session: http2.ClientHttp2Session,
    private readonly req: http2.ClientHttp2Stream,
    private readonly options: RawOptions,
  ) {}

  static async connect(
    url: string,
    caPem: string,
    options: RawOptions = {},
    timeoutMs = 5000,
  ): Promise<RawWtClient> {
    const u = new URL(url);
    const session = http2.connect(`https://${u.host}`, { ca: caPem });
    session.on('error', () => undefined);
    // Extended CONNECT may be sent only once the server's SETTINGS allowed it (RFC 8441).
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('no SETTINGS from the server')), timeoutMs);
      session.once('remoteSettings', () => {
        clearTimeout(t);
        resolve();
      });
      session.once('error', (err: Error) => {
        clearTimeout(t);
        reject(err);
      });
    });
    const headers: http2.OutgoingHttpHeaders = {
      ':method': 'CONNECT',
      ':protocol': 'webtransport',
      ':scheme': 'https',
      ':path': `${u.pathname}${u.search}`,
      ':authority': u.host,
    };
    if (options.protocols !== undefined)
      headers['wt-available-protocols'] = options.protocols.map((p) => `"${p}"`).join(', ');
    if (options.authorization !== undefined) headers.authorization = options.authorization;
    const req = session.request(headers, { endStream: false });
    const client = new RawWtClient(session, req, options);
    req.on('data', (d: Buffer) => client.parse(d));
    req.on('error', () => undefined);
    // The server ends the session with END_STREAM after its close capsule (then maybe a reset).
    req.on('end', () => client.ended());
    req.on('close', () => client.ended());
    client.status = await new Promise<number>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('no response to the CONNECT')), timeoutMs);
      req.once('response', (h) => {
        clearTimeout(t);
        resolve(Number(h[':status']));
      });
    });
    return client;
  }

  /** Lets the server send on `stream` up to byte offset `offset`. */
  grant(stream: bigint, offset: number): void {
    this.capsule(WT_MAX_STREAM_DATA, Buffer.concat([varint(stream), varint(BigInt(offset))]));
  }

  /** Lets the server send up to `offset` bytes on the session as a whole. */
  grantSession(offset: number): void {
    this.capsule(WT_MAX_DATA, varint(BigInt(offset)));
  }

  /** Opens a unidirectional stream of the client's and writes `data` on it (within the server's initial window). */
  sendUni(data: Uint8Array, fin = false): bigint {
    const id = this.nextUni;
    this.nextUni += 4n;
    this.capsule(fin ? WT_STREAM_FIN : WT_STREAM, Buffer.concat([varint(id), data]));
    return id;
  }

  waitClosed(timeoutMs = 5000): Promise<{ code: number; reason: string } | null> {
    if (this.ends) return Promise.resolve(this.closeInfo);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('session still open')), timeoutMs);
      this.closeWaiters.push(() => {
        clearTimeout(t);
        resolve(this.closeInfo);
      });
    });
  }

  close(): void {
    if (!this.req.closed) this.req.close();
    this.session.close();
  }

  /** Destroys the connection outright. */
  destroy(): void {
    this.session.destroy();
  }

  private capsule(type: number, value: Buffer): void {
    if (this.req.closed || this.req.destroyed) return;
    this.req.write(Buffer.concat([varint(BigInt(type)), varint(BigInt(value.length)), value]));
  }

  private ended(): void {
    this.ends = true;
    if (!this.req.closed) this.req.close();
    this.session.close();
    for (const w of this.closeWaiters.splice(0)) w();
  }

  private parse(d: Buffer): void {
    this.buf = Buffer.concat([this.buf, d]);
    for (;;) {
      const t = readVarint(this.buf, 0);
      if (t === null) return;
      const l = readVarint(this.buf, t.next);
      if (l === null) return;
      const end = l.next + Number(l.value);
      if (this.buf.length < end) return;
      const value = this.buf.subarray(l.next, end);
      this.buf = this.buf.subarray(end);
      this.capsuleIn(Number(t.value), value);
    }
  }

  private capsuleIn(type: number, value: Buffer): void {
    if (type === WT_STREAM || type === WT_STREAM_FIN) {
      const id = readVarint(value, 0)!;
      let s = this.streams.get(id.value);
      const fresh = s === undefined;
      if (s === undefined) {
        s = { id: id.value, chunks: [], received: 0, fin: false };
        this.streams.set(id.value, s);
      }
      const data = Buffer.from(value.subarray(id.next));
      s.chunks.push(data);
      s.received += data.length;
      if (type === WT_STREAM_FIN) s.fin = true;
      if (fresh) this.options.onStream?.(s, this);
      this.options.onData?.(s, this);
    } else if (type === WT_CLOSE_SESSION) {
      const code = value.length >= 4 ? value.readUInt32BE(0) : 0;
      this.closeInfo = { code, reason: value.subarray(4).toString('utf8') };
    }
  }
}

function varint(v: bigint): Buffer {
  if (v < 64n) return Buffer.from([Number(v)]);
  if (v < 16384n) {
    const b = Buffer.alloc(2);
    b.writeUInt16BE(Number(v) | 0x4000);
    return b;
  }
  if (v < 1073741824n) {
    const b = Buffer.alloc(4);
    b.writeUInt32BE((Number(v) | 0x80000000) >>> 0);
    return b;
  }
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(v | 0xc000000000000000n);
  return b;
}

function readVarint(b: Buffer, at: number): { value: bigint; next: number } | null {
  if (at >= b.length) return null;
  const len = 1 << (b[at]! >> 6);
  if (at + len > b.length) return null;
  let v = BigInt(b[at]! & 0x3f);
  for (let i = 1; i < len; i++) v = (v << 8n) | BigInt(b[at + i]!);
  return { value: v, next: at + len };
}
