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
 * The admin listener: `/healthz` (the process serves; JSON naming the version, engine and Node.js), `/readyz`
 * (route traffic here), `/metrics`.
 */
export async function startAdmin(addr: ListenAddress, h: AdminHandlers): Promise<AdminServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/healthz') {
      const body = { status: 'ok', ...h.build, spec_revision: SPEC_REVISION };
      res.writeHead(200, { 'content-type': 'application/json' }).end(`${JSON.stringify(body)}\n`);
    } else if (path === '/readyz') {
      const ok = h.ready();
      res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(ok ? 'ready\n' : 'not ready\n');
    } else if (path === '/metrics' && h.metrics !== undefined) {
      h.metrics().then(
        (m) => res.writeHead(200, { 'content-type': m.contentType }).end(m.body),
        () => res.writeHead(500).end(),
      );
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
    }
  });
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
