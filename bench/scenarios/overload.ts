/**
 * Overload: the edge offered more frames than it can write, and what happens to control. One demo arm world
 * (100 Hz proprio, 30 Hz 64 KiB camera), N observers of both channels on the `ws` stream binding, and a
 * probe in its own process (bench/lib/probe-child.ts): an observer of both channels that pings the edge
 * every 50 ms and times frame ages, a relay agent (`arm_01`) pinging the world through the edge every
 * 50 ms, and a session of its own pinging the world directly on the same tick (what the world alone takes
 * under the same load). The edge's event-loop delay comes from its process (bench/lib/edge-child.ts).
 *
 * In the same run, per engine: the probe alone (idle: the baselines), then the edge's capacity (a ramp of
 * observers until it no longer delivers what is offered; capacity = the most frames/s it delivered), then
 * 1x, 2x and 5x that capacity offered (N = factor x capacity / 130 frames/s per observer), each with the
 * probe. The engine follows the runtime: uWebSockets.js on Node 24 (production), `ws` on Node 20;
 * AWP_BENCH_OVERLOAD_ENGINES=ws,uws runs both. AWP_BENCH_OVERLOAD_CAPACITY_FPS=N skips the ramp and takes N
 * as the capacity (A/B runs of two builds: the same observer counts for both).
 * AWP_BENCH_OVERLOAD_RELAY_VIA=own sends the probe's relay session through a second edge process in front of
 * the same world, =world straight to the world: what the relay pays for sharing the fan-out's loop, and what
 * the machine's load alone costs it. AWP_BENCH_OVERLOAD_STREAM_LISTEN=1 gives the uws edge a stream listener
 * (`stream_listen`): the observers' stream connections on its worker thread. AWP_BENCH_OVERLOAD_PIN=1 gives
 * the edge (all its threads) CPU 0 and the world and the generators CPU 1, for every case: the edge's
 * capacity and overload without the generators, whose number grows with the load, taking its CPU.
 * AWP_BENCH_OVERLOAD_WORKER_NICE=N (with the stream listener) runs its worker thread at `stream_worker_nice: N`.
 */
import { availableParallelism } from 'node:os';
import { Child } from '../lib/child.js';
import { diff, ratio, type BenchContext } from '../lib/context.js';
import {
  offeredPerObserver,
  runCase,
  SUBSCRIBE_ALL,
  type CaseProbe,
  type CaseResult,
  type LoopDelay,
} from '../lib/fanout-case.js';
import type { LatencySummary } from '../lib/histogram.js';
import type { MachineSummary, ProcSummary } from '../lib/procstat.js';
import { BENCH_TOKEN } from '../lib/setup.js';
import { MIXED } from './fanout.js';

/** The world's heartbeat (and so the observers' on the edge): short, so that a window sees many. */
const HEARTBEAT_MS = 2000;
const PING_MS = 50;
const FACTORS = [1, 2, 5] as const;
const PROPRIO_INTERVAL_MS = 1000 / MIXED.proprioHz;
const CAMERA_INTERVAL_MS = 1000 / MIXED.cameraHz;

interface PingReport {
  readonly rtt: LatencySummary;
  readonly failures: number;
  readonly unanswered: number;
  readonly sent: number;
}

interface Heartbeats {
  readonly received: number;
  readonly max_gap_ms: number;
  readonly missed: number;
}

interface ProbeReport {
  readonly wall_ms: number;
  readonly observer_ping: PingReport;
  readonly observer_heartbeats: Heartbeats;
  readonly relay_ping?: PingReport;
  readonly relay_heartbeats?: Heartbeats;
  readonly direct_ping?: PingReport;
  readonly age: Record<string, LatencySummary>;
  readonly fps: Record<string, number>;
  readonly closed: { observer: number | null; relay: number | null };
  readonly elu: number;
}

/** One measured case, condensed. Times in ms. */
export interface OverloadCase {
  readonly label: string;
  readonly observers: number;
  readonly offered_fps: number;
  readonly delivered_fps: number;
  readonly delivered_vs_capacity: number | null;
  readonly edge_cpu_pct: number;
  /**
   * Of edge_cpu_pct, by thread: MainThread, stream-worker (with stream_listen), V8Worker (GC helpers); and
   * how long each waited, runnable, for a CPU.
   */
  readonly edge_threads: ProcSummary['threads'];
  /** The world's CPU; the whole machine's busy and stolen time (all % of one core; 2 cores: 200). */
  readonly world_cpu_pct: number | null;
  readonly machine: MachineSummary | null;
  readonly ping_ms: { p50: number; p99: number; max: number; unanswered: number };
  readonly relay_ms: { p50: number; p99: number; max: number; unanswered: number } | null;
  readonly relay_added_p99_ms: number | null;
  /**
   * The world answering a session of its own in the same window (no edge), and what the relay's p99 had
   * over it: the edge's share of the relay under this load, apart from the machine's.
   */
  readonly direct_ms: { p50: number; p99: number; max: number; unanswered: number } | null;
  readonly relay_over_direct_p99_ms: number | null;
  readonly loop_delay_ms: LoopDelay | string | null;
  readonly age_ms: Record<string, { p50: number; p99: number; max: number }>;
  readonly probe_fps: Record<string, number>;
  /** Heartbeats the probe's sessions missed, and observer sessions closed (generators' and the probe's). */
  readonly heartbeats: {
    observer_missed: number;
    observer_max_gap_ms: number;
    relay_missed: number;
    relay_max_gap_ms: number;
    sessions_closed: number;
  };
  readonly generator_saturated: boolean;
  readonly generators_cpu_pct: number[];
  /** Summed over the generators: time they were runnable and waited for a CPU (% of one core). */
  readonly generators_runqueue_wait_pct: number;
  readonly setup_ms: { open: number; subscribe: number };
  /** Observers whose obs.subscribe the edge dropped or left unanswered (2 min). */
  readonly subscribe_failures: number;
  /** Delivered frames per edge CPU-second, and that over the capacity step's (no collapse: ~1). */
  readonly frames_per_cpu_s: number;
  readonly efficiency_vs_capacity: number | null;
}

/** A case that could not be measured (e.g. the generators could not set up against the edge). */
export interface FailedCase {
  readonly label: string;
  readonly observers: number;
  readonly error: string;
}

export interface OverloadEngine {
  readonly engine: 'ws' | 'uws';
  readonly capacity: {
    readonly fps: number;
    /** Frames per edge CPU-second at the first step (100 observers): where the ramp starts. */
    readonly cpu_estimate_fps: number;
    /** Frames per edge CPU-second at the step that delivered the most (not overloaded yet); null if fixed. */
    readonly frames_per_cpu_s: number | null;
    readonly steps: {
      observers: number;
      offered_fps: number;
      delivered_fps: number;
      edge_cpu_pct: number;
      generators_cpu_pct: number[];
      generator_saturated: boolean;
    }[];
  };
  readonly idle: OverloadCase;
  readonly loads: ((OverloadCase | FailedCase) & { factor: number })[];
}

export interface OverloadSummary {
  readonly bench: 'overload';
  readonly window_s: number;
  readonly heartbeat_ms: number;
  readonly ping_interval_ms: number;
  readonly frame_interval_ms: { proprio: number; camera: number };
  readonly engines: OverloadEngine[];
  /** Where the probe's relay session went: the observers' edge, a second edge, or the world itself. */
  readonly relay_via: 'edge' | 'own' | 'world';
  /** Whether the uws edge served the observers' streams on its stream listener's worker thread. */
  readonly stream_listen: boolean;
  /** AWP_BENCH_OVERLOAD_PIN: the edge on CPU 0, the world and the generators on CPU 1. */
  readonly pinned: boolean;
  /** AWP_BENCH_OVERLOAD_WORKER_NICE: the stream listener's `stream_worker_nice`. */
  readonly stream_worker_nice: number;
  readonly method: string;
}

const METHOD =
  'Fresh processes per case (world, edge, generators at 250 observers each, the probe). Observers open, the ' +
  'probe opens, observers subscribe proprio and camera; warm-up; then a window in which generators count frames, the probe pings on a ' +
  'fixed 50 ms cadence on its observer session (answered by the edge), its relay session (answered by the ' +
  "world) and a session of its own straight to the world (the relay's baseline under the same load), and " +
  "records frame age = receipt - ts_mono_ns and the peers' heartbeat pings. Pings unanswered at the " +
  "window's end count at their age then. A heartbeat more than half an interval late counts as missed. " +
  "Capacity: a ramp from 100 observers (then ~60 % of one core's worth, x1.35 per step) until delivered < 97 % " +
  'of offered and no more than 5 % above the best step; the most frames/s delivered, and the frames per edge ' +
  'CPU-second at that step (the baseline of efficiency_vs_capacity). Relay added = p99 under load - p99 idle ' +
  "(the probe alone); relay over direct = its p99 - the direct session's p99 in the same window. A case the " +
  'generators cannot set up (the edge drops or does not answer them) is reported as not measured; ' +
  'obs.subscribe failures are counted.';

function probeFor(ctx: BenchContext): CaseProbe & { stop(): Promise<void> } {
  let child: Child | undefined;
  return {
    ready: async (url, origin, relayUrl, worldUrl) => {
      child = await Child.start('bench/lib/probe-child.ts', [], {
        node: ctx.runtime.node,
        build: ctx.runtime.build,
        name: 'probe',
      });
      await child.request(
        'open',
        {
          url,
          ...(relayUrl !== undefined && { relayUrl }),
          ...(worldUrl !== undefined && { worldUrl }),
          origin,
          credential: BENCH_TOKEN,
          channels: SUBSCRIBE_ALL,
          embodiment: 'arm_01',
        },
        120_000,
      );
    },
    begin: async () => {
      await child!.request('begin', { intervalMs: PING_MS });
    },
    end: () => child!.request('end', {}, 60_000),
    stop: async () => {
      await child?.request('close', {}, 5000).catch(() => undefined);
      await child?.stop();
    },
  };
}

const ms = (us: number) => Math.round(us / 10) / 100;

function condense(
  label: string,
  r: CaseResult,
  capacity: number | null,
  idleRelayP99: number | null,
  capacityPerCpu: number | null = null,
): OverloadCase {
  const p = r.probe as unknown as ProbeReport;
  const lat = (x: PingReport | undefined) =>
    x === undefined
      ? null
      : { p50: ms(x.rtt.p50_us), p99: ms(x.rtt.p99_us), max: ms(x.rtt.max_us), unanswered: x.unanswered };
  const relay = lat(p.relay_ping);
  const direct = lat(p.direct_ping);
  const delivered = r.healthy.delivered_fps;
  return {
    label,
    observers: r.observers,
    offered_fps: r.offered_fps,
    delivered_fps: delivered,
    delivered_vs_capacity: capacity !== null && r.observers > 0 ? ratio(delivered, capacity) : null,
    edge_cpu_pct: r.server.cpu_pct,
    edge_threads: r.server.threads,
    world_cpu_pct: r.world?.cpu_pct ?? null,
    machine: r.machine ?? null,
    ping_ms: lat(p.observer_ping)!,
    relay_ms: relay,
    relay_added_p99_ms: relay !== null && idleRelayP99 !== null ? diff(relay.p99, idleRelayP99) : null,
    direct_ms: direct,
    relay_over_direct_p99_ms: relay !== null && direct !== null ? diff(relay.p99, direct.p99) : null,
    loop_delay_ms: r.edge_loop_delay_ms ?? null,
    age_ms: Object.fromEntries(
      Object.entries(p.age).map(([k, a]) => [k, { p50: ms(a.p50_us), p99: ms(a.p99_us), max: ms(a.max_us) }]),
    ),
    probe_fps: p.fps,
    heartbeats: {
      observer_missed: p.observer_heartbeats.missed,
      observer_max_gap_ms: p.observer_heartbeats.max_gap_ms,
      relay_missed: p.relay_heartbeats?.missed ?? 0,
      relay_max_gap_ms: p.relay_heartbeats?.max_gap_ms ?? 0,
      sessions_closed:
        r.healthy.closed + (p.closed.observer !== null ? 1 : 0) + (p.closed.relay !== null ? 1 : 0),
    },
    generator_saturated: r.generator_saturated,
    generators_cpu_pct: r.generators.map((g) => g.cpu_pct),
    generators_runqueue_wait_pct: Math.round(r.generators.reduce((a, g) => a + g.runqueue_wait_pct, 0)),
    setup_ms: r.setup_ms,
    subscribe_failures: r.subscribe_failures ?? 0,
    frames_per_cpu_s: perCpu(r),
    efficiency_vs_capacity: capacityPerCpu !== null ? ratio(perCpu(r), capacityPerCpu) : null,
  };
}

function perCpu(r: CaseResult): number {
  return Math.round(r.healthy.delivered_fps / (r.server.cpu_pct / 100));
}

export async function runOverload(ctx: BenchContext): Promise<OverloadSummary> {
  const window = ctx.durationS ?? (ctx.full ? 10 : 6);
  const warmup = ctx.full ? 3 : 2;
  const major = Number(/^v(\d+)/.exec(ctx.runtime.version)?.[1] ?? 0);
  const wanted = process.env.AWP_BENCH_OVERLOAD_ENGINES?.split(',').map((e) => e.trim());
  const engines = (wanted ?? [major >= 24 && ctx.runtime.uws.ok ? 'uws' : 'ws']).filter(
    (e): e is 'ws' | 'uws' => e === 'ws' || (e === 'uws' && ctx.runtime.uws.ok),
  );
  const perObserver = offeredPerObserver(MIXED);
  const via = process.env.AWP_BENCH_OVERLOAD_RELAY_VIA;
  const relayVia = via === 'own' || via === 'world' ? via : undefined;
  const streamListen = process.env.AWP_BENCH_OVERLOAD_STREAM_LISTEN === '1';
  const pin = process.env.AWP_BENCH_OVERLOAD_PIN === '1';
  const workerNice = streamListen ? Number(process.env.AWP_BENCH_OVERLOAD_WORKER_NICE ?? 0) : 0;
  if (!Number.isInteger(workerNice) || workerNice < 0 || workerNice > 19)
    throw new Error('AWP_BENCH_OVERLOAD_WORKER_NICE: expected an integer 0-19');
  const out: OverloadEngine[] = [];
  for (const engine of engines) {
    const target = engine === 'uws' ? 'edge-uws' : 'edge-ws';
    const run = async (observers: number, durationS: number, withProbe: boolean) => {
      const probe = withProbe ? probeFor(ctx) : undefined;
      try {
        return await runCase(ctx, {
          target,
          observers,
          warmupS: warmup,
          durationS,
          workload: MIXED,
          // Small groups: a generator process is one thread, and the edge must not wait on one.
          perGenerator: 250,
          world: { heartbeatIntervalMs: HEARTBEAT_MS },
          subscribeTimeoutMs: 120_000,
          subscribeTolerant: true,
          ...(relayVia !== undefined && { relayVia }),
          streamListen: streamListen && engine === 'uws',
          workerNice,
          ...(pin && { pinCore: 0, pinRest: 1 }),
          ...(probe !== undefined ? { probe } : {}),
        });
      } finally {
        await probe?.stop();
      }
    };
    ctx.log(`overload: ${target}, idle (the probe alone, ${window} s)`);
    const idle = condense('idle', await run(0, window, true), null, null);
    ctx.log(
      `  ping p99 ${idle.ping_ms.p99} ms, relay p99 ${idle.relay_ms?.p99} ms (the world directly ${idle.direct_ms?.p99} ms)`,
    );

    // Capacity: more observers each step while the edge delivers the offer, or still delivers more than
    // before (one noisy step on a shared machine does not end the ramp).
    const steps: OverloadEngine['capacity']['steps'] = [];
    const perCpuAt = new Map<number, number>();
    let n = 100;
    let cpuEstimate = NaN;
    // A/B runs of two builds give both the same capacity, so each factor is the same observer count.
    const fixed = Number(process.env.AWP_BENCH_OVERLOAD_CAPACITY_FPS ?? NaN);
    if (fixed > 0) {
      ctx.log(`overload: ${target}, capacity fixed at ${fixed} fps (AWP_BENCH_OVERLOAD_CAPACITY_FPS)`);
      steps.push({
        observers: 0,
        offered_fps: fixed,
        delivered_fps: fixed,
        edge_cpu_pct: NaN,
        generators_cpu_pct: [],
        generator_saturated: false,
      });
    }
    for (let i = 0; i < 7 && !(fixed > 0); i++) {
      ctx.log(`overload: ${target}, capacity step ${i + 1}: ${n} observers (4 s)`);
      const r = await run(n, 4, false);
      steps.push({
        observers: n,
        offered_fps: r.offered_fps,
        delivered_fps: r.healthy.delivered_fps,
        edge_cpu_pct: r.server.cpu_pct,
        generators_cpu_pct: r.generators.map((g) => g.cpu_pct),
        generator_saturated: r.generator_saturated,
      });
      perCpuAt.set(steps.length - 1, perCpu(r));
      ctx.log(
        `  delivered ${r.healthy.delivered_fps} of ${r.offered_fps} fps, edge cpu ${r.server.cpu_pct} %`,
      );
      if (i === 0) {
        cpuEstimate = perCpu(r);
        // Start the ramp near 60 % of what one core would deliver.
        n = Math.max(n + 50, Math.round((0.6 * cpuEstimate) / perObserver / 10) * 10);
        continue;
      }
      const before = Math.max(...steps.slice(0, -1).map((s) => s.delivered_fps));
      if (r.healthy.delivered_fps < 0.97 * r.offered_fps && r.healthy.delivered_fps < 1.05 * before) break;
      n = Math.round((n * 1.35) / 10) * 10;
    }
    const capacity = Math.max(...steps.map((s) => s.delivered_fps));
    const capacityPerCpu =
      fixed > 0 ? null : perCpuAt.get(steps.findIndex((s) => s.delivered_fps === capacity))!;
    ctx.log(`overload: ${target} capacity ${capacity} fps (one core would deliver ~${cpuEstimate})`);

    const loads: OverloadEngine['loads'] = [];
    for (const factor of FACTORS) {
      const observers = Math.max(1, Math.round((factor * capacity) / perObserver));
      ctx.log(`overload: ${target}, ${factor}x: ${observers} observers (${window} s)`);
      let c: OverloadCase;
      try {
        c = condense(
          `${factor}x`,
          await run(observers, window, true),
          capacity,
          idle.relay_ms?.p99 ?? null,
          capacityPerCpu,
        );
      } catch (err) {
        // Before issue 15 an overloaded edge could keep the generators from setting up at all.
        const error = err instanceof Error ? err.message : String(err);
        ctx.log(`  not measured: ${error}`);
        loads.push({ label: `${factor}x`, observers, error, factor });
        continue;
      }
      const loop =
        typeof c.loop_delay_ms === 'object' && c.loop_delay_ms !== null
          ? c.loop_delay_ms.p99_ms
          : c.loop_delay_ms;
      ctx.log(
        `  delivered ${c.delivered_fps} fps (${c.delivered_vs_capacity} of capacity, ${c.efficiency_vs_capacity} of the capacity step's ` +
          `frames per CPU-second), ping p99 ${c.ping_ms.p99} ms, relay p99 ${c.relay_ms?.p99} ms (the world directly ${c.direct_ms?.p99} ms), loop p99 ${String(loop)} ms, ` +
          `proprio age p99 ${c.age_ms.proprio?.p99} ms, heartbeats missed ${c.heartbeats.observer_missed}+${c.heartbeats.relay_missed}, ` +
          `closed ${c.heartbeats.sessions_closed}, subscribe failures ${c.subscribe_failures}; edge threads ` +
          `${JSON.stringify(c.edge_threads)}, generators waited ${c.generators_runqueue_wait_pct} %, machine busy ${c.machine?.busy_pct} % of ${availableParallelism() * 100}`,
      );
      loads.push({ ...c, factor });
    }
    out.push({
      engine,
      capacity: { fps: capacity, cpu_estimate_fps: cpuEstimate, frames_per_cpu_s: capacityPerCpu, steps },
      idle,
      loads,
    });
  }
  return {
    bench: 'overload',
    window_s: window,
    heartbeat_ms: HEARTBEAT_MS,
    ping_interval_ms: PING_MS,
    frame_interval_ms: { proprio: PROPRIO_INTERVAL_MS, camera: Math.round(CAMERA_INTERVAL_MS * 10) / 10 },
    engines: out,
    relay_via: relayVia ?? 'edge',
    stream_listen: streamListen,
    pinned: pin,
    stream_worker_nice: workerNice,
    method: METHOD,
  };
}
