// Child processes for the interop harness: bounded runs, and every child killed on teardown.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import type { WriteStream } from 'node:fs';

/** Children still running, so that an aborted test run does not leave worlds listening. */
const live = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of live) killGroup(child, 'SIGKILL');
  });
}

/** Signal the child's process group (children are spawned detached, as group leaders). */
export function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // The group is gone already.
  }
}

export interface Spawned {
  readonly child: ChildProcess;
  readonly pid: number;
  /** Resolves with the exit code (or null after a signal) once the child has exited. */
  readonly exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the child has exited. */
  stop(graceMs?: number): Promise<void>;
}

export interface SpawnOptions {
  readonly cwd: string;
  readonly env?: NodeJS.ProcessEnv;
  /** Files that receive the child's stdout and stderr (may be the same path). */
  readonly stdoutPath: string;
  readonly stderrPath: string;
  /** Called with each stderr/stdout chunk as text, e.g. to watch for a readiness line. */
  readonly onOutput?: (text: string) => void;
}

function openLog(path: string, cache: Map<string, WriteStream>): WriteStream {
  let stream = cache.get(path);
  if (stream === undefined) {
    stream = createWriteStream(path, { flags: 'a' });
    cache.set(path, stream);
  }
  return stream;
}

export function spawnLogged(command: string, args: readonly string[], opts: SpawnOptions): Spawned {
  installExitHook();
  const child = spawn(command, [...args], {
    cwd: opts.cwd,
    env: opts.env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true, // its own process group: stop() reaches anything it starts
  });
  live.add(child);
  const logs = new Map<string, WriteStream>();
  const out = openLog(opts.stdoutPath, logs);
  const err = openLog(opts.stderrPath, logs);
  child.stdout.on('data', (chunk: Buffer) => {
    out.write(chunk);
    opts.onOutput?.(chunk.toString('utf8'));
  });
  child.stderr.on('data', (chunk: Buffer) => {
    err.write(chunk);
    opts.onOutput?.(chunk.toString('utf8'));
  });
  const exited = new Promise<number | null>((resolve) => {
    child.once('error', () => {
      live.delete(child);
      resolve(null);
    });
    child.once('close', (code) => {
      live.delete(child);
      const closes = [...logs.values()].map((s) => new Promise<void>((done) => s.end(() => done())));
      void Promise.all(closes).then(() => resolve(code));
    });
  });
  if (child.pid === undefined) throw new Error(`could not start ${command}`);
  const pid = child.pid;
  const stop = async (graceMs = 3000): Promise<void> => {
    killGroup(child, 'SIGTERM');
    const timer = setTimeout(() => killGroup(child, 'SIGKILL'), graceMs);
    try {
      await exited;
    } finally {
      clearTimeout(timer);
    }
  };
  return { child, pid, exited, stop };
}

export interface RunResult {
  readonly code: number | null;
  readonly timedOut: boolean;
  readonly durationMs: number;
}

/** Run to completion, killing the child's group if it outlives `timeoutMs`. */
export async function runLogged(
  command: string,
  args: readonly string[],
  opts: SpawnOptions & { readonly timeoutMs: number },
): Promise<RunResult> {
  const started = performance.now();
  const proc = spawnLogged(command, args, opts);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    void proc.stop(2000);
  }, opts.timeoutMs);
  try {
    const code = await proc.exited;
    return { code, timedOut, durationMs: Math.round(performance.now() - started) };
  } finally {
    clearTimeout(timer);
  }
}

/** Run a short command and return its stdout; throws with its stderr on failure. */
export async function capture(
  command: string,
  args: readonly string[],
  opts: { readonly cwd?: string; readonly timeoutMs: number; readonly env?: NodeJS.ProcessEnv },
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  installExitHook();
  const child = spawn(command, [...args], {
    cwd: opts.cwd,
    env: opts.env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  live.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const timer = setTimeout(() => killGroup(child, 'SIGKILL'), opts.timeoutMs);
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (c) => resolve(c));
    });
    return { code, stdout, stderr };
  } finally {
    clearTimeout(timer);
    live.delete(child);
  }
}
