/**
 * A real browser through the edge. Browsers cannot set an Authorization header on a WebSocket, so
 * AWP-SEC-005 lets them offer `awp.bearer.<credential>` next to `awp`: the edge must select `awp` and never
 * echo the credential. Debian's Chromium (headless, via playwright-core) loads a plain-JS dashboard page
 * served from 127.0.0.1, which watches the demo arm world through the edge as an observer session (no
 * embodiment): inline `obs.frame`s first, then binary frames on the `ws` stream endpoint, authenticated the
 * same way with the session token. What the browser offered and what the edge answered is read from
 * Chromium's own DevTools events, not from the page.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { startDemoWorld, type RunningDemoWorld } from '../../src/demo/index.js';
import { AGENT_TOKEN, startEdge, type TestEdge } from '../support/edge.js';
import { CHROMIUM_PATH, chromiumAvailable, launchChromium, type TestBrowser } from './chromium.js';
import { header, recordHandshakes, type Handshake } from './handshakes.js';
import { serveStatic, type StaticServer } from './static-server.js';

const PAGE_FILES = new Map([
  ['/', new URL('./page/index.html', import.meta.url)],
  ['/observer.js', new URL('./page/observer.js', import.meta.url)],
]);

/** The world pings every 250 ms, so does the edge's observer session: a page that stopped answering would lose it. */
const HEARTBEAT_MS = 250;
const INLINE_MS = 2000;

interface ChannelCount {
  channel_id: number;
  count: number;
  afterStream: number;
}
interface StreamChannel {
  count: number;
  firstFlags: number;
  firstResyncKeyframe: boolean;
  firstSeq: number;
  lastSeq: number;
  orderViolations: number;
  lengthMismatches: number;
}
interface ObserveResults {
  done: boolean;
  error: string | null;
  steps: string[];
  protocol: string | null;
  world?: string | null;
  control: { pingsAnswered: number; notifications: string[]; binaryMessages: number };
  ready: {
    session_id: string;
    has_session_token: boolean;
    heartbeat_interval_ms: number;
    granted: { channel: string; channel_id: number }[];
    bindings: string[];
  } | null;
  inline: Record<string, ChannelCount>;
  inlineAfterStream?: Record<string, ChannelCount>;
  stream: {
    protocol: string | null;
    channels: Record<string, StreamChannel>;
    textMessages: number;
    malformed: number;
  };
  closeResult: unknown;
}
interface ConnectResults {
  done: boolean;
  opened: boolean;
  errored: boolean;
  closeCode: number | null;
  protocol: string | null;
  error: string | null;
}
interface PageConfig {
  edgeUrl: string;
  token: string;
  inlineMs?: number;
  streamMs?: number;
  streamFramesPerChannel?: number;
}
/** What observer.js puts on `window` (the page's globals, seen from the test's Node typings). */
interface PageGlobals {
  results: { done: boolean } | null;
  awpPageReady?: boolean;
  awpObserve(cfg: PageConfig): void;
  awpTryConnect(cfg: PageConfig): void;
}

const SKIP_REASON = `${CHROMIUM_PATH} is missing: CI installs Debian's chromium package (apt, in .ci/run)`;

async function openPage(browser: TestBrowser, site: StaticServer, log: string[]): Promise<Page> {
  const page = await browser.newPage(log);
  await page.goto(site.url, { timeout: 10_000 });
  await page.waitForFunction(() => (globalThis as unknown as PageGlobals).awpPageReady === true, null, {
    timeout: 10_000,
  });
  return page;
}

async function resultsWhenDone<T>(page: Page, timeoutMs: number): Promise<T> {
  await page.waitForFunction(() => (globalThis as unknown as PageGlobals).results?.done === true, null, {
    timeout: timeoutMs,
  });
  return (await page.evaluate(() => (globalThis as unknown as PageGlobals).results)) as T;
}

function dump(title: string, log: readonly string[], extra: Record<string, unknown>): void {
  console.error(
    [
      `--- ${title}: page console (${log.length} lines)`,
      ...log,
      ...Object.entries(extra).map(([k, v]) => `--- ${k}: ${JSON.stringify(v, null, 2)}`),
    ].join('\n'),
  );
}

if (!chromiumAvailable()) console.warn(`browser tests skipped: ${SKIP_REASON}`);

describe.skipIf(!chromiumAvailable())('a browser agent through the edge (Chromium)', () => {
  let world: RunningDemoWorld | undefined;
  let edge: TestEdge | undefined;
  let site: StaticServer | undefined;
  let browser: TestBrowser | undefined;

  beforeAll(async () => {
    world = await startDemoWorld({
      kind: 'arm',
      host: '127.0.0.1',
      port: 0,
      heartbeatIntervalMs: HEARTBEAT_MS,
    });
    site = await serveStatic(PAGE_FILES);
    // The page is served from another origin than the edge's: it is allowed by name.
    edge = await startEdge([
      { path: '/worlds/arm', upstream: world.url, allowed_origins: [new URL(site.url).origin] },
    ]);
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await site?.close();
    await edge?.close();
    await world?.close();
  });

  it('AWP-SEC-005 a browser dashboard offering awp.bearer.<credential> gets `awp` and watches the world', async ({
    onTestFailed,
  }) => {
    const log: string[] = [];
    // What the page and Chromium saw so far, printed when the test fails.
    const seen: { results?: ObserveResults; handshakes?: Handshake[] } = {};
    onTestFailed(() => dump('observer page', log, seen));

    const page = await openPage(browser!, site!, log);
    const handshakes = await recordHandshakes(page);
    seen.handshakes = handshakes;
    const edgeUrl = edge!.url();
    await page.evaluate((cfg) => (globalThis as unknown as PageGlobals).awpObserve(cfg), {
      edgeUrl,
      token: AGENT_TOKEN,
      inlineMs: INLINE_MS,
      streamMs: 3000,
      streamFramesPerChannel: 3,
    });
    const results = await resultsWhenDone<ObserveResults>(page, 15_000);
    seen.results = results;

    expect(results.error).toBeNull();
    expect(results.steps).toEqual([
      'open',
      'initialized',
      'ready',
      'inline counted',
      'stream open',
      'stream counted',
      'closed',
    ]);

    // The page sees the selected protocol; Chromium's own view of the handshake shows what crossed the wire.
    expect(results.protocol).toBe('awp');
    const control = handshakes.find((h) => h.url === edgeUrl);
    expect(control).toBeDefined();
    expect(header(control!.requestHeaders, 'sec-websocket-protocol')).toBe(`awp, awp.bearer.${AGENT_TOKEN}`);
    expect(header(control!.requestHeaders, 'authorization')).toBeUndefined();
    expect(control!.status).toBe(101);
    expect(header(control!.responseHeaders, 'sec-websocket-protocol')).toBe('awp');
    expect(JSON.stringify(control!.responseHeaders)).not.toContain(AGENT_TOKEN);

    // An observer session (no embodiment) served by the edge.
    const ready = results.ready!;
    expect(typeof ready.session_id).toBe('string');
    expect(ready.has_session_token).toBe(true);
    expect(ready.heartbeat_interval_ms).toBe(HEARTBEAT_MS);
    expect(ready.granted.map((g) => g.channel).sort()).toEqual(['proprio', 'state']);
    expect(ready.bindings).toContain('ws');
    expect(ready.bindings.at(-1)).toBe('inline');

    // Inline frames on both channels for 2 s (proprio 100 Hz, state 10 Hz), and the edge's pings answered:
    // with a 250 ms heartbeat the session would have been lost after 750 ms of silence.
    expect(results.inline.proprio!.count).toBeGreaterThanOrEqual(50);
    expect(results.inline.state!.count).toBeGreaterThanOrEqual(5);
    expect(results.control.pingsAnswered).toBeGreaterThanOrEqual(3);
    expect(results.control.binaryMessages).toBe(0);

    // The `ws` stream endpoint, authenticated with the session token the same way (AWP-TRN-013): binary
    // frames on both channels, each channel starting with resync|keyframe (AWP-TRN-012), seq increasing.
    expect(results.stream.protocol).toBe('awp');
    const streamHs = handshakes.find((h) => h.url !== edgeUrl);
    expect(streamHs).toBeDefined();
    const offered = header(streamHs!.requestHeaders, 'sec-websocket-protocol') ?? '';
    const sessionToken = /^awp, awp\.bearer\.(.+)$/.exec(offered)?.[1];
    expect(sessionToken).toBeDefined();
    expect(sessionToken).not.toBe(AGENT_TOKEN);
    expect(streamHs!.status).toBe(101);
    expect(header(streamHs!.responseHeaders, 'sec-websocket-protocol')).toBe('awp');
    expect(JSON.stringify(streamHs!.responseHeaders)).not.toContain(sessionToken!);
    expect(results.stream.malformed).toBe(0);
    expect(results.stream.textMessages).toBe(0);
    for (const g of ready.granted) {
      const c = results.stream.channels[String(g.channel_id)];
      expect(c, `stream frames on ${g.channel}`).toBeDefined();
      expect(c!.count, g.channel).toBeGreaterThanOrEqual(3);
      expect(c!.firstResyncKeyframe, `${g.channel} first flags ${c!.firstFlags}`).toBe(true);
      expect(c!.orderViolations, g.channel).toBe(0);
      expect(c!.lengthMismatches, g.channel).toBe(0);
      // Once the stream carries the channel, no newer frame of it arrives inline (AWP-TRN-012).
      expect(results.inlineAfterStream?.[g.channel]?.afterStream, `${g.channel} inline after stream`).toBe(0);
    }

    expect(results.closeResult).toEqual({});
    if (process.env.AWP_BROWSER_DUMP === '1') dump('observer page (AWP_BROWSER_DUMP)', log, seen);
    await page.close();
  });

  it('AWP-SEC-005 a browser offering awp.bearer.<wrong credential> gets no connection', async ({
    onTestFailed,
  }) => {
    const log: string[] = [];
    // What the page and Chromium saw so far, printed when the test fails.
    const seen: { results?: ConnectResults; handshakes?: Handshake[] } = {};
    onTestFailed(() => dump('wrong-credential page', log, seen));

    const page = await openPage(browser!, site!, log);
    const handshakes = await recordHandshakes(page);
    seen.handshakes = handshakes;
    await page.evaluate((cfg) => (globalThis as unknown as PageGlobals).awpTryConnect(cfg), {
      edgeUrl: edge!.url(),
      token: 'wrong',
    });
    const results = await resultsWhenDone<ConnectResults>(page, 10_000);
    seen.results = results;

    expect(results.error).toBeNull();
    expect(results.opened).toBe(false);
    expect(results.errored).toBe(true);
    expect(results.closeCode).toBe(1006);
    const hs = handshakes.find((h) => h.url === edge!.url());
    expect(hs).toBeDefined();
    expect(header(hs!.requestHeaders, 'sec-websocket-protocol')).toBe('awp, awp.bearer.wrong');
    // The edge answers 401 before the upgrade; Chromium reports no response for it, only the failure
    // (a 401 is an HTTP authentication failure to it), on DevTools and on the console.
    expect(hs!.status).toBeUndefined();
    expect(hs!.errorMessage).toMatch(/Authentication failed/);
    expect(log.join('\n')).toMatch(/WebSocket connection to .* failed: HTTP Authentication failed/);
    await page.close();
  });
});
