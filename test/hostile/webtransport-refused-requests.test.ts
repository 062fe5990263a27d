/**
 * The WebTransport listener's HTTP/2 connections stay under the handshake limits (timeout, caps per
 * listener and per address) until a session is accepted on them. A refused request (a plain GET the
 * library answers 406, a session request with a bad token answered 401) does not take its connection
 * out of them: it is ended (GOAWAY), as a refused upgrade is on the `ws` listener. Before, any request
 * released the connection, and http2 has no idle timeout: refused connections stayed open for good.
 */
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoWorld, type RunningDemoWorld } from '../../src/demo/index.js';
import { AwpClient, initializeParams } from '../support/awp-client.js';
import { AGENT_TOKEN } from '../support/edge.js';
import { sleep, startWtEdge, until, withTimeout, WtAgent, type WtEdge } from '../webtransport/support.js';

const HANDSHAKE_TIMEOUT_MS = 1000;
const PER_ADDRESS = 8;
const CONNECTIONS = 20;

let world: RunningDemoWorld;
let edge: WtEdge;
const controls: AwpClient[] = [];

beforeAll(async () => {
  world = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0 });
  edge = await startWtEdge([{ path: '/arm', upstream: world.url }], {
    transport: {
      handshake_timeout_ms: HANDSHAKE_TIMEOUT_MS,
      max_pending_handshakes_per_address: PER_ADDRESS,
    },
  });
});

afterAll(async () => {
  for (const c of controls) c.close();
  await edge.close();
  await world.close();
});

/** An observer's session: its session token and the webtransport endpoint's URL. */
async function observer(): Promise<{ token: string; wt: string }> {
  const control = await AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN });
  controls.push(control);
  await control.ok('initialize', initializeParams());
  const ready = await control.ok('session.open', {
    mode: 'streaming',
    subscribe: [{ channel: 'proprio' }],
  });
  const endpoints = ready.stream_endpoints as { binding: string; url?: string }[];
  return {
    token: ready.session_token as string,
    wt: endpoints.find((e) => e.binding === 'webtransport')!.url!,
  };
}

/** Opens an HTTP/2 connection and makes one request on it; resolves with its status (0: none came). */
async function oneRequest(
  origin: string,
  headers: http2.OutgoingHttpHeaders,
): Promise<{ session: http2.ClientHttp2Session; status: number; request?: http2.ClientHttp2Stream }> {
  const session = http2.connect(origin, { rejectUnauthorized: false });
  session.on('error', () => undefined);
  // Extended CONNECT may be sent only once the server's SETTINGS allowed it (RFC 8441).
  await withTimeout(
    new Promise<void>((resolve) => {
      session.once('remoteSettings', () => resolve());
      session.once('close', () => resolve());
    }),
    10_000,
    'the server SETTINGS',
  );
  if (session.closed || session.destroyed) return { session, status: 0 };
  const request = session.request(headers, { endStream: headers[':method'] !== 'CONNECT' });
  request.on('error', () => undefined);
  const status = await withTimeout(
    new Promise<number>((resolve) => {
      request.once('response', (h) => resolve(Number(h[':status'])));
      request.once('close', () => resolve(0));
    }),
    10_000,
    'the response',
  );
  return { session, status, request };
}

describe('webtransport listener: refused requests', () => {
  it('a connection whose request was refused is closed, not released from the handshake limits', async () => {
    const { wt } = await observer();
    const u = new URL(wt);
    const origin = `https://${u.host}`;
    const opened: { session: http2.ClientHttp2Session; status: number }[] = [];
    try {
      for (let i = 0; i < CONNECTIONS; i++) {
        const headers: http2.OutgoingHttpHeaders =
          i % 2 === 0
            ? { ':method': 'GET', ':path': '/nothing' }
            : {
                ':method': 'CONNECT',
                ':protocol': 'webtransport',
                ':scheme': 'https',
                ':path': u.pathname,
                ':authority': u.host,
                'wt-available-protocols': '"awp", "awp.bearer.made-up-token"',
              };
        opened.push(await oneRequest(origin, headers));
      }
      // Within the per-address cap, each connection got its answer before anything could close it: the
      // edge's 401, and the library's 406 to a plain GET (on Node 24 it resets that stream instead: 0).
      for (const o of opened.slice(0, PER_ADDRESS)) expect([406, 401, 0]).toContain(o.status);
      expect(opened.filter((o, i) => i % 2 === 1 && o.status === 401).length).toBeGreaterThan(0);
      // Every one ends: at once (GOAWAY), or at worst at the handshake timeout. Before, all stayed open.
      await until(
        () => opened.every((o) => o.session.closed || o.session.destroyed),
        20_000,
        `every refused connection to close (${opened.filter((o) => !o.session.destroyed).length} open)`,
      );
    } finally {
      for (const o of opened) o.session.destroy();
    }
  }, 90_000);

  it('an accepted session is out of the handshake limits: it outlives the handshake timeout', async () => {
    const o = await observer();
    const agent = await WtAgent.connect(o.wt, o.token, edge.cert.hash, 10_000);
    try {
      await sleep(HANDSHAKE_TIMEOUT_MS * 3);
      expect(agent.closeInfo).toBeNull();
      // Still carrying frames.
      const before = [...agent.frames.values()].reduce((n, l) => n + l.length, 0);
      await until(
        () => [...agent.frames.values()].reduce((n, l) => n + l.length, 0) > before,
        10_000,
        'more frames on the session',
      );
      expect(agent.closeInfo).toBeNull();
    } finally {
      agent.close();
    }
  }, 60_000);

  it('a connection whose session ended is closed (GOAWAY), not kept out of the handshake limits for good', async () => {
    const { token, wt } = await observer();
    const u = new URL(wt);
    const { session, status, request } = await oneRequest(`https://${u.host}`, {
      ':method': 'CONNECT',
      ':protocol': 'webtransport',
      ':scheme': 'https',
      ':path': u.pathname,
      ':authority': u.host,
      'wt-available-protocols': `"awp", "awp.bearer.${token}"`,
    });
    try {
      expect(status).toBe(200);
      await sleep(HANDSHAKE_TIMEOUT_MS * 2); // accepted: out of the handshake limits, still open
      expect(session.closed || session.destroyed).toBe(false);
      request!.close(); // the session ends
      await until(() => session.closed || session.destroyed, 20_000, 'the connection to close');
    } finally {
      session.destroy();
    }
  }, 60_000);
});
