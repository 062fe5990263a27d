import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { ListenAddress } from '../config/schema.js';

/** The AWP draft revision this edge implements (its wire format; VER-009: named wherever the version is). */
export const SPEC_REVISION = '0.1-draft.10';

/** What runs: this package's version, the agent-facing engine, the Node.js version. */
export interface BuildInfo {
  readonly version: string;
  readonly engine: string;
  readonly node: string;
}

let packageVersion: string | undefined;

/** The package's version, from its package.json (two levels up from src/edge/ and from dist/edge/). */
export function edgeVersion(): string {
  if (packageVersion === undefined) {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: unknown;
    };
    packageVersion = typeof pkg.version === 'string' ? pkg.version : 'unknown';
  }
  return packageVersion;
}

export function buildInfo(engine: string): BuildInfo {
  return { version: edgeVersion(), engine, node: process.version };
}

export interface AdminServer {
  readonly port: number;
  close(): Promise<void>;
}

export interface AdminHandlers {
  /** Whether the edge takes new connections (false while draining or with its store unreachable). */
  ready(): boolean;
  /** Prometheus text exposition, when metrics are enabled. */
  metrics?: () => Promise<{ contentType: string; body: string }>;
  /** Named in `/healthz`, so a probe or an operator sees what runs. */
  build?: BuildInfo;
}

/**
 * Bounds of the admin listener, which has no handshake guard of its own: a request must arrive whole
 * within `timeoutMs` (the default is `transport.handshake_timeout_ms`'s), and at most `maxConnections`
 * sockets are held; more are closed at once. Probes and a Prometheus need a handful.
 */
export interface AdminLimits {
  readonly timeoutMs: number;
  readonly maxConnections: number;
}

export const ADMIN_LIMITS: AdminLimits = { timeoutMs: 10_000, maxConnections: 128 };

/**
 * Prometheus scrapes every 15 s or more, so scrapes may wait for one another: concurrent scrapes share the
 * exposition being built, and the next build starts no sooner than 10 times the last one's duration after
 * it, at most 1 s: a flood of scrapes spends about a tenth of the event loop on them. A scrape is never
 * answered with an exposition finished before it arrived (a change an operator just made shows).
 */
const METRICS_SPACING = 10;
const METRICS_MAX_WAIT_MS = 1_000;

/**
 * The admin listener: `/healthz` (the process serves; JSON naming the version, engine and Node.js), `/readyz`
 * (route traffic here), `/metrics`.
 */
export async function startAdmin(
  addr: ListenAddress,
  h: AdminHandlers,
  limits: AdminLimits = ADMIN_LIMITS,
): Promise<AdminServer> {
  const metrics = h.metrics === undefined ? undefined : shared(h.metrics);
  const server: Server = createServer(
    {
      // Headers and body within the timeout (slow headers, endless bodies), checked often enough to hold to it.
      headersTimeout: limits.timeoutMs,
      requestTimeout: limits.timeoutMs,
      connectionsCheckingInterval: Math.min(1_000, Math.max(50, Math.floor(limits.timeoutMs / 4))),
    },
    (req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        // Closed after the answer: a body nobody reads must not hold the socket.
        res.writeHead(405, { allow: 'GET, HEAD', connection: 'close' }).end();
        return;
      }
      if (path === '/healthz') {
        const body = { status: 'ok', ...h.build, spec_revision: SPEC_REVISION };
        res.writeHead(200, { 'content-type': 'application/json' }).end(`${JSON.stringify(body)}\n`);
      } else if (path === '/readyz') {
        const ok = h.ready();
        res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(ok ? 'ready\n' : 'not ready\n');
      } else if (path === '/metrics' && metrics !== undefined) {
        metrics().then(
          (m) => res.writeHead(200, { 'content-type': m.contentType }).end(m.body),
          () => res.writeHead(500).end(),
        );
      } else {
        res.writeHead(404, { 'content-type': 'text/plain', connection: 'close' }).end('not found\n');
      }
    },
  );
  // An idle socket (none of its request sent, or a keep-alive between requests, or a reader that stalls).
  server.timeout = limits.timeoutMs;
  server.keepAliveTimeout = Math.min(5_000, limits.timeoutMs);
  server.maxConnections = limits.maxConnections;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(addr.port, addr.host, () => resolve());
  });
  const a = server.address();
  return {
    port: typeof a === 'object' && a !== null ? a.port : addr.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** `build`, shared and spaced as METRICS_SPACING says. A failed build delays the next one the same way. */
function shared<T>(build: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  let nextAt = 0;
  return () => {
    if (pending !== undefined) return pending;
    const wait = Math.max(0, nextAt - performance.now());
    const p = new Promise<void>((r) => setTimeout(r, wait)).then(async () => {
      const started = performance.now();
      try {
        return await build(); // a synchronous throw is a failed build too
      } finally {
        const ended = performance.now();
        nextAt = ended + Math.min(METRICS_MAX_WAIT_MS, (ended - started) * METRICS_SPACING);
      }
    });
    const settled = () => (pending = undefined);
    p.then(settled, settled);
    pending = p;
    return p;
  };
}
