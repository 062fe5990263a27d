/**
 * `npm run bench [-- NAME...] [--full] [--duration S] [--node24] [--tsx] [--record] [--out FILE]`
 *
 * Runs every benchmark scenario, or the ones named, each printing one JSON summary on stdout (progress on
 * stderr), then the machine, the targets checked against the figures, and (with --out) the whole
 * run as one JSON file. Default sizes are quick (a few minutes in all); --full runs the sizes
 * (1,000 observers, 10,000 sessions). Every process of a scenario runs on one Node binary: the
 * uWebSockets.js-capable runtime of `.ci/runtimes.sh` when present (see bench/lib/runtime.ts), running
 * code compiled by tsc as production does (bench/lib/build.ts; --tsx runs the sources through tsx).
 *
 * Scenarios: fanout, relay, slow-consumers, http, memory, frame-peek, tiers (edges in front of edges).
 * `fanout --record` runs the fan-out case with the flight recorder off and on instead (fanout-record).
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { BUILD_DIR, buildForBench } from './lib/build.js';
import { ROOT } from './lib/child.js';
import type { BenchContext } from './lib/context.js';
import { resolveRuntime, type Runtime } from './lib/runtime.js';
import { checkTargets } from './lib/targets.js';
import { runFanout } from './scenarios/fanout.js';
import { runFanoutRecord } from './scenarios/fanout-record.js';
import { runHttp } from './scenarios/http.js';
import { runMemory } from './scenarios/memory.js';
import { runOverload } from './scenarios/overload.js';
import { runRelay } from './scenarios/relay.js';
import { runSlowConsumers } from './scenarios/slow-consumers.js';
import { runTiers } from './scenarios/tiers.js';

type Scenario = (ctx: BenchContext) => Promise<unknown>;

/** The frame-peek micro-benchmark in its own process, as its header says to run it. */
const framePeek: Scenario = (ctx) =>
  new Promise((resolve, reject) => {
    const entry =
      ctx.runtime.build !== undefined
        ? [join(ctx.runtime.build, 'bench/frame-peek.js')]
        : ['--import', 'tsx', 'bench/frame-peek.ts'];
    const child = spawn(ctx.runtime.node, ['--expose-gc', ...entry], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`frame-peek exited with ${String(code)}`));
      else resolve(JSON.parse(out) as unknown);
    });
  });

const SCENARIOS: Record<string, Scenario> = {
  fanout: runFanout,
  'fanout-record': runFanoutRecord,
  relay: runRelay,
  'slow-consumers': runSlowConsumers,
  http: runHttp,
  memory: runMemory,
  'frame-peek': framePeek,
  overload: runOverload,
  tiers: runTiers,
};
/** Scenarios a run without names leaves out (long; run by name: `npm run bench -- overload [--node24]`). */
const NAMED_ONLY = new Set(['overload', 'fanout-record']);

function machine(rt: Runtime): Record<string, unknown> {
  let model = cpus()[0]?.model ?? 'unknown';
  try {
    model = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? model;
  } catch {
    // not Linux: os.cpus() is the answer
  }
  return {
    cores: cpus().length,
    cpu_model: model,
    memory_gib: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    kernel: release(),
    node: rt.version,
    node_binary: rt.node,
    node_source: rt.source,
    uws_loads: rt.uws.ok,
    code: rt.build !== undefined ? `compiled by tsc (${rt.build})` : 'sources through tsx',
    ...(rt.uws.ok ? {} : { uws_reason: rt.uws.reason }),
    runner_node: process.version,
  };
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      full: { type: 'boolean', default: false },
      quick: { type: 'boolean', default: false },
      duration: { type: 'string' },
      node24: { type: 'boolean', default: false },
      tsx: { type: 'boolean', default: false },
      out: { type: 'string' },
      record: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  const unknown = positionals.filter((p) => !(p in SCENARIOS));
  if (values.help || unknown.length > 0) {
    if (unknown.length > 0) console.error(`unknown scenario(s): ${unknown.join(', ')}`);
    console.error(
      `usage: npm run bench [-- ${Object.keys(SCENARIOS).join('|')} ...] [--full] [--duration S] [--node24] [--tsx] [--record] [--out FILE]`,
    );
    process.exitCode = values.help ? 0 : 2;
    return;
  }
  const chosen =
    positionals.length > 0 ? positionals : Object.keys(SCENARIOS).filter((n) => !NAMED_ONLY.has(n));
  // --record: the fan-out scenario measures the flight recorder's cost (recording off and on).
  const names = values.record ? chosen.map((n) => (n === 'fanout' ? 'fanout-record' : n)) : chosen;
  process.stderr.write(
    values.tsx
      ? 'processes run the sources through tsx\n'
      : `compiling src/ and bench/lib/ (tsc, ${BUILD_DIR})\n`,
  );
  const runtime: Runtime = {
    ...resolveRuntime(values.node24 ? 24 : 20),
    build: values.tsx ? undefined : buildForBench(),
  };
  const ctx: BenchContext = {
    runtime,
    full: values.full && !values.quick,
    durationS: values.duration !== undefined ? Number(values.duration) : undefined,
    log: (line) => process.stderr.write(`${line}\n`),
  };
  const started = new Date();
  const header = {
    command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
    date: started.toISOString(),
    mode: ctx.full ? 'full' : 'quick',
    machine: machine(runtime),
  };
  ctx.log(
    `awp-edge bench (${header.mode}) on ${String(header.machine.cores)} cores, ${runtime.version} (${runtime.node})`,
  );
  if (!runtime.uws.ok) ctx.log(`uWebSockets.js unavailable: ${runtime.uws.reason}; uws cases are skipped`);
  const results: Record<string, unknown> = {};
  const load: Record<string, { before: number[]; after: number[]; seconds: number }> = {};
  for (const name of names) {
    const before = loadavg().map((x) => Math.round(x * 100) / 100);
    const t0 = performance.now();
    try {
      results[name] = await SCENARIOS[name]!(ctx);
    } catch (err) {
      results[name] = { bench: name, error: err instanceof Error ? (err.stack ?? err.message) : String(err) };
      process.exitCode = 1;
    }
    load[name] = {
      before,
      after: loadavg().map((x) => Math.round(x * 100) / 100),
      seconds: Math.round((performance.now() - t0) / 1000),
    };
    process.stdout.write(`${JSON.stringify(results[name], null, 2)}\n`);
  }
  const targets = checkTargets(results);
  const tail = { ...header, load_average: load, targets };
  process.stdout.write(`${JSON.stringify(tail, null, 2)}\n`);
  if (values.out !== undefined)
    writeFileSync(values.out, `${JSON.stringify({ ...tail, results }, null, 2)}\n`);
}

await main();
