/**
 * Slow consumers: N observers of the fan-out workload through the edge, 10 % of them stalled (their
 * stream connections stop reading at the TCP level before the window), against the same N with no
 * stall, in the same run: what the healthy observers receive, and their latency, must not change.
 * The two alternate (2 repetitions quick, 3 full) and the medians of the per-pair differences are kept,
 * because one 5-10 s window's p99 on a shared 2-core machine moves by more than the effect.
 */
import { diff, ratio, type BenchContext } from '../lib/context.js';
import { runCase, type CaseResult, type Target } from '../lib/fanout-case.js';
import { UWS_HINT } from '../lib/runtime.js';
import { MIXED } from './fanout.js';

interface Pair {
  /** Delivered frames per healthy observer, stalled run / clean run. */
  readonly fps_ratio: number | null;
  readonly p50_added_us: number | null;
  readonly p99_added_us: number | null;
  /** Edge CPU per delivered frame, stalled run / clean run. */
  readonly cpu_per_frame_ratio: number | null;
  readonly stalled_closed: number;
}

export interface SlowSummary {
  readonly bench: 'slow-consumers';
  readonly uws: { available: boolean; reason?: string };
  readonly observers: number;
  readonly stalled_fraction: number;
  readonly window_s: number;
  readonly cases: (CaseResult & { stall: boolean; repetition: number })[];
  /** Per engine: the medians over repetitions, and each repetition's pair. */
  readonly effect: Record<
    string,
    { median: Omit<Pair, 'stalled_closed'>; stalled_closed: number; pairs: Pair[] }
  >;
  readonly method: string;
}

const STALL = 0.1;

function median(xs: readonly (number | null)[]): number | null {
  const v = xs.filter((x): x is number => x !== null).sort((a, b) => a - b);
  return v.length === 0 ? null : v[Math.floor(v.length / 2)]!;
}

export async function runSlowConsumers(ctx: BenchContext): Promise<SlowSummary> {
  const uwsOk = ctx.runtime.uws.ok;
  const n = ctx.full ? 200 : 100;
  const reps = ctx.full ? 3 : 2;
  const window = ctx.durationS ?? (ctx.full ? 10 : 5);
  const targets: Target[] = uwsOk ? ['edge-ws', 'edge-uws'] : ['edge-ws'];
  const cases: SlowSummary['cases'] = [];
  const effect: SlowSummary['effect'] = {};
  for (const target of targets) {
    const pairs: Pair[] = [];
    for (let rep = 1; rep <= reps; rep++) {
      const pair: Partial<Record<'with' | 'without', CaseResult>> = {};
      for (const stall of [false, true]) {
        ctx.log(
          `slow-consumers: ${target} x ${n} observers, ${stall ? `${STALL * 100} % stalled` : 'no stall'} (${window} s, #${rep})`,
        );
        const r = await runCase(ctx, {
          target,
          observers: n,
          warmupS: 2,
          durationS: window,
          workload: MIXED,
          perGenerator: 500,
          stallFraction: stall ? STALL : 0,
        });
        ctx.log(
          `  healthy ${r.healthy.delivered_fps} fps (${r.delivered_ratio}), p99 ${r.healthy.latency.p99_us} us`,
        );
        cases.push({ ...r, stall, repetition: rep });
        pair[stall ? 'with' : 'without'] = r;
      }
      const a = pair.with!;
      const b = pair.without!;
      pairs.push({
        // Per healthy observer: the stalled run has 10 % fewer healthy observers.
        fps_ratio: ratio(
          a.healthy.delivered_fps / a.healthy.observers,
          b.healthy.delivered_fps / b.healthy.observers,
        ),
        p50_added_us: diff(a.healthy.latency.p50_us, b.healthy.latency.p50_us),
        p99_added_us: diff(a.healthy.latency.p99_us, b.healthy.latency.p99_us),
        cpu_per_frame_ratio: ratio(a.server.cpu_us_per_frame, b.server.cpu_us_per_frame),
        stalled_closed: a.stalled?.closed ?? 0,
      });
    }
    effect[target] = {
      median: {
        fps_ratio: median(pairs.map((p) => p.fps_ratio)),
        p50_added_us: median(pairs.map((p) => p.p50_added_us)),
        p99_added_us: median(pairs.map((p) => p.p99_added_us)),
        cpu_per_frame_ratio: median(pairs.map((p) => p.cpu_per_frame_ratio)),
      },
      stalled_closed: Math.max(...pairs.map((p) => p.stalled_closed)),
      pairs,
    };
  }
  return {
    bench: 'slow-consumers',
    uws: uwsOk ? { available: true } : { available: false, reason: `${ctx.runtime.uws.reason}; ${UWS_HINT}` },
    observers: n,
    stalled_fraction: STALL,
    window_s: window,
    cases,
    effect,
    method:
      "Stalled observers pause their stream sockets (no reads; the kernel buffers fill, then the edge's outbox " +
      'holds one latest-wins frame per channel) and keep answering on their control connections. fps_ratio compares ' +
      'delivered frames per healthy observer with and without the stall; cpu_per_frame_ratio the edge CPU per ' +
      'frame delivered (to anyone).',
  };
}
