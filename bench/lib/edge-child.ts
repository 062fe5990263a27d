/**
 * The edge in its own process, as `awp-edge serve` runs it (Edge.start on a validated config), with an
 * IPC channel for the benchmark: ports in the hello, memory readings (after a full GC when the process
 * runs with --expose-gc) and event-loop delay on request. argv[2]: the raw config (JSON), validated like a config file.
 */
import { PerformanceObserver, monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { writeHeapSnapshot } from 'node:v8';
import { validateConfig } from '../../src/config/load.js';
import { Edge } from '../../src/edge/edge.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { memoryAfterGc, serve } from './ipc.js';

const raw = JSON.parse(process.argv[2] ?? '{}') as Record<string, unknown>;
const config = validateConfig(raw, 'bench', process.env);
const edge = await Edge.start(config, { log: createLogger(config.log_level) });

// Event-loop delay: how long a timer waited behind other work (frames fanned out in one turn, scrapes).
const RESOLUTION_MS = 5;
const delay = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
delay.enable();
/** Event-loop utilisation since loop-reset: busy share of wall time, on a CPU or waiting for one. */
let elu = performance.eventLoopUtilization();
/** The histogram holds intervals between samples: the delay is what exceeds the sampling period. */
const ms = (ns: number) => Math.max(0, Math.round((ns - RESOLUTION_MS * 1e6) / 1e4) / 100);

/** GC pauses since loop-reset, by kind (scavenge, mark-compact...): what of the loop's delay is the GC's. */
const KINDS: Record<number, string> = { 1: 'minor', 2: 'major', 4: 'incremental', 8: 'weakcb' };
let gc = new Map<string, { count: number; total_ms: number; max_ms: number; over_5ms: number }>();
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    const kind = KINDS[(e as { detail?: { kind?: number } }).detail?.kind ?? 0] ?? 'other';
    const g = gc.get(kind) ?? { count: 0, total_ms: 0, max_ms: 0, over_5ms: 0 };
    g.count++;
    g.total_ms += e.duration;
    g.max_ms = Math.max(g.max_ms, e.duration);
    if (e.duration > 5) g.over_5ms++;
    gc.set(kind, g);
  }
}).observe({ entryTypes: ['gc'] });
const round = (x: number) => Math.round(x * 100) / 100;

/**
 * AWP_BENCH_ALLOC_PROFILE_DIR: a sampling profile of what the edge allocates over the window (loop-reset
 * to loop), garbage included, written there as a .heapprofile (open it in Chrome DevTools). What --heap-prof
 * writes at exit holds only what is still live, not what keeps the scavenger busy.
 */
const allocDir = process.env.AWP_BENCH_ALLOC_PROFILE_DIR;
/**
 * AWP_BENCH_CPU_PROFILE_DIR: a CPU profile of the edge's main thread over the window only (setup, such as
 * thousands of upgrades and subscriptions, left out), written there as a .cpuprofile.
 */
const cpuDir = process.env.AWP_BENCH_CPU_PROFILE_DIR;
const inspector = allocDir === undefined && cpuDir === undefined ? undefined : new Session();
inspector?.connect();
async function windowProfiles(start: boolean): Promise<void> {
  if (inspector === undefined) return;
  if (start) {
    if (allocDir !== undefined)
      await inspector.post('HeapProfiler.startSampling', {
        samplingInterval: 32_768,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
    if (cpuDir !== undefined) {
      await inspector.post('Profiler.enable');
      await inspector.post('Profiler.start');
    }
    return;
  }
  if (allocDir !== undefined) {
    const { profile } = await inspector.post('HeapProfiler.stopSampling');
    writeFileSync(`${allocDir}/edge-${process.pid}.heapprofile`, JSON.stringify(profile));
  }
  if (cpuDir !== undefined) {
    const { profile } = await inspector.post('Profiler.stop');
    writeFileSync(`${cpuDir}/edge-${process.pid}.cpuprofile`, JSON.stringify(profile));
  }
}

serve(
  {
    memory: memoryAfterGc,
    /** A V8 heap snapshot written to `path` (for memory analysis by hand). */
    'heap-snapshot': (m) => ({ file: writeHeapSnapshot(m.path as string) }),
    'loop-reset': async () => {
      await windowProfiles(true);
      delay.reset();
      elu = performance.eventLoopUtilization();
      gc = new Map();
      return {};
    },
    loop: async () => {
      await windowProfiles(false);
      return loopReport();
    },
    close: async () => {
      await edge.close();
      return {};
    },
  },
  { port: edge.port, adminPort: edge.adminPort, engine: edge.engine },
);

function loopReport() {
  return {
    samples: delay.count,
    p50_ms: ms(delay.percentile(50)),
    p99_ms: ms(delay.percentile(99)),
    max_ms: ms(delay.max),
    elu: Math.round(performance.eventLoopUtilization(elu).utilization * 1000) / 1000,
    gc: Object.fromEntries(
      [...gc].map(([k, g]) => [k, { ...g, total_ms: round(g.total_ms), max_ms: round(g.max_ms) }]),
    ),
  };
}
