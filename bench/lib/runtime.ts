/**
 * Which Node binary the benchmark processes run on. uWebSockets.js needs glibc >= 2.38; on an older
 * system the patched runtimes of `.ci/runtimes.sh` load it (see docs of that script). Every process of a
 * run (worlds, edges, generators, baselines) uses the same binary, so engines compare on one runtime.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { ROOT } from './child.js';

export interface Runtime {
  /** Path of the node binary. */
  readonly node: string;
  /** Where it came from (env var, .cache/runtimes/env, or this process). */
  readonly source: string;
  readonly version: string;
  /** Whether uWebSockets.js loads in it (else why not). */
  readonly uws: { readonly ok: true } | { readonly ok: false; readonly reason: string };
  /** Compiled entry points (build.ts); undefined: processes run the sources through tsx. */
  readonly build?: string | undefined;
}

function runtimesFile(): Record<string, string> {
  const file = resolve(ROOT, '.cache/runtimes/env');
  if (!existsSync(file)) return {};
  const out: Record<string, string> = {};
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim());
    if (m !== null) out[m[1]!] = m[2]!.replace(/^["']|["']$/g, '');
  }
  return out;
}

function probe(node: string): { version: string; uws: Runtime['uws'] } | undefined {
  const v = spawnSync(node, ['-p', 'process.version'], { encoding: 'utf8' });
  if (v.status !== 0) return undefined;
  const u = spawnSync(node, ['-e', "require('uWebSockets.js')"], { cwd: ROOT, encoding: 'utf8' });
  const reason = u.stderr
    .split('\n')
    .find((l) => /Error|GLIBC|not found|Cannot/.test(l))
    ?.trim();
  return {
    version: v.stdout.trim(),
    uws: u.status === 0 ? { ok: true } : { ok: false, reason: reason ?? `exit ${String(u.status)}` },
  };
}

/**
 * `AWP_BENCH_NODE` if set; else the uWS-capable runtime of `.cache/runtimes` for the wanted major
 * (`NODE20_UWS` / `NODE24_UWS`, from the environment or the env file); else this process's node.
 */
export function resolveRuntime(major: 20 | 24 = 20): Runtime {
  const file = runtimesFile();
  const key = major === 24 ? 'NODE24_UWS' : 'NODE20_UWS';
  const candidates: [string, string | undefined][] = [
    ['AWP_BENCH_NODE', process.env.AWP_BENCH_NODE],
    [key, process.env[key]],
    [`.cache/runtimes/env ${key}`, file[key]],
  ];
  if (major === 20) candidates.push(['this process', process.execPath]);
  for (const [source, node] of candidates) {
    if (node === undefined || node === '' || !existsSync(node)) continue;
    const p = probe(node);
    if (p !== undefined) return { node, source, ...p };
  }
  if (major === 24)
    throw new Error('no Node 24 runtime: run `bash .ci/runtimes.sh` first (it writes .cache/runtimes/env)');
  const p = probe(process.execPath)!;
  return { node: process.execPath, source: 'this process', ...p };
}

export const UWS_HINT =
  'uWebSockets.js does not load in this runtime; run `bash .ci/runtimes.sh` (patched runtimes in .cache/runtimes) and re-run';
