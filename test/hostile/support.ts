/** Shared helpers of the hostile-client suite: hostile payloads, metric scrapes, raw sockets, log capture. */
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach } from 'vitest';
import { createLogger } from '../../src/telemetry/logger.js';
import type { Logger } from '../../src/telemetry/logger.js';
import { AwpClient, initializeParams, type Json } from '../support/awp-client.js';
import type { EdgeOptions } from '../../src/edge/edge.js';
import { AGENT_TOKEN, startEdge, type TestEdge } from '../support/edge.js';
import { HostileWorld } from './world.js';

/** The payload: a 5,000-level nested array, about 10 KB of text. */
export const DEPTH = 5000;
export function deepArray(depth = DEPTH): string {
  return '['.repeat(depth) + ']'.repeat(depth);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export async function until(
  cond: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string | (() => string),
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`,
      );
    await sleep(20);
  }
}

export async function scrape(edge: TestEdge): Promise<string> {
  const res = await fetch(`${edge.adminUrl}/metrics`);
  return res.text();
}

/**
 * The sum of every sample of `name` whose labels include all of `labels` (0 when none matches, so a
 * counter that was never incremented reads 0).
 */
export function metric(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (m === null || m[1] !== name) continue;
    const have = new Map<string, string>();
    for (const pair of (m[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      have.set(pair[1]!, pair[2]!);
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) sum += Number(m[4]);
  }
  return sum;
}

/** The samples of a metric, one line each (for failure messages). */
export function series(text: string, name: string): string {
  return text
    .split('\n')
    .filter((l) => l.startsWith(name))
    .join('\n');
}

/** An agent on `path` that has initialized. */
export async function agentOn(edge: TestEdge, path: string): Promise<AwpClient> {
  const a = await AwpClient.connect(edge.url(path), { credential: AGENT_TOKEN });
  await a.ok('initialize', initializeParams());
  return a;
}

/** An agent on `path` with a relay session open (no embodiment field needed by the hostile world). */
export async function sessionOn(
  edge: TestEdge,
  path: string,
  params: Json = { embodiment: 'e1', mode: 'streaming' },
): Promise<{ agent: AwpClient; ready: Json }> {
  const agent = await agentOn(edge, path);
  const ready = await agent.ok('session.open', params);
  return { agent, ready };
}

/** A ping round trip on a working connection. */
export async function pingOk(agent: AwpClient, origin = 4242): Promise<void> {
  const pong = await agent.ok('ping', { origin_ns: origin }, 5000);
  if (pong.origin_ns !== origin) throw new Error(`pong carried ${JSON.stringify(pong)}`);
}

/** Every message an agent received, as text, to search for what must never reach it. */
export function agentBound(agent: AwpClient): string {
  return agent.received.map((m) => JSON.stringify(m)).join('\n');
}

/** A pino logger at level trace writing into `lines` (one JSON record per entry). */
export function captureLogs(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  let partial = '';
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      const text = partial + chunk.toString();
      const parts = text.split('\n');
      partial = parts.pop()!;
      lines.push(...parts.filter((p) => p !== ''));
      done();
    },
  });
  return { log: createLogger('trace', destination), lines };
}

/** A raw TCP socket to the edge that records when the edge closes it. */
export interface RawSocket {
  readonly socket: Socket;
  /** Date.now() when the socket closed, or null while open. */
  closedAt: number | null;
  readonly closed: Promise<void>;
  readonly received: Buffer[];
}

export function rawSocket(port: number, localAddress?: string): Promise<RawSocket> {
  return new Promise((resolve, reject) => {
    const socket = connect({
      port,
      host: '127.0.0.1',
      ...(localAddress !== undefined ? { localAddress } : {}),
    });
    let markClosed: () => void = () => undefined;
    const raw: RawSocket = {
      socket,
      closedAt: null,
      closed: new Promise<void>((r) => (markClosed = r)),
      received: [],
    };
    socket.on('data', (d: Buffer) => raw.received.push(d));
    socket.on('error', () => undefined); // a reset by the edge is one of the outcomes; 'close' follows
    socket.on('close', () => {
      raw.closedAt = Date.now();
      markClosed();
    });
    socket.once('connect', () => resolve(raw));
    socket.once('error', reject);
  });
}

/** A masked client text frame (RFC 6455 5.2), for talking WebSocket over a hand-made upgrade. */
export function clientTextFrame(text: string): Buffer {
  const payload = Buffer.from(text, 'utf8');
  const mask = randomBytes(4);
  let head: Buffer;
  if (payload.length < 126) head = Buffer.from([0x81, 0x80 | payload.length]);
  else if (payload.length < 65536) {
    head = Buffer.alloc(4);
    head[0] = 0x81;
    head[1] = 0x80 | 126;
    head.writeUInt16BE(payload.length, 2);
  } else {
    head = Buffer.alloc(10);
    head[0] = 0x81;
    head[1] = 0x80 | 127;
    head.writeBigUInt64BE(BigInt(payload.length), 2);
  }
  const masked = Buffer.alloc(payload.length);
  for (let i = 0; i < payload.length; i++) masked[i] = payload[i]! ^ mask[i % 4]!;
  return Buffer.concat([head, mask, masked]);
}

/** Unmasked server text frames in `buf` (what the edge wrote after a 101), decoded; partial tail ignored. */
export function serverTexts(buf: Buffer): { texts: string[]; closeCode: number | undefined } {
  const texts: string[] = [];
  let closeCode: number | undefined;
  let i = 0;
  while (i + 2 <= buf.length) {
    const op = buf[i]! & 0x0f;
    let len = buf[i + 1]! & 0x7f;
    let at = i + 2;
    if (len === 126) {
      if (at + 2 > buf.length) break;
      len = buf.readUInt16BE(at);
      at += 2;
    } else if (len === 127) {
      if (at + 8 > buf.length) break;
      len = Number(buf.readBigUInt64BE(at));
      at += 8;
    }
    if (at + len > buf.length) break;
    const payload = buf.subarray(at, at + len);
    if (op === 1) texts.push(payload.toString('utf8'));
    if (op === 8 && payload.length >= 2) closeCode = payload.readUInt16BE(0);
    i = at + len;
  }
  return { texts, closeCode };
}

/** `global.gc` where the process exposes it, else exposed now through V8 flags (a fresh context reads it). */
export function gc(): void {
  const g = (globalThis as { gc?: () => void }).gc;
  if (typeof g === 'function') return g();
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

export interface HostileRig {
  readonly world: HostileWorld;
  /** The bystander's world, on its own route. */
  readonly other: HostileWorld;
  readonly edge: TestEdge;
  /** A well-behaved agent with a session on the demo arm route: it must keep working throughout. */
  readonly bystander: AwpClient;
  close(): Promise<void>;
}

/**
 * Route `/w` to a programmable world the test abuses and `/other` to a second one, with a bystander
 * session on `/other`. (Both are test worlds, so the suite does not depend on the demo worlds.)
 */
/**
 * A test file's rig and cleanups, ended after each test: call once at the top of the file, start the
 * rig with `start` (startRig's arguments), push what else a test opens to `cleanups`.
 */
export function rigPerTest(): { cleanups: (() => void)[]; start: typeof startRig } {
  const cleanups: (() => void)[] = [];
  let rig: HostileRig | undefined;
  afterEach(async () => {
    for (const c of cleanups.splice(0)) c();
    await rig?.close();
    rig = undefined;
  });
  return { cleanups, start: async (...args) => (rig = await startRig(...args)) };
}

export async function startRig(
  extra: Record<string, unknown> = {},
  options: EdgeOptions = {},
  routeExtra: Record<string, unknown> = {},
): Promise<HostileRig> {
  const world = await HostileWorld.start();
  const other = await HostileWorld.start();
  let edge: TestEdge;
  try {
    edge = await startEdge(
      [
        { path: '/w', upstream: world.url, name: 'w', ...routeExtra },
        { path: '/other', upstream: other.url, name: 'other', ...routeExtra },
      ],
      extra,
      options,
    );
  } catch (err) {
    await world.close();
    await other.close();
    throw err;
  }
  const bystander = await agentOn(edge, '/other');
  await bystander.ok('session.open', { embodiment: 'e1', mode: 'streaming' });
  return {
    world,
    other,
    edge,
    bystander,
    close: async () => {
      bystander.close();
      await edge.close();
      await world.close();
      await other.close();
    },
  };
}

/** A raw HTTP exchange: the response head's status, the bytes after the head, and the open socket. */
interface RawExchange {
  readonly status: number;
  readonly head: string;
  readonly raw: RawSocket;
  /** Everything after the head received until the socket closed or `settleMs` passed. */
  body(settleMs?: number): Promise<string>;
}

/**
 * Writes `lines` (a request head, without the final blank line) on a fresh socket and reads the
 * response head. Unlike test/transport/raw-client.ts nothing is added, so the Host header is the test's.
 */
export async function rawRequest(
  port: number,
  lines: readonly string[],
  timeoutMs = 5000,
  localAddress?: string,
): Promise<RawExchange> {
  const raw = await rawSocket(port, localAddress);
  raw.socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  const end = Date.now() + timeoutMs;
  let all: Buffer;
  for (;;) {
    all = Buffer.concat(raw.received);
    if (all.indexOf('\r\n\r\n') >= 0) break;
    if (raw.closedAt !== null) throw new Error(`closed before a response head: ${all.toString('latin1')}`);
    if (Date.now() > end) {
      raw.socket.destroy();
      throw new Error(`no response head within ${timeoutMs} ms`);
    }
    await sleep(5);
  }
  const at = all.indexOf('\r\n\r\n');
  const head = all.subarray(0, at).toString('latin1');
  return {
    status: Number(head.split(' ')[1]),
    head,
    raw,
    body: async (settleMs = 1000) => {
      await Promise.race([raw.closed, sleep(settleMs)]);
      return Buffer.concat(raw.received)
        .subarray(at + 4)
        .toString('utf8');
    },
  };
}

/** The head of a WebSocket upgrade with subprotocol `awp` (and a credential when given). */
export function upgradeHead(
  path: string,
  host: string,
  extra: readonly string[] = [],
  /** null: no credential at all. */
  credential: string | null = AGENT_TOKEN,
): string[] {
  return [
    `GET ${path} HTTP/1.1`,
    `Host: ${host}`,
    'Upgrade: websocket',
    'Connection: Upgrade',
    `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
    'Sec-WebSocket-Version: 13',
    'Sec-WebSocket-Protocol: awp',
    ...(credential !== null ? [`Authorization: Bearer ${credential}`] : []),
    ...extra,
  ];
}
