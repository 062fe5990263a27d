/**
 * The live viewer's HTTP side on the agent-facing listener: the page's static files (read once at start, so
 * every answer is synchronous, as uWebSockets.js needs), uPlot from node_modules, and the stats document.
 * The page itself connects back as an observer session with the credential the user gives it.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { PlainRequest, PlainResponse } from '../transport/engine.js';
import type { ViewerStats } from './stats.js';

/** Where the page lives; `/` redirects here. */
export const VIEWER_PATH = '/viewer/';

/** A strict policy: scripts and styles from this origin only, WebSockets back to it, no framing. */
const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
};

interface Asset {
  readonly type: string;
  readonly body: Uint8Array;
}

const STATIC_FILES: Readonly<Record<string, string>> = {
  '': 'index.html',
  'viewer.js': 'viewer.js',
  'client.js': 'client.js',
  'draw.js': 'draw.js',
  'recording.js': 'recording.js',
  'viewer.css': 'viewer.css',
};

const TYPES: Readonly<Record<string, string>> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
};

export class ViewerSite {
  private constructor(
    private readonly assets: ReadonlyMap<string, Asset>,
    private readonly stats: ViewerStats,
  ) {}

  static async load(stats: ViewerStats): Promise<ViewerSite> {
    const assets = new Map<string, Asset>();
    const dir = new URL('./static/', import.meta.url);
    for (const [name, file] of Object.entries(STATIC_FILES)) {
      const type = TYPES[file.slice(file.lastIndexOf('.') + 1)]!;
      assets.set(name, { type, body: await readFile(new URL(file, dir)) });
    }
    // uPlot ships prebuilt browser files: served as they are, no build step.
    const require = createRequire(import.meta.url);
    const uplot = require.resolve('uplot/dist/uPlot.iife.min.js');
    assets.set('uplot.min.js', { type: TYPES.js!, body: await readFile(uplot) });
    assets.set('uplot.min.css', {
      type: TYPES.css!,
      body: await readFile(uplot.replace(/uPlot\.iife\.min\.js$/, 'uPlot.min.css')),
    });
    await stats.start();
    return new ViewerSite(assets, stats);
  }

  close(): void {
    this.stats.stop();
  }

  /** The answer to a plain HTTP request, or undefined when it is not the viewer's (the listener's 426). */
  handle(req: PlainRequest): PlainResponse | undefined {
    const inViewer = req.path === '/' || req.path === '/viewer' || req.path.startsWith(VIEWER_PATH);
    if (!inViewer) return undefined;
    // No endpoint of the edge takes a query (AWP-SEC-006): a credential must never travel in a URL.
    if (req.query !== '') return text(400, 'no endpoint of the edge takes a query string\n');
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return { ...text(405, 'GET only\n'), headers: { ...text(405, '').headers, allow: 'GET, HEAD' } };
    if (req.path === '/' || req.path === '/viewer')
      return { status: 302, headers: { ...SECURITY_HEADERS, location: VIEWER_PATH }, body: '' };
    const name = req.path.slice(VIEWER_PATH.length);
    if (name === 'stats.json') {
      return {
        status: 200,
        headers: {
          ...SECURITY_HEADERS,
          'content-type': 'application/json',
          'cache-control': 'no-store',
        },
        body: this.stats.json(),
      };
    }
    const asset = this.assets.get(name);
    if (asset === undefined) return text(404, 'not found\n');
    return { status: 200, headers: { ...SECURITY_HEADERS, 'content-type': asset.type }, body: asset.body };
  }
}

function text(status: number, body: string): PlainResponse {
  return { status, headers: { ...SECURITY_HEADERS, 'content-type': 'text/plain; charset=utf-8' }, body };
}
