import { createServer, type Server } from 'node:http';
import type { ListenAddress } from '../config/schema.js';

export interface AdminServer {
  readonly port: number;
  close(): Promise<void>;
}

export interface AdminHandlers {
  /** Whether the edge takes new connections (false while draining or with its store unreachable). */
  ready(): boolean;
  /** Prometheus text exposition, when metrics are enabled. */
  metrics?: () => Promise<{ contentType: string; body: string }>;
}

/** The admin listener: `/healthz` (the process serves), `/readyz` (route traffic here), `/metrics`. */
export async function startAdmin(addr: ListenAddress, h: AdminHandlers): Promise<AdminServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
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
