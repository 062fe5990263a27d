/**
 * nginx as a reverse-proxy baseline (Debian's nginx-light): what an operator would put in front of a world
 * instead of an AWP-aware edge. It proxies the WebSocket without parsing it (HTTP/1.1 upgrade, no
 * buffering, TCP_NODELAY), one worker process, on 127.0.0.1 only, config, logs, temp paths and pid in a
 * private directory, started and stopped by the benchmark (service.ts); never the system service.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensureDebPackage, freePort, startService, system, type Service } from './service.js';

export const NGINX_BIN = process.env.AWP_BENCH_NGINX ?? '/usr/sbin/nginx';
const NGINX_PACKAGE = 'nginx-light';

export interface Nginx {
  readonly service: Service;
  /** ws://127.0.0.1:PORT + the upstream's path. */
  readonly url: string;
}

/** A system nginx the package's install started (port 80): stopped by its pid file, as PLATFORM.md says. */
function stopSystemNginx(): void {
  system('systemctl', ['stop', 'nginx']);
  for (const f of ['/run/nginx.pid', '/var/run/nginx.pid']) {
    if (!existsSync(f)) continue;
    const pid = Number(readFileSync(f, 'utf8').trim());
    if (pid > 1) {
      try {
        process.kill(pid, 'SIGQUIT');
      } catch {
        // not running
      }
    }
  }
}

/** The nginx binary's version line, or why nginx is not available (after trying to install it). */
export async function ensureNginx(
  log: (line: string) => void,
): Promise<{ ok: true; version: string } | { ok: false; reason: string }> {
  const missing = await ensureDebPackage(NGINX_PACKAGE, NGINX_BIN, log, stopSystemNginx);
  if (missing !== undefined) return { ok: false, reason: missing };
  const v = spawnSync(NGINX_BIN, ['-v'], { encoding: 'utf8', timeout: 10_000 });
  if (v.status !== 0) return { ok: false, reason: `${NGINX_BIN} -v failed: ${v.stderr.trim()}` };
  return { ok: true, version: v.stderr.trim().replace(/^nginx version: /, '') };
}

function config(dir: string, port: number, upstream: URL): string {
  const tmp = (n: string) => join(dir, 'tmp', n);
  return `# awp-edge bench: nginx as a WebSocket reverse proxy (baseline), loopback only
worker_processes 1;
daemon off;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${tmp('body')};
  proxy_temp_path ${tmp('proxy')};
  fastcgi_temp_path ${tmp('fastcgi')};
  uwsgi_temp_path ${tmp('uwsgi')};
  scgi_temp_path ${tmp('scgi')};
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://${upstream.host};
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection "upgrade";
      proxy_set_header Host $host;
      proxy_buffering off;
      proxy_read_timeout 3600s;
      proxy_send_timeout 3600s;
      tcp_nodelay on;
    }
  }
}
`;
}

/** Starts nginx proxying to the WebSocket at `upstream` (ws://127.0.0.1:PORT/path). */
export async function startNginx(upstream: string): Promise<Nginx> {
  const up = new URL(upstream);
  const port = await freePort();
  const service = await startService({
    name: 'nginx',
    command: NGINX_BIN,
    // -e: the error log from the start on (else nginx opens /var/log/nginx/error.log first).
    args: (dir) => ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')],
    prepare: (dir) => {
      mkdirSync(join(dir, 'tmp'));
      writeFileSync(join(dir, 'nginx.conf'), config(dir, port, up));
    },
    ready: async () => {
      // Any HTTP answer means the worker accepts (a plain GET to a WebSocket world is refused, 4xx).
      const res = await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(1000) });
      await res.body?.cancel();
      return true;
    },
  });
  return { service, url: `ws://127.0.0.1:${port}${up.pathname}${up.search}` };
}
