/** Serves the browser test's page (a fixed set of files, no build step) from node:http on 127.0.0.1. */
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface StaticServer {
  /** Base URL ending in `/`, e.g. `http://127.0.0.1:40123/`. */
  readonly url: string;
  close(): Promise<void>;
}

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
};

/** Serves `files` (URL path -> file URL) and answers 404 for anything else. */
export async function serveStatic(files: ReadonlyMap<string, URL>): Promise<StaticServer> {
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
    const file = files.get(path);
    if (req.method !== 'GET' || file === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    const ext = file.pathname.split('.').pop() ?? '';
    readFile(file).then(
      (body) => {
        res
          .writeHead(200, {
            'content-type': TYPES[ext] ?? 'application/octet-stream',
            'cache-control': 'no-store',
          })
          .end(body);
      },
      (err: unknown) => {
        res.writeHead(500, { 'content-type': 'text/plain' }).end(`${String(err)}\n`);
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
