/**
 * A real redis-server for tests: loopback only, a free port, its own temp dir, bounded waits, and
 * always killed (stop() in afterAll, plus a process-exit hook for crashed suites).
 *
 *   const redis = await startRedis({ appendonly: true });
 *   ... new RedisSessionStore({ url: redis.url }) ...
 *   await redis.restart();   // same port and dir: with appendonly the data survives
 *   await redis.stop();
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';

export const REDIS_SERVER = process.env.AWP_TEST_REDIS_SERVER ?? '/usr/bin/redis-server';

export interface RedisServerOptions {
  /** Persist every write to an append-only file (fsync always), so a restart keeps the data. */
  readonly appendonly?: boolean;
  /** Bound on the server answering PING after a (re)start (default 10000 ms). */
  readonly startTimeoutMs?: number;
  /** `requirepass` for the server: the URL then carries `:password@`. */
  readonly password?: string;
}

export interface TestRedis {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** Whether the server process is running. */
  readonly running: boolean;
  /** Stops the server; the data dir stays until `dispose`. */
  stop(): Promise<void>;
  /** Starts the server again on the same port and dir (stopping it first if it runs). */
  restart(): Promise<void>;
  /** Stops the server and removes its dir. */
  dispose(): Promise<void>;
}

/** Whether redis-server is installed (suites skip only when it is not). */
export function redisServerAvailable(): boolean {
  return existsSync(REDIS_SERVER);
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

export async function startRedis(options: RedisServerOptions = {}): Promise<TestRedis> {
  installExitHook();
  const dir = mkdtempSync(join(tmpdir(), 'awp-edge-redis-'));
  const port = await freePort();
  const startTimeoutMs = options.startTimeoutMs ?? 10_000;
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    options.appendonly === true ? 'yes' : 'no',
    '--appendfsync',
    'always',
    '--dir',
    dir,
    '--daemonize',
    'no',
    '--protected-mode',
    'yes',
    '--loglevel',
    'warning',
    ...(options.password !== undefined ? ['--requirepass', options.password] : []),
  ];
  let child: ChildProcess | null = null;
  let output = '';

  const launch = async (): Promise<void> => {
    output = '';
    const proc = spawn(REDIS_SERVER, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    live.add(proc);
    proc.stdout.on('data', (b: Buffer) => (output += b.toString()));
    proc.stderr.on('data', (b: Buffer) => (output += b.toString()));
    proc.once('exit', () => live.delete(proc));
    child = proc;
    const deadline = Date.now() + startTimeoutMs;
    while (Date.now() < deadline) {
      if (proc.exitCode !== null || proc.signalCode !== null) break;
      if (await pingOk(port, options.password)) return;
      await sleep(25);
    }
    await kill(proc);
    throw new Error(
      `redis-server did not answer PING on 127.0.0.1:${port} within ${startTimeoutMs} ms:\n${output}`,
    );
  };

  const stop = async (): Promise<void> => {
    const proc = child;
    child = null;
    if (proc !== null) await kill(proc);
  };

  await launch();
  const auth = options.password !== undefined ? `:${encodeURIComponent(options.password)}@` : '';
  return {
    url: `redis://${auth}127.0.0.1:${port}`,
    port,
    dir,
    get running() {
      return child !== null && child.exitCode === null && child.signalCode === null;
    },
    stop,
    restart: async () => {
      await stop();
      await launch();
    },
    dispose: async () => {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** SIGTERM (redis flushes its AOF and exits), SIGKILL after 3 s; resolves once the process is gone. */
async function kill(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const gone = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), 3_000);
  await gone;
  clearTimeout(timer);
}

/** One PING over a raw socket (RESP inline command), bounded by 500 ms. */
function pingOk(port: number, password: string | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    let reply = '';
    const finish = (ok: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => finish(false), 500);
    socket.once('error', () => finish(false));
    socket.on('data', (b: Buffer) => {
      reply += b.toString();
      if (reply.includes('+PONG')) finish(true);
      else if (reply.includes('-')) finish(false);
    });
    socket.connect(port, '127.0.0.1', () => {
      const auth = password !== undefined ? `AUTH ${password}\r\n` : '';
      socket.write(`${auth}PING\r\n`);
    });
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
