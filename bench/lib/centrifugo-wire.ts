/**
 * A Centrifugo subscriber for load generators: Centrifugo's client protocol in its protobuf format over
 * WebSocket (github.com/centrifugal/protocol, client.proto), on the generators' raw WebSocket client
 * (raw-ws.ts), so that a subscriber costs the generator what an AWP observer costs it. Only what the
 * benchmark needs: `connect` (anonymous), `subscribe`, and publications read from their first bytes
 * without copying the payload. A WebSocket message holds one or more replies, each prefixed by its length
 * (varint). Transport-level pings (`cf_ws_frame_ping_pong=true`) are answered by RawWs.
 *
 * Publications carry the publisher's send time (process.hrtime.bigint(), CLOCK_MONOTONIC shared by every
 * process of the machine) in their first 8 bytes, little-endian: delivery latency = receipt - stamp.
 */
import { RawWs } from './raw-ws.js';

/** Bytes of a reply kept for parsing: its id or push header, channel and publication stamp fit. */
const HEAD = 64;

function varint(n: number, out: number[]): void {
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
}

function field(num: number, body: readonly number[], out: number[]): void {
  varint((num << 3) | 2, out);
  varint(body.length, out);
  out.push(...body);
}

/** One Command (id, and `connect` = field 4 or `subscribe` = field 5), length-prefixed. */
function command(id: number, kind: 'connect' | 'subscribe', channel?: string): Buffer {
  const cmd: number[] = [];
  varint(1 << 3, cmd);
  varint(id, cmd);
  if (kind === 'connect') field(4, [], cmd);
  else {
    const req: number[] = [];
    field(1, [...Buffer.from(channel!, 'utf8')], req);
    field(5, req, cmd);
  }
  const out: number[] = [];
  varint(cmd.length, out);
  return Buffer.from([...out, ...cmd]);
}

interface Cursor {
  p: number;
}

function readVarint(b: Buffer, end: number, c: Cursor): number {
  let v = 0;
  let mul = 1;
  while (c.p < end) {
    const x = b[c.p++]!;
    v += (x & 0x7f) * mul;
    if ((x & 0x80) === 0) return v;
    mul *= 128;
  }
  return -1;
}

/** What a reply's first bytes say: an answer (id > 0, error or not) or a publication on a channel. */
interface ReplyFacts {
  id: number;
  error: boolean;
  channel: string;
  /** A push with a publication (not a join, leave or unsubscribe). */
  pub: boolean;
  /** The publisher's stamp (ns), -1 if absent. */
  stamp: number;
}

/** Walks the fields of a message in [p, end) (clamped to what was kept), calling `on` for length-delimited ones. */
function walk(
  b: Buffer,
  start: number,
  end: number,
  on: (num: number, at: number, len: number) => void,
): void {
  const c = { p: start };
  while (c.p < end) {
    const key = readVarint(b, end, c);
    if (key < 0) return;
    const wt = key & 7;
    const num = key >>> 3;
    if (wt === 0) {
      const v = readVarint(b, end, c);
      if (v < 0) return;
      on(num, -1, v);
    } else if (wt === 2) {
      const len = readVarint(b, end, c);
      if (len < 0) return;
      on(num, c.p, len);
      c.p += len;
    } else if (wt === 1) c.p += 8;
    else if (wt === 5) c.p += 4;
    else return;
  }
}

function parseReply(head: Buffer, headLen: number, out: ReplyFacts): ReplyFacts {
  out.id = 0;
  out.error = false;
  out.channel = '';
  out.pub = false;
  out.stamp = -1;
  walk(head, 0, headLen, (num, at, len) => {
    if (num === 1 && at < 0) out.id = len;
    else if (num === 2 && at >= 0) out.error = true;
    else if (num === 4 && at >= 0) {
      // Push: channel = 2, pub = 4; Publication: data = 4.
      walk(head, at, Math.min(at + len, headLen), (pn, pat, plen) => {
        if (pn === 2 && pat >= 0) out.channel = head.toString('latin1', pat, Math.min(pat + plen, headLen));
        else if (pn === 4 && pat >= 0) {
          out.pub = true;
          walk(head, pat, Math.min(pat + plen, headLen), (dn, dat) => {
            if (dn === 4 && dat >= 0 && dat + 8 <= headLen)
              out.stamp = head.readUInt32LE(dat) + head.readUInt32LE(dat + 4) * 2 ** 32;
          });
        }
      });
    }
  });
  return out;
}

export interface PublicationHandler {
  /** A publication: its channel, the publisher's stamp (ns, -1 if none), the reply's length, receipt time. */
  (channel: string, stamp: number, length: number, recvNs: bigint): void;
}

/** Splits a WebSocket message's payload, fed in pieces, into its length-prefixed replies. */
class ReplySplitter {
  private len = 0;
  private mul = 1;
  private remaining = 0;
  private total = 0;
  private readonly head = Buffer.allocUnsafe(HEAD);
  private headLen = 0;

  constructor(private readonly onReply: (head: Buffer, headLen: number, length: number) => void) {}

  feed(buf: Buffer, off: number, n: number): void {
    const end = off + n;
    let i = off;
    while (i < end) {
      if (this.remaining === 0) {
        const x = buf[i++]!;
        this.len += (x & 0x7f) * this.mul;
        if ((x & 0x80) !== 0) {
          this.mul *= 128;
          continue;
        }
        this.total = this.remaining = this.len;
        this.len = 0;
        this.mul = 1;
        this.headLen = 0;
        if (this.total === 0) this.onReply(this.head, 0, 0); // an empty reply: an application ping
        continue;
      }
      const take = Math.min(this.remaining, end - i);
      if (this.headLen < HEAD) {
        const k = Math.min(take, HEAD - this.headLen);
        buf.copy(this.head, this.headLen, i, i + k);
        this.headLen += k;
      }
      i += take;
      this.remaining -= take;
      if (this.remaining === 0) this.onReply(this.head, this.headLen, this.total);
    }
  }
}

export class CentrifugoSubscriber {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  /** Publications of the message being read, handed on with its receipt time at its end. */
  private readonly pending: { channel: string; stamp: number; length: number }[] = [];
  private readonly facts: ReplyFacts = { id: 0, error: false, channel: '', pub: false, stamp: -1 };

  private constructor(
    private ws: RawWs | null,
    private readonly onPublication: PublicationHandler,
  ) {}

  get stream(): RawWs {
    return this.ws!;
  }

  /** Opens the connection and sends `connect` (anonymous: the server runs with client.insecure). */
  static async connect(
    url: string,
    on: PublicationHandler,
    timeoutMs = 15_000,
  ): Promise<CentrifugoSubscriber> {
    const sub = new CentrifugoSubscriber(null, on);
    const splitter = new ReplySplitter((h, hl, len) => sub.reply(h, hl, len));
    sub.ws = await RawWs.connect(
      url,
      {},
      {
        binaryChunk: (b, o, n) => splitter.feed(b, o, n),
        binary: (_h, _hl, _len, recvNs) => sub.flush(recvNs),
        close: (code) => sub.closed(code),
      },
      timeoutMs,
    );
    await sub.call('connect', undefined, timeoutMs);
    return sub;
  }

  /** Subscribes to each channel (one command per channel, all in one WebSocket message). */
  async subscribe(channels: readonly string[], timeoutMs = 15_000): Promise<void> {
    const frames: Buffer[] = [];
    const answers = channels.map((ch) => {
      const id = this.nextId++;
      frames.push(command(id, 'subscribe', ch));
      return this.answer(id, `subscribe ${ch}`, timeoutMs);
    });
    this.ws!.sendBinary(Buffer.concat(frames));
    await Promise.all(answers);
  }

  destroy(): void {
    this.ws?.destroy();
  }

  private call(kind: 'connect', channel: string | undefined, timeoutMs: number): Promise<void> {
    const id = this.nextId++;
    const answered = this.answer(id, kind, timeoutMs);
    this.ws!.sendBinary(command(id, kind, channel));
    return answered;
  }

  private answer(id: number, what: string, timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`centrifugo: no answer to ${what} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiting.set(id, {
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
    });
  }

  private reply(head: Buffer, headLen: number, length: number): void {
    if (length === 0) return;
    const f = parseReply(head, headLen, this.facts);
    if (f.id > 0) {
      const w = this.waiting.get(f.id);
      this.waiting.delete(f.id);
      if (f.error) w?.reject(new Error(`centrifugo: command ${f.id} refused`));
      else w?.resolve();
      return;
    }
    if (f.pub) this.pending.push({ channel: f.channel, stamp: f.stamp, length });
  }

  private flush(recvNs: bigint): void {
    for (const p of this.pending) this.onPublication(p.channel, p.stamp, p.length, recvNs);
    this.pending.length = 0;
  }

  private closed(code: number): void {
    for (const w of this.waiting.values()) w.reject(new Error(`centrifugo: connection closed (${code})`));
    this.waiting.clear();
  }
}
