/**
 * The admin listener's bounds, over real sockets: slow or silent clients and endless bodies are closed
 * within its timeout, an unread body does not hold a refused socket, sockets beyond its cap are closed,
 * concurrent scrapes share one exposition; and the session gauges label only configured routes.
 */
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startAdmin, type AdminHandlers, type AdminLimits, type AdminServer } from '../../src/edge/admin.js';
import { RelaySession } from '../../src/relay/relay-session.js';
import { ReplayJournal } from '../../src/session/journal.js';
import type { RelaySessionRecord } from '../../src/session/session-store.js';
import { startEdge, type TestEdge } from '../support/edge.js';

const cleanups: (() => Promise<void> | void)[] = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function admin(h: AdminHandlers, limits: AdminLimits): Promise<AdminServer> {
  const a = await startAdmin({ host: '127.0.0.1', port: 0 }, h, limits);
  cleanups.push(() => a.close());
  return a;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function until(cond: () => boolean, timeoutMs: number, what: () => string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what()}`);
    await sleep(20);
  }
}

/** A raw client socket: what it received, and whether the server closed it. */
interface Raw {
  readonly socket: Socket;
  received: string;
  closed: boolean;
}

async function raw(port: number): Promise<Raw> {
  const socket = connect(port, '127.0.0.1');
  const r: Raw = { socket, received: '', closed: false };
  socket.setEncoding('utf8');
  socket.on('data', (d: string) => (r.received += d));
  socket.on('error', () => undefined); // a reset is a close too
  socket.on('close', () => (r.closed = true));
  cleanups.push(() => void socket.destroy());
  await new Promise<void>((resolve) => {
    socket.once('connect', resolve);
    socket.once('close', resolve);
  });
  return r;
}

/** Writes `chunk()` every `ms` while the socket is open (stops when it closes). */
function trickle(r: Raw, ms: number, chunk: () => string): void {
  const timer = setInterval(() => {
    if (r.closed || r.socket.destroyed) clearInterval(timer);
    else r.socket.write(chunk());
  }, ms);
  timer.unref();
  cleanups.push(() => clearInterval(timer));
}

function open(rs: readonly Raw[]): number {
  return rs.filter((r) => !r.closed).length;
}

/** GET over a connection of its own; the status and the body. */
function get(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.setTimeout(20_000, () => req.destroy(new Error(`GET ${path}: no answer`)));
    req.on('error', reject);
    req.end();
  });
}

const ready = (): boolean => true;

describe('admin listener bounds', () => {
  it('closes clients that trickle headers, send nothing, or send an endless body, within its timeout', async () => {
    const timeoutMs = 400;
    const a = await admin({ ready }, { timeoutMs, maxConnections: 128 });
    // A byte every 100 ms keeps an idle timer from firing: only a bound on the whole request closes these.
    const slow = await Promise.all(Array.from({ length: 20 }, () => raw(a.port)));
    for (const r of slow) {
      r.socket.write('GET /metrics HTTP/1.1\r\nHost: x\r\n');
      trickle(r, 100, () => 'X-Slow: 1\r\n');
    }
    const silent = await Promise.all(Array.from({ length: 5 }, () => raw(a.port)));
    const endless = await Promise.all(Array.from({ length: 5 }, () => raw(a.port)));
    for (const r of endless) {
      r.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n');
      trickle(r, 100, () => '4\r\nabcd\r\n');
    }
    const all = [...slow, ...silent, ...endless];
    expect(open(all)).toBe(all.length);
    // Generous for a busy machine: 20 times the timeout (the old listener held them for minutes).
    await until(
      () => open(all) === 0,
      timeoutMs * 20,
      () => `${open(slow)} slow, ${open(silent)} silent, ${open(endless)} endless sockets open`,
    );
    // The listener still serves.
    expect((await get(a.port, '/healthz')).status).toBe(200);
  });

  it.each([
    ['POST /metrics', 405],
    ['GET /nowhere', 404],
  ])(
    'closes a refused request (%s: %i) whose body keeps coming, without waiting for the timeout',
    async (request, status) => {
      const a = await admin({ ready }, { timeoutMs: 60_000, maxConnections: 128 });
      const r = await raw(a.port);
      r.socket.write(`${request} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n`);
      trickle(r, 50, () => '4\r\nabcd\r\n');
      await until(
        () => r.closed,
        10_000,
        () => `the socket to close (received ${JSON.stringify(r.received.slice(0, 200))})`,
      );
      expect(r.received).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
      expect(r.received.toLowerCase()).toContain('connection: close');
    },
  );

  it('closes sockets beyond its connection cap at once, and keeps those within it', async () => {
    const a = await admin({ ready }, { timeoutMs: 60_000, maxConnections: 4 });
    const held: Raw[] = [];
    for (let i = 0; i < 4; i++) held.push(await raw(a.port));
    const extra: Raw[] = [];
    for (let i = 0; i < 4; i++) extra.push(await raw(a.port));
    await until(
      () => open(extra) === 0,
      10_000,
      () => `${open(extra)} sockets beyond the cap open`,
    );
    expect(open(held)).toBe(4);
    // A slot freed is served again.
    held[0]!.socket.destroy();
    await until(
      () => held[0]!.closed,
      10_000,
      () => 'the client socket to close',
    );
    let answered: number | undefined;
    for (let i = 0; i < 50 && answered === undefined; i++) {
      // The server may not have seen the close yet: retry a refused attempt.
      answered = await get(a.port, '/healthz').then(
        (r) => r.status,
        () => undefined,
      );
      if (answered === undefined) await sleep(100);
    }
    expect(answered).toBe(200);
  });
});

describe('admin /metrics', () => {
  it('serves concurrent scrapes one exposition, built once', async () => {
    let builds = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const a = await admin(
      {
        ready,
        metrics: async () => {
          const n = ++builds;
          await gate;
          return { contentType: 'text/plain; version=0.0.4', body: `build ${n} ${'x'.repeat(100_000)}\n` };
        },
      },
      { timeoutMs: 30_000, maxConnections: 128 },
    );
    const n = 20;
    let sent = 0;
    const answers = Array.from(
      { length: n },
      () =>
        new Promise<{ status: number; body: string }>((resolve, reject) => {
          const req = request({ host: '127.0.0.1', port: a.port, path: '/metrics', agent: false }, (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (d: string) => (body += d));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          });
          req.setTimeout(20_000, () => req.destroy(new Error('no answer')));
          req.on('error', reject);
          req.on('finish', () => sent++);
          req.end();
        }),
    );
    await until(
      () => sent === n,
      10_000,
      () => `${sent} of ${n} requests sent`,
    );
    // Every request is in the server's socket buffers now; let it read them before the build ends.
    await sleep(300);
    release();
    const got = await Promise.all(answers);
    expect(got.map((g) => g.status)).toEqual(Array<number>(n).fill(200));
    expect(new Set(got.map((g) => g.body)).size).toBe(1);
    expect(got[0]!.body.startsWith('build 1 ')).toBe(true);
    expect(builds).toBe(1);
  });

  it('answers each scrape after the last one ended with a new exposition, after a failed build too', async () => {
    let builds = 0;
    const a = await admin(
      {
        ready,
        metrics: () => {
          builds++;
          if (builds === 1) throw new Error('sampling failed');
          return Promise.resolve({ contentType: 'text/plain', body: `build ${builds}\n` });
        },
      },
      { timeoutMs: 30_000, maxConnections: 128 },
    );
    expect((await get(a.port, '/metrics')).status).toBe(500);
    expect(await get(a.port, '/metrics')).toEqual({ status: 200, body: 'build 2\n' });
    // A change made between two scrapes shows in the second.
    expect(await get(a.port, '/metrics')).toEqual({ status: 200, body: 'build 3\n' });
  });

  it('starts a build no sooner than ten times the last one took after it, at most a second', async () => {
    const starts: number[] = [];
    const ends: number[] = [];
    const a = await admin(
      {
        ready,
        metrics: async () => {
          starts.push(performance.now());
          await sleep(150); // a build of 150 ms: the next waits the full second
          ends.push(performance.now());
          return { contentType: 'text/plain', body: `build ${starts.length}\n` };
        },
      },
      { timeoutMs: 30_000, maxConnections: 128 },
    );
    expect((await get(a.port, '/metrics')).body).toBe('build 1\n');
    expect((await get(a.port, '/metrics')).body).toBe('build 2\n');
    // A lower bound only (a busy machine makes it longer); a little slack for timer rounding.
    expect(starts[1]! - ends[0]!).toBeGreaterThanOrEqual(900);
  });
});

describe('session gauges', () => {
  let edge: TestEdge | undefined;
  afterEach(async () => {
    await edge?.close();
    edge = undefined;
  });

  it('label a stored session naming a route this edge does not have with "(unknown)", not its route', async () => {
    // No world is dialled: the session's record is as the store (another replica, or a hostile writer) left it.
    edge = await startEdge([{ path: '/arm', name: 'arm', upstream: 'ws://127.0.0.1:9/' }]);
    const registry = edge.edge.ctx.registry;
    const record: RelaySessionRecord = {
      edge_token: 'edge-token-of-a-foreign-session-0123456789',
      route: 'attacker-chosen-route-7f3a',
      upstream_token: 'upstream-token-0123456789',
      session_id: 'sess-1',
      mode: 'streaming',
      reconnect_window_ms: 60_000,
      heartbeat_interval_ms: 5_000,
      agent_ack: 0,
      suspended_at_ms: 1,
    };
    // Held in memory as a replica holds a resumed one (however it got there: the gauges must not trust it).
    const journal = new ReplayJournal(0, [
      { status_seq: 1, text: '{"a":1}' },
      { status_seq: 2, text: '{"a":2}' },
    ]);
    await registry.created(new RelaySession(record, journal));
    const text = await (await fetch(`${edge.adminUrl}/metrics`)).text();
    expect(text).not.toContain('attacker-chosen');
    expect(text).toContain('awp_edge_sessions{route="(unknown)",kind="relay",state="suspended"} 1');
    expect(text).toContain('awp_edge_journal_entries{route="(unknown)"} 2');
    // The configured route keeps its own (empty) series.
    expect(text).toContain('awp_edge_sessions{route="arm",kind="relay",state="suspended"} 0');
  });
});
