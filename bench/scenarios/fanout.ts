/**
 * Fan-out: one world, N observers on the `ws` binding, a 100 Hz small channel (the arm's `proprio`) and a
 * 30 Hz 64 KiB channel (`camera`). Each N runs four targets in the same run: the edge on each engine,
 * the world serving the N sessions itself (what users do without the edge), and the raw uWS broadcast
 * (the library's limit). --full adds 1,000 observers, a small-frames capacity case (proprio only,
 * 1,000 observers: per-frame cost) and the half-load cases (latency at half of each engine's maximum).
 * The peer baseline: Centrifugo v6.9.1 (built from the Go module proxy when Go is present, else skipped
 * with a note) and the edge, each restricted to the same one core, serving the same channels to the same
 * number of subscribers (300; --full adds 1,000): CPU per delivered frame, edge / Centrifugo.
 */
import { cpus } from 'node:os';
import { diff, ratio, type BenchContext } from '../lib/context.js';
import { runCase, type CaseResult, type Target, type Workload } from '../lib/fanout-case.js';
import { UWS_HINT } from '../lib/runtime.js';
import { checkWorldOrigin, type ClockCheck } from '../lib/clock.js';
import { BENCH_TOKEN, startWorld } from '../lib/setup.js';
import { CENTRIFUGO_VERSION, ensureCentrifugo } from '../lib/centrifugo.js';

export const MIXED: Workload = {
  proprioHz: 100,
  cameraHz: 30,
  cameraWidth: 256,
  cameraHeight: 256,
  channels: ['proprio', 'camera'],
};
export const SMALL: Workload = { ...MIXED, channels: ['proprio'] };

interface Brief {
  readonly delivered_ratio: number;
  readonly p50_us: number;
  readonly p99_us: number;
  readonly server_cpu_pct: number;
  readonly generator_saturated: boolean;
}

interface HalfLoadRep {
  readonly edge: Brief;
  readonly raw: Brief;
  readonly added_p50_us: number | null;
  readonly added_p99_us: number | null;
}

/** Latency at half an engine's maximum load, against the raw broadcast at the same N (alternating runs). */
export interface HalfLoad {
  readonly engine: string;
  readonly max_observers_estimate: number;
  readonly observers: number;
  readonly added_p50_us_median: number | null;
  readonly added_p99_us_median: number | null;
  readonly repetitions: HalfLoadRep[];
}

function brief(c: CaseResult): Brief {
  return {
    delivered_ratio: c.delivered_ratio,
    p50_us: c.healthy.latency.p50_us,
    p99_us: c.healthy.latency.p99_us,
    server_cpu_pct: c.server.cpu_pct,
    generator_saturated: c.generator_saturated,
  };
}

function median(xs: readonly (number | null)[]): number | null {
  const v = xs.filter((x): x is number => x !== null).sort((a, b) => a - b);
  return v.length === 0 ? null : v[Math.floor(v.length / 2)]!;
}

interface Comparison {
  readonly observers: number;
  readonly workload: string;
  /** Delivered frames per second, target / baseline. */
  readonly fps: Record<string, number | null>;
  /** Frames per CPU-second of the serving process, target / baseline (capacity per core). */
  readonly frames_per_cpu_s: Record<string, number | null>;
  /** p50 / p99 latency the edge adds over a baseline at the same N (us). */
  readonly added_latency_us: Record<string, { p50: number | null; p99: number | null }>;
}

/** One N of the peer comparison: every target on the same one core, same workload. */
interface PeerComparison {
  readonly observers: number;
  /** CPU (us) the serving process spent per frame delivered to a subscriber. */
  readonly cpu_us_per_frame: Record<string, number>;
  /** Delivered / offered per target (the same delivery: all near 1, none disconnected). */
  readonly delivered_ratio: Record<string, number>;
  readonly closed: Record<string, number>;
  /** Edge CPU per delivered frame / Centrifugo's (the target: <= 0.6). */
  readonly edge_over_centrifugo: Record<string, number | null>;
}

export type PeerSummary =
  | {
      readonly available: true;
      readonly version: string;
      readonly binary_reports: string;
      readonly core: number;
      readonly setup: string;
      readonly comparisons: PeerComparison[];
      readonly cases: (CaseResult & { workload: string })[];
    }
  | { readonly available: false; readonly version: string; readonly reason: string };

export interface FanoutSummary {
  readonly bench: 'fanout';
  readonly mode: 'quick' | 'full';
  readonly uws: { available: boolean; reason?: string };
  readonly window_s: number;
  /** How well receivers know the world's clock origin (see bench/lib/clock.ts). */
  readonly clock: ClockCheck;
  readonly cases: (CaseResult & { workload: string })[];
  readonly comparisons: Comparison[];
  readonly half_load?: HalfLoad[];
  /** Centrifugo as the peer baseline, one core each. */
  readonly peer: { readonly centrifugo: PeerSummary };
  readonly method: string;
}

const PEER_SETUP =
  'Centrifugo v6.9.1 from `go install github.com/centrifugal/centrifugo/v6@v6.9.1` (cached in .cache/), ' +
  'GOMAXPROCS=1 and taskset to one core; the edge (all its threads) pinned to the same core with taskset -a. ' +
  'Config: client.insecure (anonymous connect and subscribe), http_api.insecure, no history/presence/recovery, ' +
  'client.queue_max_size 16 MiB (default 1 MiB would disconnect a subscriber behind by half a second), ' +
  'log level error, 127.0.0.1 only. Subscribers: Centrifugo client protocol, protobuf format over WebSocket ' +
  '(binary frames like AWP; ?format=protobuf&cf_ws_frame_ping_pong=true), on the same raw WebSocket client and ' +
  'generator processes as the AWP observers, subscribing both channels after all connected. Publisher: its own ' +
  'process, POST /api/publish with b64data (keep-alive HTTP) at the world rates: proprio 100 Hz (8-byte stamp ' +
  '+ 33 bytes), camera 30 Hz (65,536 bytes). One delivered frame = one publication received by one subscriber ' +
  '(Centrifugo may put several in one WebSocket message). CPU from /proc over the same window as the edge cases.';

const METHOD =
  'Each case starts fresh processes: the source (demo arm world, or the raw uWS broadcast), the edge (for edge-* ' +
  'targets) and load generators (one per 500 observers). Observers open their sessions and ws stream connections ' +
  'first and subscribe afterwards (obs.subscribe), then a warm-up, then a window in which generators count frames ' +
  'and record latency = receipt hrtime - (world origin + ts_send_ns) on the shared CLOCK_MONOTONIC. Server CPU ' +
  'and RSS from /proc over the window; generators report their own CPU and event-loop utilisation. ' +
  'At saturation latency is queueing (frames wait in the edge->world TCP connection), so latency targets are read ' +
  'at half load.';

export async function runFanout(ctx: BenchContext): Promise<FanoutSummary> {
  const uwsOk = ctx.runtime.uws.ok;
  const window = ctx.durationS ?? (ctx.full ? 10 : 5);
  const warmup = ctx.full ? 3 : 2;
  const targets: Target[] = [
    'edge-ws',
    ...(uwsOk ? (['edge-uws'] as const) : []),
    'world',
    ...(uwsOk ? (['raw-uws'] as const) : []),
  ];
  const world = await startWorld(ctx.runtime, {});
  const clock = await checkWorldOrigin(world.url, world.origin, BENCH_TOKEN).finally(() =>
    world.child.stop(),
  );
  ctx.log(`fanout: world origin - reported origin in [${clock.origin_gap_us.join(', ')}] us`);
  const cases: (CaseResult & { workload: string })[] = [];
  const cf = await ensureCentrifugo((line) => ctx.log(line));
  if (!cf.ok) ctx.log(`fanout: Centrifugo baseline skipped: ${cf.reason}`);
  const peerCore = cpus().length - 1;
  const run = async (
    target: Target,
    n: number,
    workload: Workload,
    name: string,
    record = true,
    pinCore?: number,
  ) => {
    ctx.log(`fanout: ${name} ${target} x ${n} observers (${window} s)`);
    const r = await runCase(ctx, {
      target,
      observers: n,
      warmupS: warmup,
      durationS: window,
      workload,
      perGenerator: 500,
      ...(cf.ok ? { centrifugo: cf.binary } : {}),
      ...(pinCore !== undefined ? { pinCore } : {}),
    });
    ctx.log(
      `  delivered ${r.healthy.delivered_fps} fps of ${r.offered_fps} (${r.delivered_ratio}), p50 ${r.healthy.latency.p50_us} us, ` +
        `p99 ${r.healthy.latency.p99_us} us, server cpu ${r.server.cpu_pct} %`,
    );
    const c = { ...r, workload: name };
    if (record) cases.push(c);
    return c;
  };
  const sizes = ctx.full ? [10, 100, 1000] : [10, 100];
  for (const n of sizes) for (const t of targets) await run(t, n, MIXED, 'mixed');
  const halfLoad: HalfLoad[] = [];
  if (ctx.full) {
    for (const t of targets.filter((x) => x !== 'world')) await run(t, 1000, SMALL, 'small');
    // Half of each engine's maximum: the observers it fully served at 1,000 (N x delivered ratio), halved.
    // p99 is noisy on a shared machine: edge and raw broadcast alternate, three times, at that N.
    for (const t of uwsOk ? targets.filter((x) => x.startsWith('edge-')) : []) {
      const at1000 = cases.find((c) => c.target === t && c.observers === 1000 && c.workload === 'mixed')!;
      const max = Math.round(1000 * Math.min(1, at1000.delivered_ratio));
      const half = Math.max(10, Math.round(max / 2 / 10) * 10);
      const reps: HalfLoadRep[] = [];
      for (let i = 0; i < 3; i++) {
        const e = await run(t, half, MIXED, 'half-load', false);
        const r = await run('raw-uws', half, MIXED, 'half-load', false);
        reps.push({
          edge: brief(e),
          raw: brief(r),
          added_p50_us: diff(e.healthy.latency.p50_us, r.healthy.latency.p50_us),
          added_p99_us: diff(e.healthy.latency.p99_us, r.healthy.latency.p99_us),
        });
      }
      halfLoad.push({
        engine: t,
        max_observers_estimate: max,
        observers: half,
        added_p50_us_median: median(reps.map((x) => x.added_p50_us)),
        added_p99_us_median: median(reps.map((x) => x.added_p99_us)),
        repetitions: reps,
      });
    }
  }
  // The peer baseline: edges and Centrifugo on the same one core, Centrifugo between the edges.
  let peer: PeerSummary = { available: false, version: CENTRIFUGO_VERSION, reason: cf.ok ? '' : cf.reason };
  if (cf.ok) {
    const edges = targets.filter((t) => t.startsWith('edge-'));
    const order: Target[] = [edges[0]!, 'centrifugo', ...edges.slice(1)];
    const peerCases: (CaseResult & { workload: string })[] = [];
    for (const n of ctx.full ? [300, 1000] : [300])
      for (const t of order) peerCases.push(await run(t, n, MIXED, 'peer-1core', false, peerCore));
    peer = {
      available: true,
      version: cf.version,
      binary_reports: cf.reports,
      core: peerCore,
      setup: PEER_SETUP,
      comparisons: comparePeer(peerCases),
      cases: peerCases,
    };
  }
  return {
    bench: 'fanout',
    mode: ctx.full ? 'full' : 'quick',
    uws: uwsOk ? { available: true } : { available: false, reason: `${ctx.runtime.uws.reason}; ${UWS_HINT}` },
    window_s: window,
    clock,
    cases,
    comparisons: compare(cases),
    ...(halfLoad.length > 0 ? { half_load: halfLoad } : {}),
    peer: { centrifugo: peer },
    method: METHOD,
  };
}

function compare(cases: readonly (CaseResult & { workload: string })[]): Comparison[] {
  const groups = new Map<string, (CaseResult & { workload: string })[]>();
  for (const c of cases) {
    const k = `${c.workload}/${c.observers}`;
    groups.set(k, [...(groups.get(k) ?? []), c]);
  }
  const out: Comparison[] = [];
  for (const group of groups.values()) {
    const by = (t: Target) => group.find((c) => c.target === t);
    const pairs: [string, Target, Target][] = [
      ['edge-uws/raw-uws', 'edge-uws', 'raw-uws'],
      ['edge-ws/raw-uws', 'edge-ws', 'raw-uws'],
      ['edge-uws/edge-ws', 'edge-uws', 'edge-ws'],
      ['edge-uws/world', 'edge-uws', 'world'],
      ['edge-ws/world', 'edge-ws', 'world'],
    ];
    const fps: Record<string, number | null> = {};
    const perCpu: Record<string, number | null> = {};
    const added: Record<string, { p50: number | null; p99: number | null }> = {};
    for (const [name, a, b] of pairs) {
      const ca = by(a);
      const cb = by(b);
      if (ca === undefined || cb === undefined) continue;
      fps[name] = ratio(ca.healthy.delivered_fps, cb.healthy.delivered_fps);
      perCpu[name] = ratio(cb.server.cpu_us_per_frame, ca.server.cpu_us_per_frame);
      if (a.startsWith('edge-') && b !== 'edge-ws') {
        added[`${a} over ${b}`] = {
          p50: diff(ca.healthy.latency.p50_us, cb.healthy.latency.p50_us),
          p99: diff(ca.healthy.latency.p99_us, cb.healthy.latency.p99_us),
        };
      }
    }
    out.push({
      observers: group[0]!.observers,
      workload: group[0]!.workload,
      fps,
      frames_per_cpu_s: perCpu,
      added_latency_us: added,
    });
  }
  return out;
}

function comparePeer(cases: readonly (CaseResult & { workload: string })[]): PeerComparison[] {
  const out: PeerComparison[] = [];
  for (const n of [...new Set(cases.map((c) => c.observers))]) {
    const group = cases.filter((c) => c.observers === n);
    const per = (f: (c: CaseResult) => number) => Object.fromEntries(group.map((c) => [c.target, f(c)]));
    const base = group.find((c) => c.target === 'centrifugo')?.server.cpu_us_per_frame;
    const over: Record<string, number | null> = {};
    for (const c of group.filter((x) => x.target.startsWith('edge-')))
      over[c.target] = base === undefined ? null : ratio(c.server.cpu_us_per_frame, base);
    out.push({
      observers: n,
      cpu_us_per_frame: per((c) => c.server.cpu_us_per_frame),
      delivered_ratio: per((c) => c.delivered_ratio),
      closed: per((c) => c.healthy.closed),
      edge_over_centrifugo: over,
    });
  }
  return out;
}
