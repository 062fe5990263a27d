/**
 * The agent-facing WebTransport listener (`@fails-components/webtransport`): HTTP/3 and HTTP/2 on one
 * port where the native HTTP/3 transport (`@fails-components/webtransport-transport-http3-quiche`) is
 * installed, WebTransport over HTTP/2 otherwise.
 *
 * Each session request (the extended CONNECT) is decided before the session exists, like a WebSocket
 * upgrade: the library's request callback sees the CONNECT's headers (`:path`, `authorization`, and
 * `wt-available-protocols` parsed into a list) and answers with a status. The credential is the
 * `Authorization: Bearer` header where the client can set one, or an offered `awp.bearer.<token>`
 * protocol in WT-Available-Protocols (browsers and this library's client cannot set headers; the
 * W3C API's `protocols` option is their only per-request field). Only `awp` is ever selected, so the
 * token is not echoed. Credentials in the URL are refused (AWP-SEC-006).
 */
import { EventEmitter } from 'node:events';
import { constants as h2, type Http2Session, type ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import { HandshakeGuard, type HandshakeCloseReason, type HandshakeLimits } from './handshake-guard.js';
import { randomBytes } from 'node:crypto';
import type { ReadableStream, WritableStream } from 'node:stream/web';
import { Http2Server, HttpServer } from '@fails-components/webtransport';

/**
 * The part of the library's session object the edge uses (its published .d.ts files resolve to `any`
 * under NodeNext resolution, so the boundary is typed here, once).
 */
export interface WebTransportSession {
  readonly closed: Promise<{ closeCode?: number; reason?: string }>;
  close(info?: { closeCode?: number; reason?: string }): void;
  createUnidirectionalStream(): Promise<WritableStream<Uint8Array>>;
  readonly incomingUnidirectionalStreams: ReadableStream<ReadableStream<Uint8Array>>;
  readonly incomingBidirectionalStreams: ReadableStream<{
    readable: ReadableStream<Uint8Array>;
    writable: WritableStream<Uint8Array>;
  }>;
  readonly datagrams: { readonly readable: ReadableStream<Uint8Array> };
  /** `address:port` of the peer's connection (HTTP/2 and HTTP/1: its TCP connection's). */
  readonly peerAddress?: string;
}

/** The subprotocol a stream connection offers and the edge selects (AWP-TRN-013). */
export const AWP_PROTOCOL = 'awp';

/** The package whose presence enables HTTP/3; it is an optional native dependency. */
const QUICHE_PACKAGE = '@fails-components/webtransport-transport-http3-quiche';
/** Where the library queues accepted sessions; every decision is made in the request callback. */
const SESSION_PATH = '/awp-edge-webtransport';
/** An accepted request whose session never materialises (the client vanished) is abandoned after this. */
const ACCEPT_TIMEOUT_MS = 10_000;
const CLOSE_GRACE_MS = 1_000;

/** The parts of a session request the edge decides on. */
export interface WebTransportRequest {
  readonly path: string;
  readonly query: string;
  header(name: string): string | undefined;
  /** WT-Available-Protocols, in order. */
  readonly protocols: readonly string[];
}

export type WebTransportDecision =
  | {
      accept: true;
      /** The session is up (the CONNECT was answered 200 with `awp` selected). */
      open: (session: WebTransportSession) => void;
      /** The session never came (the client left during the handshake): release what `decide` took. */
      abandon?: () => void;
    }
  | { accept: false; status: number; reason: string };

export interface WebTransportListenOptions {
  readonly host: string;
  readonly port: number;
  /** PEM certificate chain and private key. */
  readonly cert: string;
  readonly key: string;
  readonly decide: (req: WebTransportRequest) => Promise<WebTransportDecision> | WebTransportDecision;
  /** Internal failures, for the operator's log (refusals are the caller's to count and log). */
  readonly log?: (fields: Record<string, unknown>, message: string) => void;
  /** Limits on HTTP/2 connections until their first request (the WebSocket listener's, see engine.ts). */
  readonly handshake?: HandshakeLimits;
  readonly onHandshakeClosed?: (reason: HandshakeCloseReason) => void;
}

export interface WebTransportListener {
  readonly port: number;
  /** 'http3+http2' with the native transport, else 'http2'. */
  readonly transports: 'http3+http2' | 'http2';
  /** Closes every session (code 1001) and the listening sockets. */
  close(): Promise<void>;
}

interface RequestArgs {
  header: Record<string, string | string[] | undefined>;
}

interface Pending {
  readonly open: (session: WebTransportSession) => void;
  readonly abandon: (() => void) | undefined;
  readonly timer: NodeJS.Timeout;
}

/** Whether the native HTTP/3 transport loads on this machine. */
export async function http3Available(): Promise<boolean> {
  try {
    const name: string = QUICHE_PACKAGE; // a variable: the package is optional and has no types here
    await import(name);
    return true;
  } catch {
    return false;
  }
}

export async function listenWebTransport(opts: WebTransportListenOptions): Promise<WebTransportListener> {
  // HTTP/3 (UDP) and HTTP/2 (TCP) bind separately; with an ephemeral port they would differ, so both
  // transports need a fixed port.
  const http3 = opts.port !== 0 && (await http3Available());
  const init = {
    host: opts.host,
    port: opts.port,
    secret: randomBytes(16).toString('hex'),
    cert: opts.cert,
    privKey: opts.key,
    defaultDatagramsReadableMode: 'bytes',
  };
  const server = http3 ? new HttpServer({ ...init, reliability: 'both' as const }) : new Http2Server(init);
  const pending = new Map<number, Pending>();
  const live = new Set<WebTransportSession>();
  let nextTicket = 1;
  const state = { closing: false };
  const log = opts.log ?? (() => undefined);
  /** Releases a session's connection from the handshake limits (set below when they apply). */
  let sessionAccepted: (peer: string | undefined) => void = () => undefined;

  server.setRequestCallback(async ({ header }: RequestArgs) => {
    const rawPath = typeof header[':path'] === 'string' ? header[':path'] : '/';
    const q = rawPath.indexOf('?');
    const req: WebTransportRequest = {
      path: q < 0 ? rawPath : rawPath.slice(0, q),
      query: q < 0 ? '' : rawPath.slice(q + 1),
      header: (name) => {
        const v = header[name.toLowerCase()];
        return Array.isArray(v) ? v.join(', ') : v;
      },
      protocols: offeredProtocols(header['wt-available-protocols']),
    };
    let decision: WebTransportDecision;
    try {
      decision = state.closing
        ? { accept: false, status: 503, reason: 'edge shutting down' }
        : await opts.decide(req);
    } catch (err) {
      log(
        { event: 'webtransport_decide_failed', detail: String(err) },
        'webtransport session request failed',
      );
      decision = { accept: false, status: 500, reason: 'internal error' };
    }
    if (!decision.accept) return { header, path: req.path, status: decision.status };
    const ticket = nextTicket++;
    const { open, abandon } = decision;
    const timer = setTimeout(() => {
      pending.delete(ticket);
      abandon?.();
    }, ACCEPT_TIMEOUT_MS);
    timer.unref();
    pending.set(ticket, { open, abandon, timer });
    return { header, path: SESSION_PATH, userData: { ticket }, status: 200, selectedProtocol: AWP_PROTOCOL };
  });

  // The library's session objects, seen through the typed boundary above.
  const sessions = server.sessionStream(SESSION_PATH, {
    noAutoPaths: true,
  }) as unknown as ReadableStream<WebTransportSession>;
  const acceptLoop = readEach(sessions, (session) => {
    // userData is how the library hands the request callback's answer to the session; untyped there.
    const ticket = (session as unknown as { userData?: { ticket?: number } }).userData?.ticket;
    const p = ticket === undefined ? undefined : pending.get(ticket);
    if (ticket !== undefined) pending.delete(ticket);
    if (p === undefined) {
      session.close({ closeCode: 1008, reason: 'session was not expected' });
      return;
    }
    clearTimeout(p.timer);
    if (state.closing) {
      p.abandon?.();
      session.close({ closeCode: 1001, reason: 'edge shutting down' });
      return;
    }
    live.add(session);
    sessionAccepted(session.peerAddress);
    session.closed.then(
      () => live.delete(session),
      () => live.delete(session),
    );
    try {
      p.open(session);
    } catch (err) {
      log({ event: 'webtransport_open_failed', detail: String(err) }, 'webtransport session failed to start');
      session.close({ closeCode: 1011, reason: 'internal error' });
    }
  });

  server.startServer();
  await server.ready;
  // Attached once listening (the library creates its server in startServer); no connection came yet.
  const h2server = http2ServerOf(server);
  if (h2server === undefined) throw new Error('webtransport: the HTTP/2 transport exposes no server');
  h2server.on('stream', resetWithCancel);
  // An HTTP/2 connection with no stream left is ended (GOAWAY): a refused request's, as the other listener
  // ends a refused upgrade's, and an ended session's (each session is one stream). http2 has no idle
  // timeout of its own, and a connection out of the handshake limits was otherwise kept for good.
  // Prepended: the library answers some requests within its own listener.
  const openStreams = new WeakMap<Http2Session, number>();
  h2server.prependListener('stream', (stream: ServerHttp2Stream) => {
    const session = stream.session;
    if (session === undefined) return;
    openStreams.set(session, (openStreams.get(session) ?? 0) + 1);
    stream.once('close', () => {
      const left = (openStreams.get(session) ?? 1) - 1;
      openStreams.set(session, left);
      if (left === 0 && !session.closed && !session.destroyed) session.close();
    });
  });
  if (opts.handshake !== undefined) {
    const guard = new HandshakeGuard(opts.handshake, (reason) => opts.onHandshakeClosed?.(reason));
    // Connections with no accepted session yet, by peer address: the one name the library gives a
    // session's connection.
    const unaccepted = new Map<string, Socket>();
    h2server.on('connection', (socket: Socket) => {
      guard.admit(socket);
      if (socket.destroyed) return;
      const peer = peerOf(socket);
      unaccepted.set(peer, socket);
      socket.once('close', () => {
        if (unaccepted.get(peer) === socket) unaccepted.delete(peer);
      });
    });
    // Only an accepted session ends the handshake, as an upgrade does on the other listener: a refused
    // request (by the library or by `decide`) leaves its connection under the limits.
    sessionAccepted = (peer) => {
      const socket = peer === undefined ? undefined : unaccepted.get(peer);
      if (peer === undefined || socket === undefined) return;
      unaccepted.delete(peer);
      guard.done(socket);
    };
  }
  const address = server.address();
  if (address === null) throw new Error('webtransport listener has no address');

  return {
    port: address.port,
    transports: http3 ? 'http3+http2' : 'http2',
    close: async () => {
      if (state.closing) return;
      state.closing = true;
      for (const [ticket, p] of pending) {
        clearTimeout(p.timer);
        p.abandon?.();
        pending.delete(ticket);
      }
      const ending = [...live].map((s) => {
        s.close({ closeCode: 1001, reason: 'edge shutting down' });
        return s.closed.catch(() => undefined);
      });
      await withTimeout(Promise.all(ending), CLOSE_GRACE_MS);
      server.stopServer();
      await withTimeout(server.closed, CLOSE_GRACE_MS);
      await withTimeout(acceptLoop, CLOSE_GRACE_MS);
    },
  };
}

/** A connection's name as the library gives it to a session (`peerAddress`). */
function peerOf(socket: { remoteAddress?: string | undefined; remotePort?: number | undefined }): string {
  return `${socket.remoteAddress}:${socket.remotePort}`;
}

/** The library parses WT-Available-Protocols into a list on HTTP/2; accept the raw header too. */
function offeredProtocols(v: string | string[] | undefined): string[] {
  if (v === undefined) return [];
  if (Array.isArray(v)) return v;
  return v
    .split(',')
    .map((p) => p.trim().replace(/^"(.*)"$/, '$1'))
    .filter((p) => p.length > 0);
}

function withTimeout(p: Promise<unknown>, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    void p.finally(() => {
      clearTimeout(t);
      resolve();
    });
  });
}

/**
 * Reads every stream the peer opens (unidirectional, and the receiving side of bidirectional ones),
 * handing each chunk to `chunk` with its stream's identity and `end` when a stream stops: `finished`
 * when it ended, not when it was reset (or the session went), so that what a caller holds for the
 * stream (a partial frame) goes either way. Every datagram (one frame each) goes to `datagram`;
 * datagrams are read even by a peer that has no use for them: the library queues unread ones without
 * bound. Stops when the session is gone.
 */
export function readIncomingStreams(
  session: WebTransportSession,
  handlers: {
    chunk(stream: object, data: Uint8Array): void;
    end(stream: object, finished: boolean): void;
    datagram(data: Uint8Array): void;
  },
): void {
  const readStream = async (rs: ReadableStream<Uint8Array>) => {
    handlers.end(rs, await readEach(rs, (data) => handlers.chunk(rs, data)));
  };
  void readEach(session.incomingUnidirectionalStreams, (s) => void readStream(s));
  void readEach(session.datagrams.readable, (d) => handlers.datagram(d));
  void readEach(session.incomingBidirectionalStreams, (s) => {
    // The edge never answers on an agent's stream: its frames go out on the edge's own streams.
    void s.writable.close().catch(() => undefined);
    void readStream(s.readable);
  });
}

/**
 * Hands every value of `stream` to `f`, in order, until the stream ends (true) or a read fails (false:
 * reset by the peer, or the session closed). The one read loop for sessions, streams and datagrams.
 */
async function readEach<T>(stream: ReadableStream<T>, f: (value: T) => void): Promise<boolean> {
  const reader = stream.getReader();
  for (;;) {
    let next;
    try {
      next = await reader.read();
    } catch {
      return false;
    }
    if (next.done) return true;
    f(next.value);
  }
}

/**
 * The library resets a session's CONNECT stream with the WebTransport close code as the HTTP/2 error code,
 * so a peer that closes its session with code 0 gets RST_STREAM(NO_ERROR). Node 20's HTTP/2 then spins in
 * native code if frames are still queued on the stream, buffering without bound until the process aborts
 * (std::bad_alloc; test/webtransport/close-spin.test.ts). CANCEL tells the peer the same (the stream is no
 * longer needed) and does not spin.
 */
function resetWithCancel(stream: ServerHttp2Stream): void {
  const close = stream.close.bind(stream);
  stream.close = (code?: number, callback?: () => void) =>
    close(code === h2.NGHTTP2_NO_ERROR ? h2.NGHTTP2_CANCEL : code, callback);
}

/**
 * The node:http2 server under the library's HTTP/2 transport: the library has no hook for raw
 * connections, so the handshake limits and the reset rule are attached to it directly (reliableOnly, or the
 * first of 'both').
 */
function http2ServerOf(server: object): EventEmitter | undefined {
  type Transport = { serverInt?: unknown; transportsInts?: { serverInt?: unknown }[] };
  const t = (server as { transportInt?: Transport }).transportInt;
  const s = t?.serverInt ?? t?.transportsInts?.find((x) => x.serverInt !== undefined)?.serverInt;
  return s instanceof EventEmitter ? s : undefined;
}
