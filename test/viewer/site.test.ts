/**
 * The viewer's HTTP side on the agent listener (CI runs it per engine): served only when `viewer.enabled`,
 * same answers on both engines, no query strings (AWP-SEC-006), a strict content security policy, and a stats
 * document with the edge's figures and nothing secret. Plus the quantile arithmetic behind p50/p99.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoWorld, type RunningDemoWorld } from '../../src/demo/index.js';
import { quantiles } from '../../src/viewer/stats.js';
import { AGENT_TOKEN, startEdge, type TestEdge } from '../support/edge.js';

const get = (url: string, init: RequestInit = {}) => fetch(url, { redirect: 'manual', ...init });

describe('the viewer on the agent listener', () => {
  let world: RunningDemoWorld | undefined;
  let on: TestEdge | undefined;
  let off: TestEdge | undefined;
  let base = '';

  beforeAll(async () => {
    world = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0 });
    const routes = [{ name: 'arm', path: '/worlds/arm', upstream: world.url }];
    on = await startEdge(routes, { viewer: { enabled: true } });
    off = await startEdge(routes);
    base = `http://127.0.0.1:${on.edge.port}`;
  });

  afterAll(async () => {
    await on?.close();
    await off?.close();
    await world?.close();
  });

  it('serves the page, its scripts and uPlot from node_modules, with a strict policy', async () => {
    const page = await get(`${base}/viewer/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toMatch(/script-src 'self'.*connect-src 'self'/);
    expect(page.headers.get('content-security-policy')).toMatch(/frame-ancestors 'none'/);
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await page.text()).toContain('<script type="module" src="viewer.js">');
    for (const [file, type] of [
      ['viewer.js', /javascript/],
      ['client.js', /javascript/],
      ['draw.js', /javascript/],
      ['viewer.css', /css/],
      ['uplot.min.js', /javascript/],
      ['uplot.min.css', /css/],
    ] as const) {
      const r = await get(`${base}/viewer/${file}`);
      expect(r.status, file).toBe(200);
      expect(r.headers.get('content-type'), file).toMatch(type);
      expect((await r.arrayBuffer()).byteLength, file).toBeGreaterThan(100);
    }
    const root = await get(`${base}/`);
    expect(root.status).toBe(302);
    expect(root.headers.get('location')).toBe('/viewer/');
  });

  it('refuses queries, other methods and unknown files; other paths keep the 426', async () => {
    const q = await get(`${base}/viewer/?token=${AGENT_TOKEN}`);
    expect(q.status).toBe(400);
    expect(await q.text()).not.toContain(AGENT_TOKEN);
    expect((await get(`${base}/viewer/stats.json?x=1`)).status).toBe(400);
    expect((await get(`${base}/viewer/`, { method: 'POST', body: 'x' })).status).toBe(405);
    expect((await get(`${base}/viewer/../package.json`)).status).not.toBe(200);
    expect((await get(`${base}/viewer/nothing.js`)).status).toBe(404);
    expect((await get(`${base}/worlds/arm`)).status).toBe(426);
    const disabled = `http://127.0.0.1:${off!.edge.port}`;
    expect((await get(`${disabled}/viewer/`)).status).toBe(426);
    expect((await get(`${disabled}/`)).status).toBe(426);
  });

  it('stats.json: routes, per-channel figures and sessions; no credential', async () => {
    // An observer through the edge, so the hub forwards frames and the figures fill in.
    const { default: WebSocket } = await import('ws');
    const ws = new WebSocket(`ws://127.0.0.1:${on!.edge.port}/worlds/arm`, [
      'awp',
      `awp.bearer.${AGENT_TOKEN}`,
    ]);
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const send = (id: number, method: string, params: object) =>
      ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    send(1, 'initialize', {
      protocol_versions: ['0.1'],
      agent: { name: 't', version: '0' },
      consumes_modalities: ['proprio/json'],
    });
    send(2, 'session.open', { mode: 'streaming', subscribe: [{ channel: 'proprio' }] });
    interface Doc {
      routes: {
        name: string;
        path: string;
        channels: Record<string, { forward: { p50_ms: number | null; n: number } }>;
        sessions: Record<string, number>;
      }[];
    }
    let doc: Doc | undefined;
    for (const end = Date.now() + 15_000; Date.now() < end;) {
      await new Promise((r) => setTimeout(r, 500));
      const r = await get(`${base}/viewer/stats.json`);
      expect(r.headers.get('cache-control')).toBe('no-store');
      const text = await r.text();
      expect(text).not.toContain(AGENT_TOKEN);
      expect(text).not.toContain(world!.url); // upstream addresses stay inside
      doc = JSON.parse(text) as Doc;
      if ((doc.routes[0]?.channels.proprio?.forward.n ?? 0) > 0) break;
    }
    ws.close();
    const arm = doc!.routes[0]!;
    expect(arm.name).toBe('arm');
    expect(arm.path).toBe('/worlds/arm');
    expect(arm.channels.proprio!.forward.p50_ms).toBeGreaterThan(0);
    expect(arm.sessions['observer/attached']).toBe(1);
  });
});

describe('quantiles between cumulative histogram snapshots', () => {
  const le = [0.001, 0.01, 0.1, Infinity];
  it('interpolates within the bucket of each rank, over the observations since the earlier snapshot', () => {
    // 100 observations in (1 ms, 10 ms] since `before`; 50 older ones below 1 ms do not count.
    const q = quantiles({ le, counts: [50, 150, 150, 150] }, { le, counts: [50, 50, 50, 50] });
    expect(q.n).toBe(100);
    expect(q.p50_ms).toBeCloseTo(5.5, 6);
    expect(q.p99_ms).toBeCloseTo(9.91, 6);
  });
  it('has no figures without observations, and caps the +Inf bucket at the last bound', () => {
    expect(quantiles(undefined, undefined)).toEqual({ p50_ms: null, p99_ms: null, n: 0 });
    expect(quantiles({ le, counts: [0, 0, 0, 0] }, undefined).p50_ms).toBeNull();
    expect(quantiles({ le, counts: [0, 0, 0, 10] }, undefined).p99_ms).toBe(100);
  });
});
