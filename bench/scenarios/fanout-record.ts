/**
 * The flight recorder's cost at fan-out load (issue 14 item 4): `npm run bench -- fanout --record`. The
 * fan-out case (one arm world, N observers on ws stream connections) runs with the route's recorder off and
 * on (`record: { dir }`, class audit: every frame delivered to every observer is recorded, by reference to
 * the hub's record of it), PAIRS pairs per workload in one run, each pair's order the reverse of the last
 * (off-on, on-off, ...: a drift of the machine over the run does not favour either side). Two workloads:
 * `small` (proprio only, 100 Hz to 1,000 observers) and `mixed` (proprio and the 64 KiB camera). On 2
 * cores the observers' processes take what the edge leaves: with topics the edge runs at 45-75 % of a
 * core in both, so per-session costs that do not scale with frames weigh more than at a saturated edge. Reported per workload: the edge's frames per CPU-second with
 * recording on over off, per pair and the median (target: at least 0.9, a cost of at most 10 %), and what
 * the recorder wrote (records, bytes, records it dropped: from the files' end records).
 * AWP_BENCH_RECORD_WORKLOADS=small or =mixed runs one workload only. AWP_BENCH_RECORD_PIN=1 gives the edge
 * core 0 to itself and puts the world and the generators on core 1 (taskset): the edge's CPU per frame is
 * then not shared with the observers' reads, which otherwise spread single pairs +-10 points.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ratio, type BenchContext } from '../lib/context.js';
import { runCase, type CaseResult, type Target, type Workload } from '../lib/fanout-case.js';
import { MIXED, SMALL } from './fanout.js';

interface Written {
  readonly files: number;
  readonly bytes: number;
  /** Lines in the files (records written). */
  readonly records: number;
  /** Records the write queue could not take, as the files say (`dropped` records). */
  readonly dropped: number;
}

/**
 * One case's figures. `delivered_mib_s` beside the frames: a 64 KiB camera frame costs the edge far more
 * to send than a proprio frame, so frames per CPU-second moves with the mix the observers took.
 */
interface Side {
  readonly delivered_fps: number;
  readonly delivered_mib_s: number;
  readonly cpu_pct: number;
  /** Of cpu_pct, the edge's main thread (the rest: GC helper threads and the file writes' thread pool). */
  readonly main_thread_cpu_pct: number;
  readonly frames_per_cpu_s: number;
  /** The edge's event loop over the window, with its GC pauses by kind: where an "on" case's CPU went. */
  readonly edge_loop?: CaseResult['edge_loop_delay_ms'];
}

interface Pair {
  readonly off: Side;
  readonly on: Side & { written: Written };
  readonly frames_per_cpu_s_ratio: number | null;
  readonly fps_ratio: number | null;
}

interface WorkloadResult {
  readonly workload: 'small' | 'mixed';
  readonly pairs: Pair[];
  /** Median over the pairs of frames per CPU-second, recording on / off. */
  readonly frames_per_cpu_s_ratio_median: number | null;
  /** Median edge CPU (% of a core) with recording off: near 100 means the edge is the bottleneck. */
  readonly off_cpu_pct_median: number | null;
}

export interface FanoutRecordSummary {
  readonly bench: 'fanout-record';
  readonly target: Target;
  readonly observers: number;
  readonly window_s: number;
  readonly workloads: WorkloadResult[];
  readonly method: string;
}

/** Pairs per workload: single pairs spread +-10 points on this machine, the size of what is measured. */
const PAIRS = 5;

const METHOD =
  'Per workload (small: proprio only; mixed: proprio and camera), 1,000 observers, ' +
  `${PAIRS} pairs of the fan-out case (fresh world, edge and generators each), the route recording off and ` +
  'on, each pair in the reverse order of the one before (off-on, on-off, ...) (class audit, queue_bytes 16 MiB default, files on the local disk, deleted after each case). Frames per ' +
  'CPU-second = delivered frames / the edge process CPU time in the window (/proc; the thread pool writing the ' +
  'files counts). Written/dropped read from the files afterwards (the edge process is ended without closing them).';

const PINNED =
  'Pinned (AWP_BENCH_RECORD_PIN=1): the edge on core 0 alone, the world and the generators on core 1 (taskset -a).';

/**
 * What the files hold (the edge's process ends without closing them: the last records and what its queue
 * held are not in them).
 */
function written(dir: string): Written {
  let files = 0;
  let bytes = 0;
  let records = 0;
  let dropped = 0;
  for (const name of readdirSync(dir)) {
    const text = readFileSync(join(dir, name), 'utf8');
    files++;
    bytes += Buffer.byteLength(text);
    for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) records++;
    for (
      let at = text.indexOf('"kind":"dropped"');
      at !== -1;
      at = text.indexOf('"kind":"dropped"', at + 1)
    ) {
      const m = /"records":(\d+)/.exec(text.slice(at, at + 200));
      dropped += m === null ? 0 : Number(m[1]);
    }
  }
  return { files, bytes, records, dropped };
}

const perCpu = (c: CaseResult) =>
  c.server.cpu_us_per_frame > 0 ? Math.round(1e6 / c.server.cpu_us_per_frame) : NaN;

const side = (c: CaseResult): Side => ({
  delivered_fps: c.healthy.delivered_fps,
  delivered_mib_s: c.delivered_mib_s,
  cpu_pct: c.server.cpu_pct,
  main_thread_cpu_pct: c.server.main_thread_cpu_pct,
  frames_per_cpu_s: perCpu(c),
  ...(c.edge_loop_delay_ms !== undefined && { edge_loop: c.edge_loop_delay_ms }),
});

function median(values: (number | null)[]): number | null {
  const v = values.filter((x): x is number => x !== null && Number.isFinite(x)).sort((a, b) => a - b);
  return v.length > 0 ? v[Math.floor(v.length / 2)]! : null;
}

const WORKLOADS: readonly { name: 'small' | 'mixed'; workload: Workload }[] = [
  { name: 'small', workload: SMALL },
  { name: 'mixed', workload: MIXED },
];

export async function runFanoutRecord(ctx: BenchContext): Promise<FanoutRecordSummary> {
  const target: Target = ctx.runtime.uws.ok ? 'edge-uws' : 'edge-ws';
  const observers = ctx.full ? 1000 : 100;
  const window = ctx.durationS ?? (ctx.full ? 10 : 5);
  const workloads: WorkloadResult[] = [];
  const only = process.env.AWP_BENCH_RECORD_WORKLOADS?.split(',');
  const pin = process.env.AWP_BENCH_RECORD_PIN === '1';
  for (const { name, workload } of WORKLOADS.filter((w) => only === undefined || only.includes(w.name))) {
    const run = (record?: { dir: string }) =>
      runCase(ctx, {
        target,
        observers,
        warmupS: ctx.full ? 3 : 2,
        durationS: window,
        workload,
        perGenerator: 500,
        ...(record !== undefined && { record }),
        ...(pin && { pinCore: 0, pinRest: 1 }),
      });
    const pairs: Pair[] = [];
    for (let i = 0; i < PAIRS; i++) {
      const dir = mkdtempSync(join(tmpdir(), 'awp-bench-record-'));
      try {
        const runOff = () => {
          ctx.log(`fanout-record: ${name}, pair ${i + 1}, ${target} x ${observers} observers, recording off`);
          return run();
        };
        const runOn = () => {
          ctx.log(`fanout-record: ${name}, pair ${i + 1}, recording on (${dir})`);
          return run({ dir });
        };
        const offFirst = i % 2 === 0;
        const first = await (offFirst ? runOff() : runOn());
        const second = await (offFirst ? runOn() : runOff());
        const [off, on] = offFirst ? [first, second] : [second, first];
        const w = written(dir);
        const pair: Pair = {
          off: side(off),
          on: { ...side(on), written: w },
          frames_per_cpu_s_ratio: ratio(perCpu(on), perCpu(off)),
          fps_ratio: ratio(on.healthy.delivered_fps, off.healthy.delivered_fps),
        };
        ctx.log(
          `  off ${pair.off.frames_per_cpu_s} frames/CPU-s (${pair.off.delivered_fps} fps, ${pair.off.delivered_mib_s} MiB/s, cpu ${pair.off.cpu_pct} %, main thread ${pair.off.main_thread_cpu_pct} %), ` +
            `on ${pair.on.frames_per_cpu_s} (${pair.on.delivered_fps} fps, ${pair.on.delivered_mib_s} MiB/s, cpu ${pair.on.cpu_pct} %, main thread ${pair.on.main_thread_cpu_pct} %): ratio ${pair.frames_per_cpu_s_ratio}; ` +
            `${w.records} records in ${w.files} files (${Math.round(w.bytes / 2 ** 20)} MiB), ${w.dropped} dropped`,
        );
        pairs.push(pair);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
    workloads.push({
      workload: name,
      pairs,
      frames_per_cpu_s_ratio_median: median(pairs.map((p) => p.frames_per_cpu_s_ratio)),
      off_cpu_pct_median: median(pairs.map((p) => p.off.cpu_pct)),
    });
  }
  return {
    bench: 'fanout-record',
    target,
    observers,
    window_s: window,
    workloads,
    method: pin ? `${METHOD} ${PINNED}` : METHOD,
  };
}
