/**
 * An AWP observer for fan-out tests: one control connection (JSON-RPC over WebSocket, subprotocol `awp`)
 * and, for stream kinds, a stream connection to the edge's endpoint. It records every frame it receives
 * per channel (seq, timestamps, flags, binding, receipt time) cheaply enough to run 200 of them in one
 * process, checks `seq` order as frames arrive, and can stall at the TCP level (stop reading) so the
 * edge's backpressure really builds.
 */
import type { Socket } from 'node:net';
import type { ReadableStream, ReadableStreamDefaultReader } from 'node:stream/web';
import { WebTransport } from '@fails-components/webtransport';
import WebSocket from 'ws';
import { FLAG_KEYFRAME, FLAG_RESYNC, peekFrame, createFrameHeader } from '../../src/protocol/frame.js';
import { FrameSplitter } from '../../src/transport/webtransport-framing.js';
import { JsonInbox, type Json } from '../support/json-inbox.js';

export type { Json };

/** How frames reach the observer: inline on the control connection, or a stream binding. */
export type ObserverKind = 'inline' | 'ws' | 'webtransport';

export interface ObserverOptions {
  readonly kind: ObserverKind;
  readonly credential: string;
  readonly subscribe: readonly { channel: string; rate_hz?: number }[];
  readonly modalities?: readonly string[];
  readonly maxObsRateHz?: number;
  /** process.hrtime.bigint() at the world's session-clock origin: receipt times are stamped on it (ns). */
  readonly clockOrigin?: bigint;
  /** Answer the edge's JSON-RPC pings (default true). */
  readonly answerPings?: boolean;
  readonly timeoutMs?: number;
  /** Stream kinds: do not open the stream connection in `open` (call `openStream` later). */
  readonly deferStream?: boolean;
  /** `webtransport`: SHA-256 of the edge's (self-signed) certificate, as a browser would pin it. */
  readonly certHash?: Uint8Array;
}

/** What this client uses of the WebTransport library's client session (its typings resolve to `any`). */
interface WtSession {
  readonly ready: Promise<void>;
  readonly closed: Promise<{ closeCode?: number; reason?: string }>;
  close(info?: { closeCode?: number; reason?: string }): void;
  readonly incomingUnidirectionalStreams: ReadableStream<ReadableStream<Uint8Array>>;
}

/** Columns of what arrived on one channel (parallel arrays: cheap for thousands of frames). */
export class ChannelLog {
  readonly seq: number[] = [];
  readonly ts: number[] = [];
  readonly tsSend: number[] = [];
  readonly recv: number[] = [];
  readonly flags: number[] = [];
  readonly bytes: number[] = [];
  /** true: the stream connection; false: inline on the control connection. */
  readonly streamed: boolean[] = [];
  /** Frames whose seq did not exceed the previous one (AWP-DAT-001 violations). */
  readonly orderViolations: { prev: number; got: number; streamed: boolean }[] = [];
  /**
   * Inline frames the edge sent before the stream connection took the channel over, read after the
   * stream's first frames: two connections, so the reader may see them in either order. Not violations.
   */
  crossedInFlight = 0;
  private lastInline = -1;
  private lastStreamed = -1;
  private firstStreamed = Infinity;

  /** Checks AWP-DAT-001 per connection, and that nothing went inline once the stream carried the channel. */
  check(seq: number, streamed: boolean): void {
    if (streamed) {
      const prev = Math.max(this.lastStreamed, this.lastInline);
      if (seq <= prev) this.orderViolations.push({ prev, got: seq, streamed });
      this.lastStreamed = seq;
      this.firstStreamed = Math.min(this.firstStreamed, seq);
      return;
    }
    if (seq <= this.lastInline) this.orderViolations.push({ prev: this.lastInline, got: seq, streamed });
    else if (seq <= this.lastStreamed) {
      if (seq < this.firstStreamed) this.crossedInFlight++;
      else this.orderViolations.push({ prev: this.lastStreamed, got: seq, streamed });
    }
    this.lastInline = seq;
  }

  get count(): number {
    return this.seq.length;
  }

  lastSeq(): number {
    return this.seq.at(-1) ?? -1;
  }
}

export const DEFAULT_MODALITIES = ['proprio/json', 'image/raw', 'text/event+json'];

const header = createFrameHeader();
const INLINE_PREFIX_SCAN = 64;

export class ObserverClient extends JsonInbox {
  readonly channels = new Map<number, ChannelLog>();
  /** Channel name -> id and id -> name, from the grant lists the observer was given. */
  readonly ids = new Map<string, number>();
  readonly names = new Map<number, string>();
  ready: Json | null = null;
  stream: WebSocket | null = null;
  /** The `webtransport` stream connection (one incoming stream per channel). */
  wt: WtSession | null = null;
  /** Frames received inline after a stream connection carried the session (AWP-TRN-012). */
  inlineAfterStream = 0;
  streamCloses: { code: number; reason: string; at: number }[] = [];
  closed: { code: number; reason: string } | null = null;
  stalled = false;
  private streamEverUp = false;
  private nextId = 1;
  private readonly closeWaiters: (() => void)[] = [];
  private readonly origin: bigint;
  /** Set to observe each frame as it arrives (after recording). */
  onFrame: ((channel_id: number, seq: number, flags: number, streamed: boolean) => void) | null = null;

  private constructor(
    readonly control: WebSocket,
    readonly options: ObserverOptions,
  ) {
    super();
    this.origin = options.clockOrigin ?? 0n;
  }

  /** Local time on the clock given by `clockOrigin`, ns. */
  now(): number {
    return Number(process.hrtime.bigint() - this.origin);
  }

  /** Connects, initializes and opens an observer session; stream kinds then open their stream connection. */
  static async open(url: string, options: ObserverOptions): Promise<ObserverClient> {
    const client = await ObserverClient.connect(url, options);
    await client.initialize();
    client.ready = await client.ok('session.open', { mode: 'streaming', subscribe: options.subscribe });
    client.learnGrants((client.ready.granted as Json).channels);
    if (options.kind !== 'inline' && options.deferStream !== true) await client.openStream();
    return client;
  }

  /** Resumes a session on a new connection; `ready` is the resume result (stream kinds reopen their stream). */
  static async resume(
    url: string,
    options: ObserverOptions,
    token: string,
    lastStatusSeq: number,
  ): Promise<ObserverClient> {
    const client = await ObserverClient.connect(url, options);
    await client.initialize();
    client.ready = await client.ok('session.resume', {
      session_token: token,
      last_status_seq: lastStatusSeq,
    });
    client.learnGrants((client.ready.granted as Json).channels);
    if (options.kind !== 'inline' && options.deferStream !== true) await client.openStream();
    return client;
  }

  initialize(): Promise<Json> {
    return this.ok('initialize', {
      protocol_versions: ['0.1'],
      agent: { name: 'fanout-observer', version: '0.1.0', vendor: 'awp-edge-test' },
      consumes_modalities: [...(this.options.modalities ?? DEFAULT_MODALITIES)],
      ...(this.options.maxObsRateHz !== undefined ? { max_obs_rate_hz: this.options.maxObsRateHz } : {}),
    });
  }

  /** Only the control connection (no initialize): for tests that drive the handshake themselves. */
  static connect(url: string, options: ObserverOptions): Promise<ObserverClient> {
    const timeoutMs = options.timeoutMs ?? 5000;
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, ['awp'], {
        headers: { authorization: `Bearer ${options.credential}` },
        handshakeTimeout: timeoutMs,
        perMessageDeflate: false,
      });
      const client = new ObserverClient(ws, options);
      ws.once('error', reject);
      ws.once('open', () => {
        ws.on('error', () => undefined);
        resolve(client);
      });
      ws.on('message', (data: Buffer, binary: boolean) => {
        if (binary) return; // the control connection carries text only
        client.controlText(data.toString('utf8'));
      });
      ws.on('close', (code: number, reason: Buffer) => {
        client.closed = { code, reason: reason.toString() };
        for (const w of client.closeWaiters.splice(0)) w();
      });
    });
  }

  /** The first stream endpoint of the observer's kind in `session.ready`. */
  endpoint(): string {
    const eps = (this.ready?.stream_endpoints ?? []) as { binding: string; url?: string }[];
    const ep = eps.find((e) => e.binding === this.options.kind);
    if (ep?.url === undefined) throw new Error(`no ${this.options.kind} endpoint in ${JSON.stringify(eps)}`);
    return ep.url;
  }

  /** Opens the stream connection (session token as bearer credential, AWP-TRN-013). */
  openStream(): Promise<void> {
    const token = this.ready?.session_token;
    if (typeof token !== 'string') return Promise.reject(new Error('no session token'));
    if (this.options.kind === 'webtransport') return this.openWebTransport(token);
    if (this.options.kind !== 'ws')
      return Promise.reject(new Error('an inline observer has no stream connection'));
    const url = this.endpoint();
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, ['awp'], {
        headers: { authorization: `Bearer ${token}` },
        handshakeTimeout: this.options.timeoutMs ?? 5000,
        perMessageDeflate: false,
      });
      ws.once('error', reject);
      ws.once('open', () => {
        ws.on('error', () => undefined);
        this.stream = ws;
        this.streamEverUp = true;
        resolve();
      });
      ws.on('message', (data: Buffer, binary: boolean) => {
        if (!binary) {
          this.streamCloses.push({ code: -1, reason: 'text message on a stream connection', at: this.now() });
          return;
        }
        this.binaryFrame(data);
      });
      ws.on('close', (code: number, reason: Buffer) => {
        this.streamCloses.push({ code, reason: reason.toString(), at: this.now() });
        if (this.stream === ws) this.stream = null;
      });
    });
  }

  /**
   * WebTransport over HTTP/2 with the library's client (no HTTP/3 here): the token is offered as the
   * `awp.bearer.<token>` protocol, as a browser must. Frames arrive back to back on a stream per channel.
   */
  private async openWebTransport(token: string): Promise<void> {
    const hash = this.options.certHash;
    if (hash === undefined) throw new Error('a webtransport observer needs the edge certificate hash');
    // `forceReliable` (HTTP/2) is the library's own option, outside the standard WebTransportOptions.
    const options = {
      forceReliable: true,
      serverCertificateHashes: [{ algorithm: 'sha-256', value: hash }],
      protocols: ['awp', `awp.bearer.${token}`],
    };
    const session = new WebTransport(this.endpoint(), options) as unknown as WtSession;
    session.closed.then(
      (info) => this.wtClosed(session, info.closeCode ?? 0, info.reason ?? ''),
      (err: unknown) => this.wtClosed(session, -1, String(err)),
    );
    await session.ready;
    this.wt = session;
    this.streamEverUp = true;
    void this.readWtStreams(session);
  }

  private wtClosed(session: WtSession, code: number, reason: string): void {
    this.streamCloses.push({ code, reason, at: this.now() });
    if (this.wt === session) this.wt = null;
  }

  private async readWtStreams(session: WtSession): Promise<void> {
    const reader = session.incomingUnidirectionalStreams.getReader();
    for (;;) {
      const next = await reader.read().catch(() => ({ done: true as const, value: undefined }));
      if (next.done) return;
      void this.readWtFrames(next.value.getReader());
    }
  }

  private async readWtFrames(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<void> {
    const splitter = new FrameSplitter(64 * 1024 * 1024);
    for (;;) {
      // A stalled observer stops reading: the stream's flow-control window closes on the edge.
      while (this.stalled) await this.unstalled;
      const next = await reader.read().catch(() => ({ done: true as const, value: undefined }));
      if (next.done) return;
      for (const buf of splitter.push(next.value)) this.binaryFrame(buf);
    }
  }

  private unstalled: Promise<void> = Promise.resolve();
  private release: () => void = () => undefined;

  /** Drops the stream connection without a closing handshake; resolves once it is gone. */
  dropStream(): Promise<void> {
    const wt = this.wt;
    if (wt !== null) {
      this.wt = null;
      wt.close({ closeCode: 0, reason: 'dropped by the test' });
      return wt.closed.then(
        () => undefined,
        () => undefined,
      );
    }
    const ws = this.stream;
    if (ws === null) return Promise.resolve();
    this.stream = null;
    return new Promise((resolve) => {
      ws.once('close', () => resolve());
      ws.terminate();
    });
  }

  // ---------------------------------------------------------------- receiving

  private controlText(text: string): void {
    const head = text.slice(0, INLINE_PREFIX_SCAN);
    if (head.includes('"method":"obs.frame"')) {
      this.inlineFrame(text);
      return;
    }
    const msg = JSON.parse(text) as Json;
    if (msg.method === 'ping' && msg.id !== undefined) {
      if (this.options.answerPings !== false) {
        const t = this.now();
        const origin = (msg.params as Json | undefined)?.origin_ns;
        this.send({
          jsonrpc: '2.0',
          id: msg.id,
          result: { origin_ns: origin, receive_ns: t, transmit_ns: t },
        });
      }
      return;
    }
    this.take(msg);
  }

  /** An `obs.frame`: the payload is skipped (only its size is kept), the rest parsed. */
  private inlineFrame(text: string): void {
    const recv = this.now();
    const key = '"payload_b64":"';
    const start = text.indexOf(key);
    let meta = text;
    let bytes = 0;
    if (start >= 0) {
      const from = start + key.length;
      const end = text.indexOf('"', from);
      const b64 = end - from;
      const pad = text[end - 1] === '=' ? (text[end - 2] === '=' ? 2 : 1) : 0;
      bytes = (b64 / 4) * 3 - pad;
      meta = text.slice(0, from) + text.slice(end);
    }
    const p = (JSON.parse(meta) as { params: Json }).params;
    if (this.streamEverUp) this.inlineAfterStream++;
    this.record(
      p.channel_id as number,
      p.seq as number,
      p.ts_mono_ns as number,
      (p.ts_send_ns as number | undefined) ?? -1,
      p.flags as number,
      bytes,
      false,
      recv,
    );
  }

  private binaryFrame(buf: Buffer): void {
    const recv = this.now();
    const h = peekFrame(buf, header);
    this.record(
      h.channel_id,
      h.seq,
      h.ts_mono_ns,
      h.has_ts_send_ns ? h.ts_send_ns : -1,
      h.flags,
      h.payload_len,
      true,
      recv,
    );
  }

  private record(
    id: number,
    seq: number,
    ts: number,
    tsSend: number,
    flags: number,
    bytes: number,
    streamed: boolean,
    recv: number,
  ): void {
    let log = this.channels.get(id);
    if (log === undefined) this.channels.set(id, (log = new ChannelLog()));
    log.check(seq, streamed);
    log.seq.push(seq);
    log.ts.push(ts);
    log.tsSend.push(tsSend);
    log.recv.push(recv);
    log.flags.push(flags);
    log.bytes.push(bytes);
    log.streamed.push(streamed);
    this.onFrame?.(id, seq, flags, streamed);
  }

  // ---------------------------------------------------------------- requests

  send(msg: unknown): void {
    this.control.send(typeof msg === 'string' ? msg : JSON.stringify(msg));
  }

  async call(method: string, params?: unknown, timeoutMs = this.options.timeoutMs ?? 5000): Promise<Json> {
    const id = this.nextId++;
    const response = this.waitFor(
      (m) => m.id === id && m.method === undefined,
      timeoutMs,
      `response to ${method}`,
    );
    this.send({ jsonrpc: '2.0', id, method, ...(params !== undefined ? { params } : {}) });
    return response;
  }

  async ok(method: string, params?: unknown, timeoutMs?: number): Promise<Json> {
    const r = await this.call(method, params, timeoutMs);
    if (r.error !== undefined) throw new Error(`${method} failed: ${JSON.stringify(r.error)}`);
    const result = r.result as Json;
    if ((method === 'obs.subscribe' || method === 'obs.unsubscribe') && Array.isArray(result.granted))
      this.learnGrants(result.granted);
    return result;
  }

  learnGrants(list: unknown): void {
    for (const g of list as { channel: string; channel_id: number }[]) {
      this.ids.set(g.channel, g.channel_id);
      this.names.set(g.channel_id, g.channel);
    }
  }

  /** The log of a channel by name (empty if nothing arrived). */
  log(channel: string): ChannelLog {
    const id = this.ids.get(channel);
    return (id === undefined ? undefined : this.channels.get(id)) ?? new ChannelLog();
  }

  /** Notifications of a method received so far (params). */
  notifications(method: string): Json[] {
    return this.received
      .filter((m) => m.method === method && m.id === undefined)
      .map((m) => m.params as Json);
  }

  /** status_seq of every notification that carries one, in arrival order. */
  statusSeqs(): number[] {
    return this.received
      .filter((m) => m.id === undefined && typeof (m.params as Json | undefined)?.status_seq === 'number')
      .map((m) => (m.params as { status_seq: number }).status_seq);
  }

  /** Resolves once a frame of `channel` arrives for which `match` holds (bounded). */
  waitFrame(
    channel_id: number,
    match: (seq: number, flags: number, streamed: boolean) => boolean = () => true,
    timeoutMs = 5000,
  ): Promise<{ seq: number; flags: number; streamed: boolean }> {
    return new Promise((resolve, reject) => {
      const prev = this.onFrame;
      const timer = setTimeout(() => {
        this.onFrame = prev;
        reject(new Error(`timed out after ${timeoutMs} ms waiting for a frame on channel ${channel_id}`));
      }, timeoutMs);
      this.onFrame = (id, seq, flags, streamed) => {
        prev?.(id, seq, flags, streamed);
        if (id === channel_id && match(seq, flags, streamed)) {
          clearTimeout(timer);
          this.onFrame = prev;
          resolve({ seq, flags, streamed });
        }
      };
    });
  }

  // ---------------------------------------------------------------- stalling and closing

  /** Stops reading at the TCP level (control and stream), so the edge's send buffers fill. */
  stall(): void {
    this.stalled = true;
    this.unstalled = new Promise((resolve) => (this.release = resolve));
    socketOf(this.control)?.pause();
    if (this.stream !== null) socketOf(this.stream)?.pause();
  }

  /** Stops reading the stream connection only (the control connection keeps reading). */
  stallStream(): void {
    if (this.stream !== null) socketOf(this.stream)?.pause();
  }

  unstall(): void {
    this.stalled = false;
    this.release();
    socketOf(this.control)?.resume();
    if (this.stream !== null) socketOf(this.stream)?.resume();
  }

  waitClosed(timeoutMs = 5000): Promise<{ code: number; reason: string }> {
    if (this.closed !== null) return Promise.resolve(this.closed);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`control connection still open after ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.closeWaiters.push(() => {
        clearTimeout(timer);
        resolve(this.closed!);
      });
    });
  }

  /** Drops every connection at once (no closing handshake). */
  terminate(): void {
    this.stream?.terminate();
    this.closeWt();
    this.control.terminate();
  }

  private closeWt(): void {
    try {
      this.wt?.close({ closeCode: 0, reason: 'test done' });
    } catch {
      // already closed
    }
    this.wt = null;
  }

  close(): void {
    this.stream?.terminate();
    this.closeWt();
    if (this.control.readyState === WebSocket.OPEN || this.control.readyState === WebSocket.CONNECTING)
      this.control.close(1000);
  }
}

/** The TCP socket under a `ws` WebSocket (ws's `_socket`, stable across ws 7 and 8). */
function socketOf(ws: WebSocket): Socket | undefined {
  return (ws as unknown as { _socket?: Socket })._socket;
}

export function isResyncKeyframe(flags: number): boolean {
  return (flags & (FLAG_RESYNC | FLAG_KEYFRAME)) === (FLAG_RESYNC | FLAG_KEYFRAME);
}

export function isKeyframe(flags: number): boolean {
  return (flags & FLAG_KEYFRAME) !== 0;
}
