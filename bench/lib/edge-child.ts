/**
 * The edge in its own process, as `awp-edge serve` runs it (Edge.start on a validated config), with an
 * IPC channel for the benchmark: ports in the hello, memory readings (after a full GC when the process
 * runs with --expose-gc) and event-loop delay on request. argv[2]: the raw config (JSON), validated like a config file.
 */
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
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

serve(
  {
    memory: memoryAfterGc,
    /** A V8 heap snapshot written to `path` (for memory analysis by hand). */
    'heap-snapshot': (m) => ({ file: writeHeapSnapshot(m.path as string) }),
    'loop-reset': () => {
      delay.reset();
      elu = performance.eventLoopUtilization();
      return {};
    },
    loop: () => ({
      p50_ms: ms(delay.percentile(50)),
      p99_ms: ms(delay.percentile(99)),
      max_ms: ms(delay.max),
      elu: Math.round(performance.eventLoopUtilization(elu).utilization * 1000) / 1000,
    }),
    close: async () => {
      await edge.close();
      return {};
    },
  },
  { port: edge.port, adminPort: edge.adminPort, engine: edge.engine },
);
