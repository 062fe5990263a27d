/**
 * The edge CLI as a child process, as an operator runs it: `awp-edge serve --config <tmp yaml>` with
 * credentials in the environment. Ports are picked by the edge (127.0.0.1:0) and read from its
 * `awp-edge listening` log line (pino JSON on stdout). The process can be SIGKILLed or SIGTERMed
 * (graceful drain); it is always killed at teardown, and on exit of the test process.
 *
 *   const a = await startEdgeProcess({ routes: [{ name: 'arm', path: '/arm', upstream: world.url }],
 *                                      redisUrl: redis.url, drainWindowMs: 1500 });
 *   const agent = await AwpClient.connect(a.url('/arm'), { credential: EDGE_AGENT_TOKEN });
 *   a.kill('SIGKILL'); await a.exited;
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';

/** The agent credential every edge process accepts (given through AWP_EDGE_AGENT_TOKENS). */
export const EDGE_AGENT_TOKEN = 'scale-test-agent-credential-42';
const REDIS_URL_ENV = 'AWP_EDGE_REDIS_URL';
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export interface EdgeProcessRoute {
  readonly name: string;
  readonly path: string;
  readonly upstream: string;
  readonly observers?: 'fanout' | 'relay';
  readonly hub_linger_ms?: number;
  /** The edge's credential toward `upstream` (another edge, in a tier): a variable set through `env`. */
  readonly upstream_token_env?: string;
  readonly upstream_token_file?: string;
}

export interface EdgeProcessOptions {
  readonly routes: readonly EdgeProcessRoute[];
  /** A shared Redis store (the URL goes through the environment: it may carry a password). */
  readonly redisUrl?: string;
  readonly keyPrefix?: string;
  readonly drainWindowMs?: number;
  /** Agent credentials accepted (default [EDGE_AGENT_TOKEN]); budgets apply per credential. */
  readonly agentTokens?: readonly string[];
  /** Default 'info': the tests read session events from the log. */
  readonly logLevel?: string;
  /** Further top-level config keys (merged over the defaults). */
  readonly extra?: Record<string, unknown>;
  /** Further environment variables of the process (e.g. a route's `upstream_token_env`). */
  readonly env?: Readonly<Record<string, string>>;
  /** Bound on the process reporting `awp-edge listening` (default 15000 ms: tsx compiles on start). */
  readonly startTimeoutMs?: number;
}

/** One JSON log line of the edge. */
export type EdgeLogLine = Record<string, unknown> & { msg?: string; event?: string; level?: number };

export interface EdgeExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** performance.now() in the test process when the exit was seen. */
  readonly at: number;
}

export interface EdgeProcess {
  readonly pid: number;
  readonly port: number;
  readonly adminPort: number;
  /** The agent-facing URL of a route path. */
  url(path: string): string;
  readonly adminUrl: string;
  /** Parsed log lines so far (non-JSON stdout lines are kept as `{ msg }`). */
  readonly logs: EdgeLogLine[];
  /** Everything the process wrote to stderr. */
  readonly stderr: string;
  /** Resolves when the process has exited. */
  readonly exited: Promise<EdgeExit>;
  readonly running: boolean;
  /** HTTP status of GET /readyz (0 when the admin listener does not answer within 1 s). */
  readyz(): Promise<number>;
  /** Resolves with the first log line (already logged or to come) that matches; bounded. */
  waitLog(match: (line: EdgeLogLine) => boolean, timeoutMs?: number, what?: string): Promise<EdgeLogLine>;
  kill(signal: 'SIGKILL' | 'SIGTERM' | 'SIGINT'): void;
  /** SIGKILLs the process if it runs, waits for it, removes its temp dir. */
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const child of live) child.kill('SIGKILL');
  });
}

export async function startEdgeProcess(options: EdgeProcessOptions): Promise<EdgeProcess> {
  installExitHook();
  const dir = mkdtempSync(join(tmpdir(), 'awp-edge-proc-'));
  const configFile = join(dir, 'edge.yaml');
  const config: Record<string, unknown> = {
    listen: '127.0.0.1:0',
    admin: '127.0.0.1:0',
    // CI runs the behaviour tests once per engine (see .ci/run); ws starts fastest.
    engine: process.env.AWP_EDGE_ENGINE ?? 'ws',
    log_level: options.logLevel ?? 'info',
    timing: { hop_ping_interval_ms: 1000 },
    routes: options.routes,
    ...(options.redisUrl !== undefined && {
      store: { kind: 'redis', url_env: REDIS_URL_ENV, key_prefix: options.keyPrefix ?? 'awp-edge:' },
    }),
    ...(options.drainWindowMs !== undefined && { drain: { window_ms: options.drainWindowMs } }),
    ...options.extra,
  };
  writeFileSync(configFile, stringify(config));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    AWP_EDGE_AGENT_TOKENS: (options.agentTokens ?? [EDGE_AGENT_TOKEN]).join(','),
    ...options.env,
  };
  if (options.redisUrl !== undefined) env[REDIS_URL_ENV] = options.redisUrl;
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/awp-edge.ts', 'serve', '--config', configFile],
    {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  live.add(child);
  const logs: EdgeLogLine[] = [];
  const waiters: { match: (l: EdgeLogLine) => boolean; resolve: (l: EdgeLogLine) => void }[] = [];
  let stderr = '';
  let partial = '';
  child.stdout.on('data', (chunk: Buffer) => {
    partial += chunk.toString();
    const lines = partial.split('\n');
    partial = lines.pop() ?? '';
    for (const text of lines) {
      if (text.trim() === '') continue;
      let line: EdgeLogLine;
      try {
        line = JSON.parse(text) as EdgeLogLine;
      } catch {
        line = { msg: text };
      }
      logs.push(line);
      for (let i = waiters.length - 1; i >= 0; i--) {
        const w = waiters[i]!;
        if (w.match(line)) {
          waiters.splice(i, 1);
          w.resolve(line);
        }
      }
    }
  });
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<EdgeExit>((done) => {
    child.once('exit', (code, signal) => {
      live.delete(child);
      done({ code, signal, at: performance.now() });
    });
  });
  let hasExited = false;
  void exited.then(() => (hasExited = true));

  const waitLog = (
    match: (l: EdgeLogLine) => boolean,
    timeoutMs = 5000,
    what = 'a log line',
  ): Promise<EdgeLogLine> => {
    const seen = logs.find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolveLine, reject) => {
      const waiter = {
        match,
        resolve: (l: EdgeLogLine) => {
          clearTimeout(timer);
          resolveLine(l);
        },
      };
      const timer = setTimeout(() => {
        const i = waiters.indexOf(waiter);
        if (i >= 0) waiters.splice(i, 1);
        reject(
          new Error(
            `edge pid ${child.pid ?? '?'}: timed out after ${timeoutMs} ms waiting for ${what}; stderr:\n${stderr}`,
          ),
        );
      }, timeoutMs);
      waiters.push(waiter);
    });
  };

  const stop = async (): Promise<void> => {
    if (!hasExited) child.kill('SIGKILL');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };

  let started: EdgeLogLine;
  try {
    started = await Promise.race([
      waitLog(
        (l) => l.msg === 'awp-edge listening',
        options.startTimeoutMs ?? 15_000,
        '"awp-edge listening"',
      ),
      exited.then((e) => {
        throw new Error(
          `edge exited before listening (code ${String(e.code)}, signal ${String(e.signal)}):\n${stderr}`,
        );
      }),
    ]);
  } catch (err) {
    await stop();
    throw err;
  }
  const port = portOf(started.listen);
  const adminPort = portOf(started.admin);
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  return {
    pid: child.pid ?? 0,
    port,
    adminPort,
    url: (path) => `ws://127.0.0.1:${port}${path}`,
    adminUrl,
    logs,
    get stderr() {
      return stderr;
    },
    exited,
    get running() {
      return !hasExited;
    },
    readyz: () => httpStatus(`${adminUrl}/readyz`),
    waitLog,
    kill: (signal) => {
      if (!hasExited) child.kill(signal);
    },
    stop,
  };
}

function portOf(address: unknown): number {
  const m = typeof address === 'string' ? /:(\d+)$/.exec(address) : null;
  if (m === null) throw new Error(`edge logged no HOST:PORT address (${JSON.stringify(address)})`);
  return Number(m[1]);
}

/** The status of one GET, or 0 if nothing answers within 1 s. */
export function httpStatus(url: string): Promise<number> {
  return new Promise((done) => {
    const req = request(url, { method: 'GET', timeout: 1000 }, (res) => {
      res.resume();
      done(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => done(0));
    req.end();
  });
}
