/**
 * The flight recorder's cost at fan-out load (issue 14 item 5): `npm run bench -- fanout --record`. The
 * fan-out case (one arm world, N observers of proprio and camera on ws stream connections) runs with the
 * route's recorder off and on (`record: { dir }`, class audit: every frame delivered to every observer is a
 * record, header + payload hash), alternating, three pairs, in one run. Reported: the edge's frames per
 * CPU-second with recording on over off, per pair and the median (target: at least 0.9, a cost of at
 * most 10 %), and what the recorder wrote (records, bytes, records it dropped: from the files' end records).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ratio, type BenchContext } from '../lib/context.js';
import { runCase, type CaseResult, type Target } from '../lib/fanout-case.js';
import { MIXED } from './fanout.js';

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
  readonly frames_per_cpu_s: number;
}

interface Pair {
  readonly off: Side;
  readonly on: Side & { written: Written };
  readonly frames_per_cpu_s_ratio: number | null;
  readonly fps_ratio: number | null;
}

export interface FanoutRecordSummary {
  readonly bench: 'fanout-record';
  readonly target: Target;
  readonly observers: number;
  readonly window_s: number;
  readonly pairs: Pair[];
  /** Median over the pairs of frames per CPU-second, recording on / off. */
  readonly frames_per_cpu_s_ratio_median: number | null;
  readonly method: string;
}

const METHOD =
  'Alternating pairs of the fan-out case (fresh world, edge and generators each), the route recording off, then ' +
  'on (class audit, queue_bytes 16 MiB default, files on the local disk, deleted after each case). Frames per ' +
  'CPU-second = delivered frames / the edge process CPU time in the window (/proc; the thread pool writing the ' +
  'files counts). Written/dropped read from the files afterwards (the edge process is ended without closing them).';

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

export async function runFanoutRecord(ctx: BenchContext): Promise<FanoutRecordSummary> {
  const target: Target = ctx.runtime.uws.ok ? 'edge-uws' : 'edge-ws';
  const observers = ctx.full ? 1000 : 100;
  const window = ctx.durationS ?? (ctx.full ? 10 : 5);
  const pairs: Pair[] = [];
  const run = (record?: { dir: string }) =>
    runCase(ctx, {
      target,
      observers,
      warmupS: ctx.full ? 3 : 2,
      durationS: window,
      workload: MIXED,
      perGenerator: 500,
      ...(record !== undefined && { record }),
    });
  for (let i = 0; i < 3; i++) {
    ctx.log(`fanout-record: pair ${i + 1}, ${target} x ${observers} observers, recording off`);
    const off = await run();
    const dir = mkdtempSync(join(tmpdir(), 'awp-bench-record-'));
    try {
      ctx.log(`fanout-record: pair ${i + 1}, recording on (${dir})`);
      const on = await run({ dir });
      const w = written(dir);
      const pair: Pair = {
        off: {
          delivered_fps: off.healthy.delivered_fps,
          delivered_mib_s: off.delivered_mib_s,
          cpu_pct: off.server.cpu_pct,
          frames_per_cpu_s: perCpu(off),
        },
        on: {
          delivered_fps: on.healthy.delivered_fps,
          delivered_mib_s: on.delivered_mib_s,
          cpu_pct: on.server.cpu_pct,
          frames_per_cpu_s: perCpu(on),
          written: w,
        },
        frames_per_cpu_s_ratio: ratio(perCpu(on), perCpu(off)),
        fps_ratio: ratio(on.healthy.delivered_fps, off.healthy.delivered_fps),
      };
      ctx.log(
        `  off ${pair.off.frames_per_cpu_s} frames/CPU-s (${pair.off.delivered_fps} fps, ${pair.off.delivered_mib_s} MiB/s, cpu ${pair.off.cpu_pct} %), ` +
          `on ${pair.on.frames_per_cpu_s} (${pair.on.delivered_fps} fps, ${pair.on.delivered_mib_s} MiB/s, cpu ${pair.on.cpu_pct} %): ratio ${pair.frames_per_cpu_s_ratio}; ` +
          `${w.records} records in ${w.files} files (${Math.round(w.bytes / 2 ** 20)} MiB), ${w.dropped} dropped`,
      );
      pairs.push(pair);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const ratios = pairs
    .map((p) => p.frames_per_cpu_s_ratio)
    .filter((r): r is number => r !== null)
    .sort((a, b) => a - b);
  return {
    bench: 'fanout-record',
    target,
    observers,
    window_s: window,
    pairs,
    frames_per_cpu_s_ratio_median: ratios.length > 0 ? ratios[Math.floor(ratios.length / 2)]! : null,
    method: METHOD,
  };
}
