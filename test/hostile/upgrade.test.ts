/**
 * Hostile HTTP clients at the upgrade (issue 12): credentials in URLs (AWP-SEC-006), Origin policy,
 * Host headers that are not an authority, and sockets that never finish a handshake. Raw sockets, so
 * every byte is the test's; the edge must answer with plain HTTP and keep serving everyone else.
 */
import http2 from 'node:http2';
import WebSocket from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, validateConfig } from '../../src/config/load.js';
import { MAX_URL_CHARS, MAX_URL_SEGMENTS } from '../../src/edge/upgrade-decision.js';
import { AwpClient, initializeParams, type Json } from '../support/awp-client.js';
import { AGENT_TOKEN } from '../support/edge.js';
import { startWtEdge, withTimeout, type WtEdge } from '../webtransport/support.js';
import {
  agentOn,
  captureLogs,
  clientTextFrame,
  metric,
  pingOk,
  rawRequest,
  rawSocket,
  scrape,
  series,
  serverTexts,
  sessionOn,
  sleep,
  startRig,
  until,
  upgradeHead,
  type HostileRig,
  type RawSocket,
} from './support.js';
import { HostileWorld } from './world.js';

let rig: HostileRig | undefined;
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await rig?.close();
  rig = undefined;
});

function hostOf(r: HostileRig): string {
  return `127.0.0.1:${r.edge.edge.port}`;
}

async function status(
  r: HostileRig,
  path: string,
  extra: string[] = [],
  credential: string | null = AGENT_TOKEN,
): Promise<number> {
  const x = await rawRequest(r.edge.edge.port, upgradeHead(path, hostOf(r), extra, credential));
  x.raw.socket.destroy();
  return x.status;
}

/** `n` sockets that connect and never send a byte (destroyed after the test). */
async function idleSockets(port: number, n: number): Promise<RawSocket[]> {
  const socks = await Promise.all(Array.from({ length: n }, () => rawSocket(port)));
  cleanups.push(() => socks.forEach((s) => s.socket.destroy()));
  return socks;
}

/**
 * Five idle sockets, then a sixth: the sixth is closed at once (long before a 10 s handshake timeout could
 * close it) and counted with `reason`, the five stay open. Returns the five.
 */
async function sixthClosedAtOnce(r: HostileRig, reason: string): Promise<RawSocket[]> {
  const port = r.edge.edge.port;
  const five = await idleSockets(port, 5);
  await sleep(200);
  const sixth = await rawSocket(port);
  cleanups.push(() => void sixth.socket.destroy());
  await until(() => sixth.closedAt !== null, 3000, 'the 6th socket to be closed');
  expect(five.filter((s) => s.closedAt !== null)).toHaveLength(0);
  const metrics = await scrape(r.edge);
  expect(
    metric(metrics, 'awp_edge_handshakes_closed_total', { listener: 'agent', reason }),
    series(metrics, 'awp_edge_handshakes_closed_total'),
  ).toBe(1);
  return five;
}

function allClosed(socks: readonly RawSocket[]): boolean {
  return socks.every((s) => s.closedAt !== null);
}

describe('AWP-SEC-006: credentials in URLs', () => {
  it('AWP-SEC-006: a valid credential in the query under any name, any query at all, or a credential in the path is refused 400, never echoed or logged', async () => {
    const { log, lines } = captureLogs();
    rig = await startRig({}, { log });
    const r = rig;
    const port = r.edge.edge.port;
    const cases: { url: string; reason: string }[] = [
      ...['t', 'jwt', 'credentials', 'x', 'token'].map((name) => ({
        url: `/w?${name}=${AGENT_TOKEN}`,
        reason: 'credential_in_url',
      })),
      { url: `/w?a=1&b=${encodeURIComponent(AGENT_TOKEN)}`, reason: 'credential_in_url' },
      { url: '/w?debug=1', reason: 'query_not_allowed' },
      { url: '/w?x', reason: 'query_not_allowed' },
      { url: `/;token=${AGENT_TOKEN}`, reason: 'credential_in_url' },
      { url: `/${AGENT_TOKEN}`, reason: 'credential_in_url' },
      { url: `/w/${AGENT_TOKEN}`, reason: 'credential_in_url' },
      { url: `/w;token=${AGENT_TOKEN}`, reason: 'credential_in_url' },
    ];
    const got: string[] = [];
    for (const c of cases) {
      const x = await rawRequest(port, upgradeHead(c.url, hostOf(r)));
      const body = await x.body();
      x.raw.socket.destroy();
      got.push(`${c.url.replace(AGENT_TOKEN, '<credential>')} -> ${x.status}`);
      expect(x.head + body, c.url).not.toContain(AGENT_TOKEN);
    }
    expect(got).toEqual(cases.map((c) => `${c.url.replace(AGENT_TOKEN, '<credential>')} -> 400`));
    const metrics = await scrape(r.edge);
    const rejections = series(metrics, 'awp_edge_rejections_total');
    expect(metric(metrics, 'awp_edge_rejections_total', { reason: 'credential_in_url' }), rejections).toBe(
      cases.filter((c) => c.reason === 'credential_in_url').length,
    );
    expect(metric(metrics, 'awp_edge_rejections_total', { reason: 'query_not_allowed' }), rejections).toBe(
      cases.filter((c) => c.reason === 'query_not_allowed').length,
    );
    // No log line carries the credential; the refusals are logged with the path redacted.
    await sleep(50);
    expect(lines.filter((l) => l.includes(AGENT_TOKEN))).toEqual([]);
    const refusals = lines
      .map((l) => JSON.parse(l) as Json)
      .filter((l) => l.event === 'connection_refused' && l.reason === 'credential_in_url');
    expect(refusals.length).toBe(cases.filter((c) => c.reason === 'credential_in_url').length);
    // The field's name is the edge's choice (path or url); its value is the redacted form.
    for (const l of refusals) expect(String(l.url ?? l.path)).toMatch(/\[redacted:sha256:[0-9a-f]{8}\]/);
    await pingOk(r.bystander);
  }, 20_000);

  it("AWP-SEC-006: a minted session token in the query of a stream endpoint's URL is refused 400, never echoed or logged", async () => {
    const { log, lines } = captureLogs();
    rig = await startRig({}, { log });
    const r = rig;
    const { agent, ready } = await sessionOn(r.edge, '/w');
    cleanups.push(() => agent.close());
    const token = ready.session_token as string;
    const ws = (ready.stream_endpoints as { binding: string; url: string }[]).find(
      (e) => e.binding === 'ws',
    )!;
    const path = new URL(ws.url).pathname;
    for (const q of [`?token=${token}`, `?s=${token}`, '?x=1']) {
      const x = await rawRequest(r.edge.edge.port, upgradeHead(`${path}${q}`, hostOf(r), [], token));
      const body = await x.body();
      x.raw.socket.destroy();
      expect(x.status, q.replace(token, '<token>')).toBe(400);
      expect(x.head + body).not.toContain(token);
    }
    // The same endpoint without a query is the positive control.
    const s = await AwpClient.connect(ws.url, { credential: token });
    s.close();
    expect(lines.filter((l) => l.includes(token))).toEqual([]);
    const metrics = await scrape(r.edge);
    expect(metric(metrics, 'awp_edge_rejections_total', { reason: 'credential_in_url' })).toBe(2);
    await pingOk(agent);
  }, 20_000);
});

describe('URL bounds', () => {
  it('a URL of more than MAX_URL_CHARS characters or MAX_URL_SEGMENTS segments is refused 414 before its segments are read; its log line is redacted and bounded', async () => {
    const { log, lines } = captureLogs();
    rig = await startRig({}, { log });
    const r = rig;
    const urls = [
      `/w/${'a/'.repeat(MAX_URL_CHARS / 2)}`, // long
      `/w${'/a'.repeat(MAX_URL_SEGMENTS)}`, // short, with too many segments
      `/w?${'x=1&'.repeat(MAX_URL_SEGMENTS)}`, // too many parameters
      `/w/${AGENT_TOKEN}/${'a/'.repeat(MAX_URL_CHARS / 2)}`, // a credential too: never echoed nor logged
    ];
    for (const url of urls) {
      const x = await rawRequest(r.edge.edge.port, upgradeHead(url, hostOf(r)));
      const body = await x.body();
      x.raw.socket.destroy();
      expect(x.status, url.slice(0, 40)).toBe(414);
      expect(x.head + body).not.toContain(AGENT_TOKEN);
    }
    const metrics = await scrape(r.edge);
    expect(metric(metrics, 'awp_edge_rejections_total', { reason: 'url_too_long' })).toBe(urls.length);
    await sleep(50);
    expect(lines.filter((l) => l.includes(AGENT_TOKEN))).toEqual([]);
    const refusals = lines
      .map((l) => JSON.parse(l) as Json)
      .filter((l) => l.event === 'connection_refused' && l.reason === 'url_too_long');
    expect(refusals.length).toBe(urls.length);
    for (const l of refusals) expect(String(l.url ?? l.path).length).toBeLessThan(1500);
    // The route is served as ever.
    const agent = await agentOn(r.edge, '/w');
    cleanups.push(() => agent.close());
    await pingOk(agent);
  }, 20_000);
});

describe('Origin policy', () => {
  it("a route's allowed_origins: https://evil.example -> 403, https://ok.example -> 101, no Origin -> 101", async () => {
    rig = await startRig({}, {}, { allowed_origins: ['https://ok.example'] });
    expect(await status(rig, '/w', ['Origin: https://evil.example'])).toBe(403);
    expect(await status(rig, '/w', ['Origin: null'])).toBe(403);
    expect(await status(rig, '/w', [`Origin: http://${hostOf(rig)}`])).toBe(403); // not listed
    expect(await status(rig, '/w', ['Origin: https://ok.example'])).toBe(101);
    expect(await status(rig, '/w', ['Origin: HTTPS://OK.EXAMPLE'])).toBe(101); // case-insensitive
    expect(await status(rig, '/w')).toBe(101);
    const metrics = await scrape(rig.edge);
    expect(metric(metrics, 'awp_edge_rejections_total', { reason: 'origin_not_allowed' })).toBe(3);
    await pingOk(rig.bystander);
  }, 20_000);

  it('default (no allowed_origins): a same-origin browser upgrade is accepted, a cross-site one refused 403', async () => {
    rig = await startRig();
    expect(await status(rig, '/w', [`Origin: http://${hostOf(rig)}`])).toBe(101);
    expect(await status(rig, '/w', ['Origin: https://evil.example'])).toBe(403);
    expect(await status(rig, '/w', [`Origin: http://evil.example:${rig.edge.edge.port}`])).toBe(403);
    expect(await status(rig, '/w')).toBe(101);
    await pingOk(rig.bystander);
  }, 20_000);

  it('allow_anonymous with allowed_origins: a cross-site page cannot open an anonymous connection (403), a listed origin can', async () => {
    rig = await startRig(
      {},
      {},
      { agents: { tokens: [AGENT_TOKEN], allow_anonymous: true }, allowed_origins: ['https://ok.example'] },
    );
    expect(await status(rig, '/w', ['Origin: https://evil.example'], null)).toBe(403);
    expect(await status(rig, '/w', [`Origin: http://${hostOf(rig)}`], null)).toBe(403);
    expect(await status(rig, '/w', ['Origin: https://ok.example'], null)).toBe(101);
    await pingOk(rig.bystander);
  }, 20_000);

  it('allow_anonymous without allowed_origins (or with "*") is a config error', () => {
    const config = (route: Json): unknown => ({
      listen: '127.0.0.1:0',
      admin: '127.0.0.1:0',
      routes: [
        { name: 'a', path: '/a', upstream: 'ws://127.0.0.1:9/', agents: { allow_anonymous: true }, ...route },
      ],
    });
    expect(() => validateConfig(config({}), 'test', {})).toThrow(ConfigError);
    expect(() => validateConfig(config({}), 'test', {})).toThrow(/allowed_origins/);
    expect(() => validateConfig(config({ allowed_origins: ['*'] }), 'test', {})).toThrow(ConfigError);
    // The positive control: an explicit list makes anonymous agents acceptable (on loopback).
    expect(() =>
      validateConfig(config({ allowed_origins: ['https://ok.example'] }), 'test', {}),
    ).not.toThrow();
  });
});

describe('Host header without public_url (webtransport configured)', () => {
  let wt: WtEdge | undefined;
  let world: HostileWorld | undefined;
  afterEach(async () => {
    await wt?.close();
    await world?.close();
    wt = undefined;
    world = undefined;
  });

  async function wtRig(
    extra: Record<string, unknown> = {},
  ): Promise<{ wt: WtEdge; world: HostileWorld; bystander: AwpClient; ready: Json }> {
    world = await HostileWorld.start();
    wt = await startWtEdge([{ path: '/w', upstream: world.url, name: 'w' }], extra);
    const bystander = await agentOn(wt, '/w');
    const ready = await bystander.ok('session.open', { embodiment: 'e1', mode: 'streaming' });
    cleanups.push(() => bystander.close());
    return { wt, world, bystander, ready };
  }

  /** The edge's WebTransport stream endpoint in a session.ready. */
  function wtEndpoint(ready: Json): URL {
    const e = (ready.stream_endpoints as { binding: string; url: string }[]).find(
      (x) => x.binding === 'webtransport',
    );
    if (e === undefined)
      throw new Error(`no webtransport endpoint in ${JSON.stringify(ready.stream_endpoints)}`);
    return new URL(e.url);
  }

  /**
   * An extended CONNECT (WebTransport over HTTP/2) with the given :authority; resolves with its :status, or
   * 'reset' when the stream is reset before a response (nghttp2 itself resets an :authority it finds invalid).
   */
  async function wtConnect(
    url: URL,
    authority: string,
    token: string,
    ca: string,
  ): Promise<number | 'reset'> {
    const session = http2.connect(`https://${url.host}`, { ca });
    session.on('error', () => undefined);
    try {
      await withTimeout(
        new Promise<void>((resolve) => session.once('remoteSettings', () => resolve())),
        5000,
        'SETTINGS from the WebTransport listener',
      );
      const req = session.request(
        {
          ':method': 'CONNECT',
          ':protocol': 'webtransport',
          ':scheme': 'https',
          ':path': url.pathname,
          ':authority': authority,
          'wt-available-protocols': '"awp"',
          authorization: `Bearer ${token}`,
        },
        { endStream: false },
      );
      return await withTimeout(
        new Promise<number | 'reset'>((resolve) => {
          req.once('response', (h) => resolve(Number(h[':status'])));
          req.once('error', () => resolve('reset'));
          req.once('close', () => resolve('reset'));
        }),
        5000,
        'the response to the CONNECT',
      );
    } finally {
      session.destroy();
    }
  }

  it('the WebTransport listener: a CONNECT whose :authority is not a valid authority is refused (400, or reset by HTTP/2 itself), a valid one accepted', async () => {
    const r = await wtRig();
    const url = wtEndpoint(r.ready);
    const token = r.ready.session_token as string;
    const outcomes: string[] = [];
    for (const authority of ['a b', 'h:p', '[::1', '127.0.0.1:99999', '%zz', 'a@b'])
      outcomes.push(`${authority} -> ${await wtConnect(url, authority, token, r.wt.cert.cert)}`);
    const bad = outcomes.filter((o) => !/ -> (400|reset)$/.test(o));
    expect(bad, outcomes.join('; ')).toEqual([]);
    const metrics = await scrape(r.wt);
    expect(metric(metrics, 'awp_edge_rejections_total', { reason: 'bad_host' })).toBe(
      outcomes.filter((o) => o.endsWith('-> 400')).length,
    );
    await pingOk(r.bystander);
    expect(await wtConnect(url, url.host, token, r.wt.cert.cert)).toBe(200);
    console.log(`WebTransport CONNECT outcomes: ${outcomes.join('; ')}`);
  }, 30_000);

  it('the WebTransport listener: idle sockets are closed at handshake_timeout_ms and counted (listener="webtransport")', async () => {
    const r = await wtRig({ transport: { handshake_timeout_ms: 500 } });
    const port = Number(wtEndpoint(r.ready).port);
    const idle = await idleSockets(port, 5);
    await until(
      () => allClosed(idle),
      8000,
      () =>
        `idle WebTransport sockets to be closed (${idle.filter((s) => s.closedAt === null).length} of 5 open)`,
    );
    const metrics = await scrape(r.wt);
    expect(
      metric(metrics, 'awp_edge_handshakes_closed_total', { listener: 'webtransport', reason: 'timeout' }),
      series(metrics, 'awp_edge_handshakes_closed_total'),
    ).toBeGreaterThanOrEqual(5);
    await pingOk(r.bystander);
  }, 20_000);

  it('an upgrade with Host "a b" is refused 400 and the edge keeps serving', async () => {
    const r = await wtRig();
    const x = await rawRequest(r.wt.edge.port, upgradeHead('/w', 'a b'));
    x.raw.socket.destroy();
    expect(x.status).toBe(400);
    const metrics = await scrape(r.wt);
    expect(metric(metrics, 'awp_edge_rejections_total', { reason: 'bad_host' })).toBe(1);
    await pingOk(r.bystander);
    const fresh = await sessionOn(r.wt, '/w');
    await pingOk(fresh.agent);
    fresh.agent.close();
  }, 20_000);

  it('session.open over a connection whose Host is not a valid authority never crashes the edge (refused, or answered with valid URLs)', async () => {
    const r = await wtRig();
    const outcomes: string[] = [];
    for (const host of ['a b', '[::1', 'a@b', '127.0.0.1:99999', 'x/y', '%zz', 'h:p']) {
      const x = await rawRequest(r.wt.edge.port, upgradeHead('/w', host));
      if (x.status !== 101) {
        outcomes.push(`${host}: ${x.status}`);
        x.raw.socket.destroy();
        continue;
      }
      // Accepted: talk AWP over the raw socket and see that session.open gets an answer, not a crash.
      x.raw.received.length = 0;
      x.raw.socket.write(
        clientTextFrame(
          JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: initializeParams() }),
        ),
      );
      x.raw.socket.write(
        clientTextFrame(
          JSON.stringify({
            jsonrpc: '2.0',
            id: 2,
            method: 'session.open',
            params: { embodiment: 'e1', mode: 'streaming' },
          }),
        ),
      );
      let answered: Json | undefined;
      await until(
        () => {
          const { texts, closeCode } = serverTexts(Buffer.concat(x.raw.received));
          answered = texts.map((t) => JSON.parse(t) as Json).find((m) => m.id === 2);
          return answered !== undefined || closeCode !== undefined || x.raw.closedAt !== null;
        },
        10_000,
        `an answer to session.open with Host ${host}`,
      );
      const endpoints = ((answered?.result as Json | undefined)?.stream_endpoints ?? []) as {
        url?: string;
      }[];
      for (const e of endpoints) if (e.url !== undefined) expect(() => new URL(e.url!), e.url).not.toThrow();
      outcomes.push(
        `${host}: 101 then ${answered?.error !== undefined ? 'error' : answered !== undefined ? 'result' : 'closed'}`,
      );
      x.raw.socket.destroy();
      await pingOk(r.bystander);
    }
    // Without public_url, an invalid authority must not be used to build URLs: "a b" is refused outright.
    expect(outcomes[0]).toBe('a b: 400');
    console.log(`agent listener Host outcomes: ${outcomes.join('; ')}`);
    await pingOk(r.bystander);
  }, 30_000);
});

// Both engines: `ws` through node:net's sockets, uWebSockets.js through its filter hook (uws-handshake.ts).
describe('handshake limits before authentication', () => {
  it('20 sockets that never send a byte are closed by the edge (handshake_timeout_ms 500); a legitimate agent connects meanwhile', async () => {
    rig = await startRig({ transport: { handshake_timeout_ms: 500 } });
    const r = rig;
    const port = r.edge.edge.port;
    const idle = await idleSockets(port, 20);
    const legit = await agentOn(r.edge, '/w');
    cleanups.push(() => legit.close());
    await pingOk(legit);
    await until(
      () => allClosed(idle),
      8000,
      () => `idle sockets to be closed (${idle.filter((s) => s.closedAt === null).length} of 20 still open)`,
    );
    // The legitimate agent outlives them: an upgraded connection is not subject to the handshake timeout.
    await sleep(600);
    await pingOk(legit);
    const metrics = await scrape(r.edge);
    expect(
      metric(metrics, 'awp_edge_handshakes_closed_total', { listener: 'agent', reason: 'timeout' }),
      series(metrics, 'awp_edge_handshakes_closed_total'),
    ).toBeGreaterThanOrEqual(20);
    await pingOk(r.bystander);
  }, 20_000);

  it('only sockets that never sent a request time out: upgraded agents (staying or gone), refused upgrades and plain requests are not touched, and the edge keeps serving after the timeout', async () => {
    rig = await startRig({ transport: { handshake_timeout_ms: 1500 } });
    const r = rig;
    const port = r.edge.edge.port;
    const idle = await idleSockets(port, 3);
    const agents = await Promise.all(Array.from({ length: 6 }, () => agentOn(r.edge, '/w')));
    cleanups.push(() => agents.forEach((a) => a.close()));
    for (const a of agents.slice(3)) a.close(); // gone before the timeout
    for (let i = 0; i < 4; i++) expect(await status(r, '/w', [], 'not-a-credential')).toBe(401);
    for (let i = 0; i < 3; i++) {
      const x = await rawRequest(port, ['GET /healthz HTTP/1.1', `Host: ${hostOf(r)}`]);
      x.raw.socket.destroy();
    }
    await until(() => allClosed(idle), 8000, 'the idle sockets to be closed');
    await sleep(1800); // past the timeout of every socket above
    for (const a of agents.slice(0, 3)) await pingOk(a);
    await pingOk(r.bystander);
    const metrics = await scrape(r.edge);
    expect(
      metric(metrics, 'awp_edge_handshakes_closed_total', { listener: 'agent', reason: 'timeout' }),
      series(metrics, 'awp_edge_handshakes_closed_total'),
    ).toBe(3);
  }, 30_000);

  it('a slowloris socket (a partial header, one more line every 100 ms) is closed at handshake_timeout_ms', async () => {
    rig = await startRig({ transport: { handshake_timeout_ms: 500 } });
    const r = rig;
    const s = await rawSocket(r.edge.edge.port);
    cleanups.push(() => void s.socket.destroy());
    s.socket.write(`GET /w HTTP/1.1\r\nHost: ${hostOf(r)}\r\n`);
    const started = Date.now();
    let n = 0;
    const drip = setInterval(() => {
      if (s.closedAt === null) s.socket.write(`X-Drip-${n++}: ${'a'.repeat(8)}\r\n`);
    }, 100);
    try {
      await until(() => s.closedAt !== null, 8000, 'the slowloris socket to be closed');
    } finally {
      clearInterval(drip);
    }
    // Closed by the timeout, not by a header limit: it had sent only a few hundred bytes.
    expect(n * 20).toBeLessThan(8192);
    expect(s.closedAt! - started).toBeLessThan(8000);
    await pingOk(r.bystander);
  }, 20_000);

  it('max_pending_handshakes_per_address 5: a 6th idle socket is closed at once and counted; an agent from another address connects', async () => {
    rig = await startRig({
      transport: { handshake_timeout_ms: 10_000, max_pending_handshakes_per_address: 5 },
    });
    const r = rig;
    await sixthClosedAtOnce(r, 'address_limit');
    // Another source address (127.0.0.2 is loopback too) is not held back by 127.0.0.1's cap.
    const other = new WebSocket(r.edge.url('/w'), ['awp'], {
      headers: { authorization: `Bearer ${AGENT_TOKEN}` },
      localAddress: '127.0.0.2',
      handshakeTimeout: 5000,
    });
    cleanups.push(() => other.terminate());
    const answer = await new Promise<Json>((resolve, reject) => {
      other.once('error', reject);
      other.once('open', () =>
        other.send(
          JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: initializeParams() }),
        ),
      );
      other.on('message', (d: Buffer) => {
        const m = JSON.parse(d.toString()) as Json;
        if (m.id === 1) resolve(m);
      });
    });
    expect(answer.result).toBeDefined();
    await pingOk(r.bystander);
  }, 20_000);

  it('max_pending_handshakes 5 per listener: a 6th idle socket is closed at once and counted (listener_limit)', async () => {
    rig = await startRig({ transport: { handshake_timeout_ms: 10_000, max_pending_handshakes: 5 } });
    const r = rig;
    const five = await sixthClosedAtOnce(r, 'listener_limit');
    // Once the idle ones are gone, agents connect again.
    five.forEach((s) => s.socket.destroy());
    await sleep(100);
    const a = await agentOn(r.edge, '/w');
    await pingOk(a);
    a.close();
  }, 20_000);
});
