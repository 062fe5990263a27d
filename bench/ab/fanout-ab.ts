/**
 * A/B of the fan-out frame path between two checkouts of this repository (e.g. `git worktree add DIR
 * <commit>` with node_modules), interleaved in one run on the same machine state: the fan-out benchmark's
 * case (bench/lib/fanout-case.ts, each checkout's own copy and build) with N observers on the `ws` binding,
 * on the edge-uws and edge-ws targets, alternating which checkout goes first. Prints one JSON line per case
 * on stderr and a summary on stdout: frames per CPU-second of the edge process (delivered frames / its CPU
 * time), median and range per checkout and target, and the ratio of medians (after / before); the same for
 * delivered MiB per CPU-second, which weighs a 64 KiB camera frame as more than a 73-byte one. Node 20
 * (the patched copy with uWS) unless `--node24`.
 *
 *   node --import tsx bench/ab/fanout-ab.ts --base DIR --after DIR [--reps 3] [--observers 1000]
 *        [--workloads small,mixed] [--flip] [--node24] [--out FILE]
 */
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { BenchContext } from '../lib/context.js';
import type { CaseResult, Target, Workload } from '../lib/fanout-case.js';

type FanoutCase = typeof import('../lib/fanout-case.js');
type RuntimeModule = typeof import('../lib/runtime.js');
type BuildModule = typeof import('../lib/build.js');

interface Checkout {
  readonly name: 'base' | 'after';
  readonly dir: string;
  readonly runCase: FanoutCase['runCase'];
  readonly ctx: BenchContext;
}

const MIXED: Workload = {
  proprioHz: 100,
  cameraHz: 30,
  cameraWidth: 256,
  cameraHeight: 256,
  channels: ['proprio', 'camera'],
};
const WORKLOADS: Record<string, Workload> = { mixed: MIXED, small: { ...MIXED, channels: ['proprio'] } };
const TARGETS: readonly Target[] = ['edge-uws', 'edge-ws'];

interface AbRow {
  readonly rep: number;
  readonly workload: string;
  readonly target: Target;
  readonly checkout: 'base' | 'after';
  readonly frames_per_cpu_s?: number;
  readonly mib_per_cpu_s?: number;
  readonly cpu_us_per_frame?: number;
  readonly delivered_fps?: number;
  readonly delivered_ratio?: number;
  readonly server_cpu_pct?: number;
  readonly opened?: number;
  readonly loadavg_1m: number;
  readonly error?: string;
}

async function checkout(name: 'base' | 'after', dir: string, major: 20 | 24): Promise<Checkout> {
  const { runCase } = (await import(resolve(dir, 'bench/lib/fanout-case.ts'))) as FanoutCase;
  const { resolveRuntime } = (await import(resolve(dir, 'bench/lib/runtime.ts'))) as RuntimeModule;
  const { buildForBench } = (await import(resolve(dir, 'bench/lib/build.ts'))) as BuildModule;
  const runtime = { ...resolveRuntime(major), build: buildForBench() };
  const log = (line: string): void => void process.stderr.write(`[${name}] ${line}\n`);
  log(`${dir}: ${runtime.version} (${runtime.node}), uws ${runtime.uws.ok ? 'loads' : 'unavailable'}`);
  return { name, dir, runCase, ctx: { runtime, full: true, durationS: 10, log } };
}

function row(rep: number, workload: string, target: Target, c: Checkout, r: CaseResult, load: number): AbRow {
  return {
    rep,
    workload,
    target,
    checkout: c.name,
    frames_per_cpu_s: Math.round(1e6 / r.server.cpu_us_per_frame),
    mib_per_cpu_s: Math.round(r.delivered_mib_s / (r.server.cpu_pct / 100)),
    cpu_us_per_frame: r.server.cpu_us_per_frame,
    delivered_fps: r.healthy.delivered_fps,
    delivered_ratio: r.delivered_ratio,
    server_cpu_pct: r.server.cpu_pct,
    opened: r.opened,
    loadavg_1m: load,
  };
}

function median(xs: readonly number[]): number {
  const v = [...xs].sort((a, b) => a - b);
  const m = Math.floor(v.length / 2);
  return v.length % 2 === 1 ? v[m]! : (v[m - 1]! + v[m]!) / 2;
}

type Measure = 'frames_per_cpu_s' | 'mib_per_cpu_s';

function spread(xs: readonly number[]): Record<string, number> {
  return { n: xs.length, median: median(xs), min: Math.min(...xs), max: Math.max(...xs) };
}

function summary(rows: readonly AbRow[]): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const workload of new Set(rows.map((r) => r.workload))) {
    for (const target of TARGETS) {
      const of = (c: 'base' | 'after', m: Measure) =>
        rows
          .filter((r) => r.workload === workload && r.target === target && r.checkout === c)
          .flatMap((r) => (r[m] !== undefined ? [r[m]] : []));
      for (const measure of ['frames_per_cpu_s', 'mib_per_cpu_s'] as const) {
        const base = of('base', measure);
        const after = of('after', measure);
        if (base.length === 0 || after.length === 0) continue;
        out.push({
          workload,
          target,
          measure,
          base: spread(base),
          after: spread(after),
          ratio_of_medians: Math.round((median(after) / median(base)) * 1000) / 1000,
        });
      }
    }
  }
  return out;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      base: { type: 'string' },
      after: { type: 'string' },
      reps: { type: 'string', default: '3' },
      observers: { type: 'string', default: '1000' },
      workloads: { type: 'string', default: 'small' },
      flip: { type: 'boolean', default: false },
      node24: { type: 'boolean', default: false },
      out: { type: 'string' },
    },
  });
  if (values.base === undefined || values.after === undefined) {
    console.error('usage: bench/ab/fanout-ab.ts --base DIR --after DIR [--reps N] [--observers N] ...');
    process.exitCode = 2;
    return;
  }
  const major = values.node24 ? 24 : 20;
  const checkouts = [
    await checkout('base', values.base, major),
    await checkout('after', values.after, major),
  ];
  const observers = Number(values.observers);
  const rows: AbRow[] = [];
  const started = new Date().toISOString();
  for (let rep = 0; rep < Number(values.reps); rep++) {
    for (const workload of values.workloads.split(',')) {
      for (const [i, target] of TARGETS.entries()) {
        const first = (rep + i + (values.flip ? 1 : 0)) % 2 === 0;
        for (const c of first ? checkouts : [...checkouts].reverse()) {
          const load = Math.round(loadavg()[0]! * 100) / 100;
          const options = {
            target,
            observers,
            warmupS: 3,
            durationS: 10,
            workload: WORKLOADS[workload]!,
            perGenerator: 500,
          };
          let r: AbRow;
          try {
            r = row(rep, workload, target, c, await c.runCase(c.ctx, options), load);
          } catch (err) {
            r = { rep, workload, target, checkout: c.name, loadavg_1m: load, error: String(err) };
          }
          rows.push(r);
          process.stderr.write(`${JSON.stringify(r)}\n`);
        }
      }
    }
  }
  const result = { started, finished: new Date().toISOString(), observers, rows, summary: summary(rows) };
  if (values.out !== undefined) writeFileSync(values.out, `${JSON.stringify(result, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(result.summary, null, 2)}\n`);
}

await main();
