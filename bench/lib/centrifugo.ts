/**
 * Centrifugo, the peer baseline of the fan-out scenario: what users pick for WebSocket fan-out. Built by
 * the benchmark from the Go module proxy when Go is present (`go install ...@v6.9.1` into
 * `.cache/centrifugo-v6.9.1/`, once; later runs reuse the binary), skipped with a note otherwise. Run on
 * 127.0.0.1 only from a private temp directory (service.ts), restricted to one core (GOMAXPROCS=1 and
 * taskset), clients anonymous (`client.insecure`: any client may subscribe to any channel), the server
 * HTTP API without a key (`http_api.insecure`), no history, presence or recovery on the channels: plain
 * fan-out, as the edge does it. Subscribers use Centrifugo's own client protocol over WebSocket in its
 * protobuf format (binary frames, as AWP's), see centrifugo-wire.ts; the publisher (centrifugo-pub-child.ts)
 * uses the HTTP API's /api/publish with `b64data`.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ROOT } from './child.js';
import { freePort, runBounded, startService, system, type Service } from './service.js';

export const CENTRIFUGO_VERSION = 'v6.9.1';
const MODULE = 'github.com/centrifugal/centrifugo/v6';
/** Where the binary is built (gitignored with the rest of .cache/). */
const CACHE_DIR = resolve(ROOT, `.cache/centrifugo-${CENTRIFUGO_VERSION}`);
const BINARY = join(CACHE_DIR, 'centrifugo');

export interface Centrifugo {
  readonly service: Service;
  /** The client WebSocket endpoint, protobuf format, transport-level pings (answered by RawWs). */
  readonly wsUrl: string;
  /** The server HTTP API's base URL (`/api/publish`). */
  readonly apiUrl: string;
}

function goBinary(): string | undefined {
  const candidates = [process.env.AWP_BENCH_GO, 'go', '/usr/local/go/bin/go'];
  for (const c of candidates) {
    if (c === undefined || c === '') continue;
    if (spawnSync(c, ['version'], { stdio: 'ignore', timeout: 10_000 }).status === 0) return c;
  }
  return undefined;
}

/** What the binary says of itself (`go install` does not stamp the release: it reports v0.0.0). */
function binaryVersion(): string | undefined {
  if (!existsSync(BINARY)) return undefined;
  const r = spawnSync(BINARY, ['version'], { encoding: 'utf8', timeout: 10_000 });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

/** The module version in the binary's build info (`go version -m`), when Go is here to read it. */
function moduleVersion(go: string | undefined): string | undefined {
  if (go === undefined) return undefined;
  const r = spawnSync(go, ['version', '-m', BINARY], { encoding: 'utf8', timeout: 10_000 });
  const line = r.stdout.split('\n').find((l) => l.trim().startsWith(`mod\t${MODULE}\t`));
  return line?.trim().split('\t')[2];
}

/**
 * The cached binary, built first if needed (a few minutes, once): its path and version, or why there is
 * none (no Go, or the build failed).
 */
export async function ensureCentrifugo(
  log: (line: string) => void,
): Promise<{ ok: true; binary: string; version: string; reports: string } | { ok: false; reason: string }> {
  const go = goBinary();
  let reports = binaryVersion();
  if (reports === undefined) {
    if (go === undefined)
      return {
        ok: false,
        reason: 'Go not found (PATH, /usr/local/go/bin, AWP_BENCH_GO): Centrifugo not built',
      };
    mkdirSync(CACHE_DIR, { recursive: true });
    log(`building Centrifugo ${CENTRIFUGO_VERSION} (go install ${MODULE}@${CENTRIFUGO_VERSION}, once)`);
    const t0 = performance.now();
    const r = await runBounded('nice', ['-n', '10', go, 'install', `${MODULE}@${CENTRIFUGO_VERSION}`], {
      env: { GOBIN: CACHE_DIR },
      timeoutMs: 20 * 60_000,
    });
    if (!r.ok) return { ok: false, reason: `go install failed: ${r.output.slice(-600)}` };
    log(`  built in ${Math.round((performance.now() - t0) / 1000)} s: ${BINARY}`);
    reports = binaryVersion();
    if (reports === undefined)
      return { ok: false, reason: `go install succeeded but ${BINARY} does not run` };
  }
  const mod = moduleVersion(go);
  if (mod !== undefined && mod !== CENTRIFUGO_VERSION)
    return {
      ok: false,
      reason: `${BINARY} was built from ${mod}, not ${CENTRIFUGO_VERSION}: remove it to rebuild`,
    };
  return { ok: true, binary: BINARY, version: mod ?? `${CENTRIFUGO_VERSION} (cache directory)`, reports };
}

/** Starts Centrifugo on `core` only (taskset when available, GOMAXPROCS=1 always). */
export async function startCentrifugo(binary: string, core: number): Promise<Centrifugo> {
  const port = await freePort();
  const config = {
    http_server: { address: '127.0.0.1', port },
    log: { level: 'error' },
    usage_stats: { disabled: true },
    health: { enabled: true },
    client: {
      insecure: true,
      // A subscriber is disconnected when 1 MiB (the default) waits for it: raised so that a generator's
      // hiccup does not change what is delivered (the edge's latest-wins slots never disconnect).
      queue_max_size: 16 * 2 ** 20,
    },
    http_api: { insecure: true },
  };
  const pin = system('taskset', ['-c', String(core), 'true']).status === 0;
  const service = await startService({
    name: 'centrifugo',
    command: pin ? 'taskset' : binary,
    args: (dir) => [...(pin ? ['-c', String(core), binary] : []), '--config', join(dir, 'config.json')],
    prepare: (dir) => writeFileSync(join(dir, 'config.json'), `${JSON.stringify(config, null, 2)}\n`),
    env: { GOMAXPROCS: '1' },
    ready: async () => {
      const res = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(1000) });
      await res.body?.cancel();
      return res.ok;
    },
  });
  return {
    service,
    wsUrl: `ws://127.0.0.1:${port}/connection/websocket?format=protobuf&cf_ws_frame_ping_pong=true`,
    apiUrl: `http://127.0.0.1:${port}`,
  };
}
