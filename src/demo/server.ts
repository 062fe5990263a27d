/**
 * A WebSocket server (node:http + ws) hosting one demo world: the control binding at `/` (subprotocol `awp`,
 * AWP-TRN-001) and `ws` stream connections at `/stream` (session token as bearer, AWP-TRN-013). It feeds socket
 * events to the sans-IO world, writes its outputs through a latest-wins outbox per connection, and calls
 * `advance` on a timer.
 */
import { createServer } from 'node:http';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import type WebSocket from 'ws';
import { FLAG_KEYFRAME, FLAG_RESYNC } from '../protocol/frame.js';
import type { ArmOptions, GridOptions } from './config.js';
import { createDemoWorld } from './create.js';
import type { DemoKind } from './create.js';
import { LatestWinsOutbox } from './outbox.js';
import type { ConnId, Output } from './types.js';
import type { DemoWorld } from './world.js';

export interface DemoServerOptions extends GridOptions, ArmOptions {
  readonly kind: DemoKind;
  readonly host?: string;
  /** 0 picks a free port. */
  readonly port?: number;
  /** Agent credential (`Authorization: Bearer` or `awp.bearer.<credential>`); none = open (loopback only). */
  readonly token?: string;
  /** Allow a non-loopback host without a credential (plaintext ws is still loopback-grade: put TLS in front). */
  readonly allowInsecure?: boolean;
  /** Offer the `ws` stream binding at /stream (default true). */
  readonly streamBinding?: boolean;
  /** Period of `world.advance` (default 2 ms). */
  readonly stepMs?: number;
  /** Session-token randomness (tests). */
  readonly random?: (bytes: number) => Uint8Array;
}

export interface RunningDemoWorld {
  /** Control endpoint, e.g. `ws://127.0.0.1:8710/`. */
  readonly url: string;
  readonly port: number;
  readonly world: DemoWorld;
  engageEstop(source?: string): void;
  releaseEstop(): void;
  close(): Promise<void>;
}

const STREAM_PATH = '/stream';
const BEARER_PREFIX = 'awp.bearer.';
/** Bytes handed to a socket but not yet flushed, above which frames wait in the outbox (and latest-wins ones drop). */
const HIGH_WATER_BYTES = 256 * 1024;
/** Query parameters that carry credentials: such URLs are refused (AWP-SEC-006). */
const CREDENTIAL_PARAM = /token|auth|bearer|credential|secret|password|api[-_]?key|^key$/i;

interface Peer {
  readonly ws: WebSocket;
  readonly outbox: LatestWinsOutbox<Output>;
  inflight: number;
  closed: boolean;
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}

/** The bearer credential from `Authorization` or an offered `awp.bearer.<credential>` subprotocol (AWP-SEC-005). */
function bearer(req: IncomingMessage): string | undefined {
  const auth = req.headers.authorization;
  if (auth?.startsWith('Bearer ') === true) return auth.slice('Bearer '.length).trim();
  const offered = (req.headers['sec-websocket-protocol'] ?? '').split(',').map((p) => p.trim());
  return offered.find((p) => p.startsWith(BEARER_PREFIX))?.slice(BEARER_PREFIX.length);
}

function refuse(socket: Duplex, status: number, text: string): void {
  const body = `${text}\n`;
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

function markResync(o: Output): Output {
  return o.kind === 'frame'
    ? { ...o, frame: { ...o.frame, flags: o.frame.flags | FLAG_KEYFRAME | FLAG_RESYNC } }
    : o;
}

export async function startDemoWorld(opts: DemoServerOptions): Promise<RunningDemoWorld> {
  const host = opts.host ?? '127.0.0.1';
  if (!isLoopback(host) && opts.token === undefined && opts.allowInsecure !== true) {
    throw new Error('a world reachable off this machine must authenticate agents (AWP-SEC-002): set a token');
  }
  const t0 = process.hrtime.bigint();
  const now = (): number => Number(process.hrtime.bigint() - t0);
  const anchor = new Date().toISOString();

  const http = createServer((_req, res) => {
    res.writeHead(426, { 'Content-Type': 'text/plain', Upgrade: 'websocket' }).end('AWP over WebSocket\n');
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(opts.port ?? 0, host, () => {
      http.off('error', reject);
      resolve();
    });
  });
  const address = http.address();
  const port = typeof address === 'object' && address !== null ? address.port : (opts.port ?? 0);
  const hostPart = host.includes(':') ? `[${host}]` : host;
  const base = `ws://${hostPart}:${port}`;

  const world = createDemoWorld(
    opts.kind,
    {
      ...opts,
      clockAnchor: anchor,
      ...(opts.streamBinding !== false && { streamUrl: `${base}${STREAM_PATH}` }),
    },
    opts.random !== undefined ? { random: opts.random } : {},
  );

  const peers = new Map<ConnId, Peer>();
  let nextConn = 1;

  const pump = (peer: Peer): void => {
    while (!peer.closed && peer.inflight < HIGH_WATER_BYTES) {
      const o = peer.outbox.shift();
      if (o === undefined) return;
      if (o.kind === 'close') {
        peer.closed = true;
        peer.ws.close(o.code, o.reason.slice(0, 120));
        return;
      }
      const data = o.kind === 'text' ? JSON.stringify(o.msg) : world.encodeFrame(o, now());
      const size = typeof data === 'string' ? Buffer.byteLength(data) : data.length;
      peer.inflight += size;
      peer.ws.send(data, { binary: typeof data !== 'string' }, () => {
        peer.inflight -= size;
        pump(peer);
      });
    }
  };

  const dispatch = (outputs: Output[]): void => {
    const touched = new Set<Peer>();
    for (const o of outputs) {
      const peer = peers.get(o.conn);
      if (peer === undefined || peer.closed) continue;
      const frame = o.kind === 'frame' ? o : undefined;
      const pushed = peer.outbox.push({
        item: o,
        ...(frame?.latestWins === true && {
          slot: frame.frame.channel_id,
          keyframe: (frame.frame.flags & FLAG_KEYFRAME) !== 0,
          resync: (frame.frame.flags & FLAG_RESYNC) !== 0,
        }),
      });
      if (pushed === 'full') {
        peer.closed = true; // a peer that stops reading is disconnected, not buffered without bound
        peer.ws.close(1008, 'send queue full');
        continue;
      }
      touched.add(peer);
    }
    for (const peer of touched) pump(peer);
  };

  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: 16 * 1024 * 1024,
    perMessageDeflate: false,
    // Select `awp`; never echo an `awp.bearer.*` credential (AWP-SEC-005).
    handleProtocols: (offered) => (offered.has('awp') ? 'awp' : false),
  });

  const attach = (ws: WebSocket, onOpen: (conn: ConnId) => Output[]): ConnId => {
    const conn = nextConn++;
    const peer: Peer = {
      ws,
      outbox: new LatestWinsOutbox<Output>(10_000, markResync),
      inflight: 0,
      closed: false,
    };
    peers.set(conn, peer);
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      dispatch(
        isBinary
          ? world.receiveBinary(conn, data, now())
          : world.receiveText(conn, data.toString('utf8'), now()),
      );
    });
    ws.on('close', () => {
      peers.delete(conn);
      dispatch(world.disconnect(conn, now()));
    });
    ws.on('error', () => ws.terminate());
    dispatch(onOpen(conn));
    return conn;
  };

  http.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if ([...url.searchParams.keys()].some((k) => CREDENTIAL_PARAM.test(k))) {
      refuse(socket, 400, 'Bad Request: credentials must not appear in URLs'); // AWP-SEC-006
      return;
    }
    const credential = bearer(req);
    if (url.pathname === STREAM_PATH) {
      if (credential === undefined || !world.streamTokenValid(credential)) {
        refuse(socket, 401, 'Unauthorized');
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) =>
        attach(ws, (conn) => world.attachStream(conn, credential, now())),
      );
      return;
    }
    if (url.pathname !== '/') {
      refuse(socket, 404, 'Not Found');
      return;
    }
    if (opts.token !== undefined && credential !== opts.token) {
      refuse(socket, 401, 'Unauthorized');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => attach(ws, (conn) => world.connect(conn, now())));
  });

  const timer = setInterval(() => dispatch(world.advance(now())), opts.stepMs ?? 2);

  return {
    url: `${base}/`,
    port,
    world,
    engageEstop: (source) => dispatch(world.engageEstop(now(), source)),
    releaseEstop: () => dispatch(world.releaseEstop(now())),
    close: async () => {
      clearInterval(timer);
      for (const peer of peers.values()) peer.ws.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
