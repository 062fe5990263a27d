/**
 * SIGHUP in `serve` and `demo` as processes: an operator's SIGHUP re-reads the credentials (the process runs
 * on), while the SIGHUP a terminal sends when it hangs up (its window closed) stops the edge, so it does not
 * live on detached, holding its ports. The terminal is a real pseudo-terminal (util-linux `script`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { httpStatus } from '../support/edge-process.js';

const root = join(import.meta.dirname, '..', '..');
const SCRIPT = '/usr/bin/script';
const children: ChildProcess[] = [];
/** Edge processes under `script`: killed too, should a test fail with one still running. */
const edges: number[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  for (const pid of edges.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

interface Run {
  readonly child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

function run(command: string, args: readonly string[], env: NodeJS.ProcessEnv): Run {
  const child = spawn(command, args, { cwd: root, env: { ...process.env, ...env } });
  children.push(child);
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return {
    child,
    output: () => out,
    exited: new Promise((resolve) => child.once('exit', (code) => resolve(code))),
  };
}

async function until<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  what: string,
  ms = 20_000,
): Promise<T> {
  for (const end = Date.now() + ms; ;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The `edge_started` line's admin port, once it is printed. */
function adminPort(out: string): number | undefined {
  const m = /"admin":"127\.0\.0\.1:(\d+)"/.exec(out);
  return m === null ? undefined : Number(m[1]);
}

const EDGE = [process.execPath, '--import', 'tsx', 'src/cli/awp-edge.ts'];
const SERVE = [
  'serve',
  '--upstream',
  'ws://127.0.0.1:9/',
  '--listen',
  '127.0.0.1:0',
  '--admin',
  '127.0.0.1:0',
];

describe.skipIf(!existsSync(SCRIPT))('SIGHUP in a terminal', () => {
  /** `awp-edge serve` in a pseudo-terminal of its own (`script` runs it as the session leader). */
  function inTerminal(): Run {
    return run(SCRIPT, ['-qfec', [...EDGE, ...SERVE, '--engine', 'ws'].join(' '), '/dev/null'], {
      AWP_EDGE_AGENT_TOKENS: 'signals-test-token',
    });
  }

  /** The edge process: the descendant of `script` running awp-edge.ts (its child, or the shell's). */
  function edgePid(r: Run): number | undefined {
    const childrenOf = (pid: number): number[] => {
      const file = `/proc/${pid}/task/${pid}/children`;
      return existsSync(file) ? readFileSync(file, 'utf8').trim().split(' ').filter(Boolean).map(Number) : [];
    };
    // The node process itself: `script`, a shell that did not exec, or a fork not yet exec'd carry the
    // same command line, and a SIGHUP sent to one of them would never reach the edge.
    const node = realpathSync(process.execPath);
    const isEdge = (pid: number): boolean => {
      try {
        return (
          readlinkSync(`/proc/${pid}/exe`) === node &&
          readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('awp-edge.ts')
        );
      } catch {
        return false;
      }
    };
    const queue = childrenOf(r.child.pid!);
    for (let pid = queue.shift(); pid !== undefined; pid = queue.shift()) {
      if (isEdge(pid)) {
        if (!edges.includes(pid)) edges.push(pid);
        return pid;
      }
      queue.push(...childrenOf(pid));
    }
    return undefined;
  }

  it('an operator SIGHUP re-reads the credentials and the edge runs on', async () => {
    const r = inTerminal();
    const port = await until(() => adminPort(r.output()), 'the edge to listen');
    const pid = await until(() => edgePid(r), 'the edge process');
    process.kill(pid, 'SIGHUP');
    await until(
      () => (r.output().includes('"event":"credentials_reloaded"') ? true : undefined),
      'the reload line',
    );
    expect(r.output()).toContain(
      'credentials reloaded: nothing changed (no credential files: environment variables and literal values are read once, at start)',
    );
    expect(await httpStatus(`http://127.0.0.1:${port}/healthz`)).toBe(200);
  }, 60_000);

  it('a terminal that hangs up stops the edge (its ports are free)', async () => {
    const r = inTerminal();
    const port = await until(() => adminPort(r.output()), 'the edge to listen');
    const pid = await until(() => edgePid(r), 'the edge process');
    r.child.kill('SIGKILL'); // the terminal goes away: the kernel hangs up the edge's session
    await until(() => {
      try {
        process.kill(pid, 0);
        return undefined;
      } catch {
        return true;
      }
    }, 'the edge process to end');
    expect(await httpStatus(`http://127.0.0.1:${port}/healthz`)).toBe(0);
  }, 60_000);
});

describe('SIGHUP without a terminal', () => {
  it('awp-edge demo re-reads its credentials on SIGHUP and stops on SIGINT', async () => {
    const r = run(
      process.execPath,
      [...EDGE.slice(1), 'demo', '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0', '--engine', 'ws'],
      {
        AWP_EDGE_AGENT_TOKENS: 'signals-demo-token',
      },
    );
    await until(() => (r.output().includes('Ctrl-C stops.') ? true : undefined), 'the demo banner');
    r.child.kill('SIGHUP');
    await until(
      () => (r.output().includes('"event":"credentials_reloaded"') ? true : undefined),
      'the reload line',
    );
    expect(r.child.exitCode).toBeNull();
    r.child.kill('SIGINT');
    expect(await r.exited).toBe(0);
  }, 60_000);
});
