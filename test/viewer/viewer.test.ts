/**
 * The live viewer in a real browser (Debian's Chromium via playwright-core): `awp-edge demo` in process (the
 * demo worlds, the demo agents moving them, the edge serving the viewer), the page opened at the URL the
 * banner prints (the credential in the fragment). The camera picture is drawn and changes, the plots move,
 * the edge's latency figures show; after a drop the page resumes its sessions, and after the edge restarts
 * on the same port it reconnects and watches again. Screenshots are kept in a temporary directory.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemo, type RunningDemo } from '../../src/cli/demo.js';
import type { EdgeConfig } from '../../src/config/schema.js';
import { Edge } from '../../src/edge/edge.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { CHROMIUM_PATH, chromiumAvailable, launchChromium, type TestBrowser } from '../browser/chromium.js';

interface RouteModel {
  status: string;
  world: string | null;
  channels: Record<string, number>;
  client: { connects: number; opens: number; resumes: number; resumeRefused: number; drops: number };
  stats?: { channels: Record<string, { forward: { p50_ms: number | null } }> };
}
/** The few DOM parts the tests read, seen from the test's Node typings (no DOM lib). */
interface PageDocument {
  document: {
    querySelector(selector: string): {
      width: number;
      height: number;
      getContext(kind: '2d'): {
        getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray };
      };
    } | null;
  };
}
interface ViewerGlobals {
  awpViewer?: { routes: Record<string, RouteModel>; statsUpdates: number; frames: number };
}

/**
 * A digest of a canvas's pixels, and how many distinct grey levels it shows (1: a uniform fill). The first
 * row is left out: the demo camera stamps its capture number into the first pixels, which would make every
 * frame differ even when nothing moves.
 */
async function canvasDigest(page: Page, selector: string): Promise<{ hash: number; levels: number }> {
  return page.evaluate((sel) => {
    const c = (globalThis as unknown as PageDocument).document.querySelector(sel);
    if (c === null || c.width === 0) return { hash: 0, levels: 0 };
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let hash = 2166136261;
    const levels = new Set<number>();
    for (let i = c.width * 4; i < d.length; i += 4) {
      hash = Math.imul(hash ^ d[i]!, 16777619) >>> 0;
      levels.add(d[i]!);
    }
    return { hash, levels: levels.size };
  }, selector);
}

/**
 * A new edge on the old port, at the first attempt: both engines listen with SO_REUSEADDR (uSockets sets it
 * only for a port it is given, so the uWS engine picks the port for `:0` itself), and the connections the
 * old edge closed, still in TIME_WAIT, do not keep the port (test/transport/engine-lifecycle.test.ts).
 */
async function restartOn(config: EdgeConfig, port: number): Promise<Edge> {
  return Edge.start({ ...config, listen: { ...config.listen, port } }, { log: createLogger('silent') });
}

/** Whether a canvas's picture changes within `ms`. */
async function changes(page: Page, selector: string, ms: number): Promise<boolean> {
  const first = await canvasDigest(page, selector);
  for (const end = Date.now() + ms; Date.now() < end;) {
    await new Promise((r) => setTimeout(r, 250));
    if ((await canvasDigest(page, selector)).hash !== first.hash) return true;
  }
  return false;
}

const model = (page: Page): Promise<Record<string, RouteModel>> =>
  page.evaluate(() => (globalThis as unknown as ViewerGlobals).awpViewer!.routes);

async function waitFor(
  page: Page,
  what: string,
  pred: (r: Record<string, RouteModel>) => boolean,
  ms = 30_000,
) {
  const end = Date.now() + ms;
  let last: Record<string, RouteModel> = {};
  while (Date.now() < end) {
    last = await model(page).catch(() => ({}));
    if (pred(last)) return last;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${what}: not within ${ms} ms; viewer state ${JSON.stringify(last)}`);
}

const ARM_CAMERA = 'section[data-route="demo-arm"] canvas.camera';
const GRID_CAMERA = 'section[data-route="demo-grid"] canvas.camera';

const frames = (r: Record<string, RouteModel>, route: string, ch: string) => r[route]?.channels[ch] ?? 0;

describe.skipIf(!chromiumAvailable())('the live viewer (Chromium)', () => {
  let demo: RunningDemo | undefined;
  let edge: Edge | undefined;
  let browser: TestBrowser | undefined;
  let shots = '';
  const log: string[] = [];

  beforeAll(async () => {
    shots = await mkdtemp(join(tmpdir(), 'awp-edge-viewer-'));
    demo = await startDemo({
      listen: '127.0.0.1:0',
      admin: '127.0.0.1:0',
      engine: process.env.AWP_EDGE_ENGINE ?? 'ws',
      log_level: 'silent',
    });
    edge = demo.edge;
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await Promise.all((demo?.agents ?? []).map((a) => a.stop()));
    await edge?.close();
    for (const w of demo?.worlds ?? []) await w.close();
    console.log(`viewer screenshots in ${shots}`);
  });

  it('shows the moving camera, plots that move and the edge figures; resumes after a drop; reconnects after a restart', async ({
    onTestFailed,
  }) => {
    onTestFailed(() => console.error(['--- viewer page console', ...log].join('\n')));
    const page = await browser!.newPage(log);
    await page.setViewportSize({ width: 1400, height: 1300 });
    await page.goto(demo!.viewerUrl(true), { timeout: 15_000 });
    // The credential left the address bar at once (it stays in this tab's sessionStorage).
    expect(page.url()).toBe(demo!.viewerUrl(false));

    await waitFor(
      page,
      'live frames on both routes, edge figures',
      (r) =>
        frames(r, 'demo-arm', 'camera') >= 10 &&
        frames(r, 'demo-arm', 'proprio') >= 50 &&
        frames(r, 'demo-grid', 'grid_view') >= 3 &&
        r['demo-arm']?.stats?.channels.camera?.forward.p50_ms != null,
    );
    const cam1 = await canvasDigest(page, ARM_CAMERA);
    const plot1 = await canvasDigest(page, '.plot[data-channel="proprio"] canvas');
    const grid1 = await canvasDigest(page, GRID_CAMERA);
    await page.screenshot({ path: join(shots, '1-live.png'), fullPage: true });
    await new Promise((r) => setTimeout(r, 2500)); // the arm moves ~0.5 m in this time
    const cam2 = await canvasDigest(page, ARM_CAMERA);
    const plot2 = await canvasDigest(page, '.plot[data-channel="proprio"] canvas');
    const grid2 = await canvasDigest(page, GRID_CAMERA);
    await page.screenshot({ path: join(shots, '2-live-later.png'), fullPage: true });

    // A picture (base, link, effector on the floor grid), not a uniform fill; and it changes as the arm moves.
    expect(cam1.levels).toBeGreaterThanOrEqual(4);
    expect(cam2.hash).not.toBe(cam1.hash);
    expect(plot1.levels).toBeGreaterThan(1);
    expect(plot2.hash).not.toBe(plot1.hash);
    expect(grid2.levels).toBeGreaterThanOrEqual(3); // cells, lines, goal, avatar
    // The grid picture follows the avatar as the grid agent walks.
    expect(grid2.hash !== grid1.hash || (await changes(page, GRID_CAMERA, 10_000))).toBe(true);
    // The edge's forward latency and staleness per channel, as figures.
    const forward = await page.locator('section[data-route="demo-arm"] td.forward').allTextContents();
    expect(forward.some((t) => /^\d+\.\d{3} \/ \d+\.\d{3}$/.test(t))).toBe(true);
    expect(await page.locator('section[data-route="demo-arm"] .sessions').textContent()).toMatch(
      /observer\/attached: 1/,
    );

    // Without a token in the URL the page asks for one, and watches once given it.
    const asks = await browser!.newPage(log);
    await asks.goto(demo!.viewerUrl(false), { timeout: 15_000 });
    await asks.locator('#token').fill(demo!.token);
    await asks.locator('#login button[type=submit]').click();
    await waitFor(asks, 'frames after the token was typed in', (r) => frames(r, 'demo-arm', 'camera') >= 5);
    expect(await asks.locator('#login').isHidden()).toBe(true);
    await asks.close();

    // A drop: every connection the edge holds is cut; the page resumes its observer sessions.
    for (const c of [...edge!.ctx.connections]) c.terminate(1001, 'test: dropped');
    const resumed = await waitFor(page, 'resume after a drop', (r) =>
      ['demo-arm', 'demo-grid'].every(
        (n) => (r[n]?.client.resumes ?? 0) >= 1 && r[n]!.status.startsWith('resumed'),
      ),
    );
    const camBefore = frames(resumed, 'demo-arm', 'camera');
    await waitFor(page, 'frames after the resume', (r) => frames(r, 'demo-arm', 'camera') >= camBefore + 10);
    // The demo agents resumed their relay sessions as well: the arm moves on, the picture changes.
    expect(await changes(page, ARM_CAMERA, 20_000)).toBe(true);

    // A restart on the same port: the new edge holds none of the old sessions; the page opens new ones.
    const port = edge!.port;
    const config = demo!.config;
    await edge!.close();
    edge = undefined;
    await new Promise((r) => setTimeout(r, 1000));
    edge = await restartOn(config, port);
    const back = await waitFor(
      page,
      'reconnect after the restart',
      (r) =>
        ['demo-arm', 'demo-grid'].every(
          (n) => (r[n]?.client.opens ?? 0) >= 2 && r[n]!.status.startsWith('opened'),
        ),
      45_000,
    );
    expect(back['demo-arm']!.client.resumeRefused).toBeGreaterThanOrEqual(1);
    const camAfter = frames(back, 'demo-arm', 'camera');
    await waitFor(page, 'frames after the restart', (r) => frames(r, 'demo-arm', 'camera') >= camAfter + 10);
    // (The demo agents' relay sessions cannot resume at a new edge with a memory store, and the world holds
    // their embodiments until its reconnect window ends: the arm stands still meanwhile. Frames flow.)
    await page.screenshot({ path: join(shots, '3-after-restart.png'), fullPage: true });
    expect(log.filter((l) => l.startsWith('[pageerror]') || /Content Security Policy/i.test(l))).toEqual([]);
  }, 240_000);
});

if (!chromiumAvailable()) console.warn(`viewer test skipped: ${CHROMIUM_PATH} is missing`);
