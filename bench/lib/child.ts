/**
 * The parent side of a benchmark process: spawned on a chosen Node runtime (compiled, or through tsx), optionally
 * with a raised open-file limit (prlimit), driven by request/answer messages over IPC (see ipc.ts).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export interface ChildOptions {
  /** The node binary to run. */
  readonly node: string;
  /** Label for errors. */
  readonly name: string;
  /** Open-file limit the child needs (raised with prlimit when above the current one). */
  readonly nofile?: number;
  readonly execArgv?: readonly string[];
  readonly startTimeoutMs?: number;
  /** Inherit stdout (default: ignored). */
  readonly stdout?: boolean;
  /** Run the compiled entry point from this build directory (build.ts) instead of the source through tsx. */
  readonly build?: string | undefined;
  /** Run at this niceness (every thread of the process: `nice` execs it in place). */
  readonly nice?: number;
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

let currentNofile: number | undefined;
/** This process's soft open-file limit (children inherit it). */
export function nofileLimit(): number {
  if (currentNofile === undefined) {
    const r = spawnSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' });
    currentNofile = Number(r.stdout.trim()) || 1024;
  }
  return currentNofile;
}

const raisable = new Map<number, boolean>();
/**
 * The largest open-file limit up to `wanted` a child can get: `wanted` if prlimit may set it (raising
 * the hard limit needs CAP_SYS_RESOURCE), else this process's limit.
 */
export function nofileCeiling(wanted: number): number {
  if (wanted <= nofileLimit()) return wanted;
  let ok = raisable.get(wanted);
  if (ok === undefined) {
    ok = spawnSync('prlimit', [`--nofile=${wanted}:${wanted}`, 'true']).status === 0;
    raisable.set(wanted, ok);
  }
  return ok ? wanted : nofileLimit();
}

export class Child {
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve: (m: Record<string, unknown>) => void; reject: (e: Error) => void }
  >();
  private exitInfo: string | null = null;
  readonly exited: Promise<void>;

  private constructor(
    readonly name: string,
    private readonly proc: ChildProcess,
    readonly hello: Record<string, unknown>,
  ) {
    this.exited = new Promise((done) => {
      if (proc.exitCode !== null || proc.signalCode !== null) done();
      else proc.once('exit', () => done());
    });
    proc.on('message', (raw: unknown) => {
      const m = raw as Record<string, unknown> & { id?: number; ok?: boolean; error?: string };
      if (m.id === undefined) return;
      const p = this.pending.get(m.id);
      if (p === undefined) return;
      this.pending.delete(m.id);
      if (m.ok === true) p.resolve(m);
      else p.reject(new Error(`${name}: ${m.error ?? 'failed'}`));
    });
    proc.once('exit', (code, signal) => {
      live.delete(proc);
      this.exitInfo = `exited (code ${String(code)}, signal ${String(signal)})`;
      for (const p of this.pending.values()) p.reject(new Error(`${name} ${this.exitInfo}`));
      this.pending.clear();
    });
  }

  get pid(): number {
    return this.proc.pid ?? 0;
  }

  static start(script: string, args: readonly string[], opts: ChildOptions): Promise<Child> {
    const entry =
      opts.build !== undefined
        ? [resolve(opts.build, script.replace(/\.ts$/, '.js'))]
        : ['--import', 'tsx', resolve(ROOT, script)];
    const nodeArgs = [...(opts.execArgv ?? []), ...entry, ...args];
    let cmd = opts.node;
    let argv = nodeArgs;
    if (
      opts.nofile !== undefined &&
      opts.nofile > nofileLimit() &&
      nofileCeiling(opts.nofile) === opts.nofile
    ) {
      // prlimit execs the command in place: the pid and the IPC channel are the node process's.
      cmd = 'prlimit';
      argv = [`--nofile=${opts.nofile}:${opts.nofile}`, opts.node, ...nodeArgs];
    }
    if (opts.nice !== undefined) {
      argv = ['-n', String(opts.nice), cmd, ...argv];
      cmd = 'nice';
    }
    const proc = spawn(cmd, argv, {
      cwd: ROOT,
      stdio: ['ignore', opts.stdout === true ? 'inherit' : 'ignore', 'inherit', 'ipc'],
    });
    live.add(proc);
    return new Promise((resolveStart, reject) => {
      const timer = setTimeout(() => {
        proc.kill('SIGKILL');
        reject(new Error(`${opts.name} did not start within ${opts.startTimeoutMs ?? 30_000} ms`));
      }, opts.startTimeoutMs ?? 30_000);
      proc.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      proc.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(
          new Error(`${opts.name} exited before starting (code ${String(code)}, signal ${String(signal)})`),
        );
      });
      const first = (m: unknown) => {
        const msg = m as Record<string, unknown>;
        if (msg.type !== 'hello') return;
        proc.off('message', first);
        clearTimeout(timer);
        resolveStart(new Child(opts.name, proc, msg));
      };
      proc.on('message', first);
    });
  }

  request<T extends Record<string, unknown> = Record<string, unknown>>(
    type: string,
    body: Record<string, unknown> = {},
    timeoutMs = 60_000,
  ): Promise<T> {
    if (this.exitInfo !== null) return Promise.reject(new Error(`${this.name} ${this.exitInfo}`));
    const id = this.nextId++;
    return new Promise<T>((resolveReq, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${this.name} did not answer ${type} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (m) => {
          clearTimeout(timer);
          resolveReq(m as T);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.proc.send({ ...body, type, id });
    });
  }

  /** Disconnects (the child exits by itself), SIGKILL after a grace period. */
  async stop(graceMs = 10_000): Promise<void> {
    if (this.exitInfo !== null) return;
    if (this.proc.connected) this.proc.disconnect();
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** Stops every child given, in parallel, ignoring ones already gone. */
export async function stopAll(children: readonly (Child | undefined)[]): Promise<void> {
  await Promise.all(children.map((c) => (c !== undefined ? c.stop() : Promise.resolve())));
}
