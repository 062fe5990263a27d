/**
 * Third-party servers the benchmark runs as baselines (nginx, Centrifugo): started on 127.0.0.1 from a
 * private temp directory, never as a system service, with bounded waits, and always stopped: by stop(),
 * or when the benchmark ends in any way (a small watchdog shell stops the server when the pipe from this
 * process closes, so even a SIGKILLed run leaves nothing behind). Also: installing a missing Debian
 * package the way `.ci/run` does, and building a pinned Go module once into `.cache/`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sleep } from './context.js';

/**
 * `sh -c WATCHDOG cmd args...`: runs the command (stdin from /dev/null), reports its pid on stderr, and
 * sends it SIGTERM once the shell's stdin reaches EOF; exits with the command's status.
 */
const WATCHDOG = [
  'exec 3<&0',
  '"$0" "$@" </dev/null & p=$!',
  'echo "awp-bench-service-pid $p" >&2',
  '(while read -r _ <&3; do :; done; kill -TERM "$p" 2>/dev/null) & w=$!',
  'wait "$p"; s=$?',
  'kill "$w" 2>/dev/null',
  'exit "$s"',
].join('\n');

const live = new Set<number>();
process.on('exit', () => {
  for (const pid of live) killQuietly(pid, 'SIGKILL');
});

function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

export interface Service {
  readonly name: string;
  /** The server process's pid (not the watchdog's). */
  readonly pid: number;
  /** The private directory (config, logs, pid files); removed by stop(). */
  readonly dir: string;
  /** What the server wrote to stdout and stderr (first 64 KiB). */
  output(): string;
  /** SIGTERM, SIGKILL after `graceMs`; removes the directory. */
  stop(graceMs?: number): Promise<void>;
}

export interface ServiceOptions {
  readonly name: string;
  readonly command: string;
  /** Arguments; `dir` is the private directory, created before. */
  readonly args: (dir: string) => readonly string[];
  /** Writes config files into the directory before the start. */
  readonly prepare?: (dir: string) => void;
  readonly env?: Readonly<Record<string, string>>;
  /** Resolves true once the server serves (polled every 100 ms). */
  readonly ready: () => Promise<boolean>;
  readonly startTimeoutMs?: number;
}

export async function startService(o: ServiceOptions): Promise<Service> {
  const dir = mkdtempSync(join(tmpdir(), `awp-bench-${o.name}-`));
  o.prepare?.(dir);
  const child: ChildProcess = spawn('/bin/sh', ['-c', WATCHDOG, o.command, ...o.args(dir)], {
    cwd: dir,
    env: { ...process.env, ...o.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let pid = 0;
  const collect = (d: Buffer) => {
    const text = d.toString();
    const m = /awp-bench-service-pid (\d+)/.exec(text);
    if (m !== null) {
      pid = Number(m[1]);
      live.add(pid);
    }
    if (out.length < 64 * 1024) out += text;
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  const stop = async (graceMs = 5000) => {
    if (!gone()) {
      child.stdin!.end(); // the watchdog sends SIGTERM
      const timer = setTimeout(() => {
        if (pid !== 0) killQuietly(pid, 'SIGKILL');
        child.kill('SIGKILL');
      }, graceMs);
      await exited;
      clearTimeout(timer);
    }
    live.delete(pid);
    rmSync(dir, { recursive: true, force: true });
  };
  const timeoutMs = o.startTimeoutMs ?? 20_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (gone()) {
      await stop();
      throw new Error(`${o.name} exited during start (code ${String(child.exitCode)}):\n${out}`);
    }
    if (pid !== 0 && (await o.ready().catch(() => false))) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${o.name} did not serve within ${timeoutMs} ms:\n${out}`);
    }
    await sleep(100);
  }
  return { name: o.name, pid, dir, output: () => out, stop };
}

/** A port free on 127.0.0.1 right now (the server binds it next; a lost race fails the start). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/** Runs a command with a bound on its time; resolves with its status and the tail of its output. */
export function runBounded(
  command: string,
  args: readonly string[],
  opts: { env?: Readonly<Record<string, string>>; timeoutMs: number },
): Promise<{ ok: boolean; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      env: { ...process.env, ...opts.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const keep = (d: Buffer) => (out = (out + d.toString()).slice(-8192));
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const timer = setTimeout(() => {
      out += `\n(killed after ${opts.timeoutMs} ms)`;
      child.kill('SIGKILL');
    }, opts.timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      resolve({ ok: false, output: err.message });
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ ok: code === 0, output: out.trim() });
    });
  });
}

/** Runs a tool of the system (dpkg, util-linux, systemd: not npm binaries), bounded in time. */
export function system(tool: string, args: readonly string[], timeoutMs = 15_000) {
  return spawnSync(tool, args, { encoding: 'utf8', timeout: timeoutMs });
}

/** Restricts every thread of `pid` to CPU `core` (taskset -a); undefined if done, else why not. */
export function pinToCore(pid: number, core: number): string | undefined {
  const r = system('taskset', ['-a', '-p', '-c', String(core), String(pid)]);
  return r.status === 0 ? undefined : `taskset failed: ${r.error?.message ?? r.stderr.trim()}`;
}

/** Whether a Debian package is installed (dpkg's status). */
function debInstalled(pkg: string): boolean {
  return system('dpkg-query', ['-W', '-f=${Status}', pkg]).stdout.includes('install ok installed');
}

/**
 * Makes sure `binary` exists, installing the Debian package `pkg` if it does not and this process may
 * (root, or passwordless sudo), as `.ci/run` installs the test suite's packages. Returns undefined when
 * the binary is there, else why it is not. `after` runs after an install (e.g. stop the service the
 * package started).
 */
export async function ensureDebPackage(
  pkg: string,
  binary: string,
  log: (line: string) => void,
  after?: () => void,
): Promise<string | undefined> {
  if (existsSync(binary)) return undefined;
  if (system('dpkg', ['--version']).status !== 0) return `${binary} missing and no dpkg on this machine`;
  if (debInstalled(pkg)) return `${pkg} is installed but ${binary} is missing`;
  const root = process.getuid?.() === 0;
  if (!root && system('sudo', ['-n', 'true']).status !== 0)
    return `${binary} missing; installing ${pkg} needs root (apt-get install -y ${pkg})`;
  const run = (args: readonly string[], timeoutMs: number) => {
    const [cmd, ...rest] = root ? args : ['sudo', '-n', ...args];
    return runBounded(cmd!, rest, { env: { DEBIAN_FRONTEND: 'noninteractive' }, timeoutMs });
  };
  // Waits for a dpkg lock another apt holds (bounded) instead of failing at once.
  const install = [
    'apt-get',
    '-o',
    'DPkg::Lock::Timeout=120',
    'install',
    '-y',
    '-qq',
    '--no-install-recommends',
    pkg,
  ];
  log(`installing ${pkg} (apt-get)`);
  let r = await run(install, 300_000);
  if (!r.ok) {
    await run(['apt-get', '-o', 'DPkg::Lock::Timeout=120', 'update', '-qq'], 300_000);
    r = await run(install, 300_000);
  }
  after?.();
  if (!r.ok || !existsSync(binary)) return `apt-get install ${pkg} failed: ${r.output.slice(-500)}`;
  return undefined;
}
