/**
 * One fan-out measurement: a frame source (the demo arm world, alone or behind an edge, or the raw uWS
 * broadcast), N observers on load generators, a warm-up, then a window in which the generators record
 * deliveries and latency while the server's, the world's and the generators' CPU and RSS are sampled.
 * The `centrifugo` target serves the same channels from Centrifugo (centrifugo.ts), fed by a publisher
 * process at the world's rates; `pinCore` restricts the serving process to one core.
 */
import { startCentrifugo } from './centrifugo.js';
import { pinToCore } from './service.js';
import { Child } from './child.js';
import { sleep, type BenchContext } from './context.js';
import { Generators, type GeneratorLoad, type GroupSummary } from './generators.js';
import { type MachineSummary, ProcSampler, type ProcSummary } from './procstat.js';
import {
  BENCH_TOKEN,
  startEdge,
  startRawBroadcast,
  startWorld,
  type World,
  type WorldOptions,
} from './setup.js';

/**
 * edge-*: the world behind the edge on that engine; world: observers on the world itself; raw-uws: uWS
 * publish; centrifugo: Centrifugo subscribers of a publisher at the world's rates.
 */
export type Target = 'edge-ws' | 'edge-uws' | 'world' | 'raw-uws' | 'centrifugo';
export type ChannelName = 'proprio' | 'camera';

export interface Workload {
  readonly proprioHz: number;
  readonly cameraHz: number;
  /** Camera frames are width x height bytes (mono8). */
  readonly cameraWidth: number;
  readonly cameraHeight: number;
  /** Channels the observers subscribe (the raw broadcast publishes the same). */
  readonly channels: readonly ChannelName[];
}

export interface CaseOptions {
  readonly target: Target;
  readonly observers: number;
  readonly warmupS: number;
  readonly durationS: number;
  readonly workload: Workload;
  /** Observers per generator process. */
  readonly perGenerator: number;
  /** Share of observers whose stream connection stops reading (TCP level) before the window. */
  readonly stallFraction?: number;
  readonly world?: WorldOptions;
  /** Something measured beside the observers in the same window (the overload scenario's probe). */
  readonly probe?: CaseProbe;
  /** Per-request timeout of the observers' obs.subscribe (default: the session's 15 s). */
  readonly subscribeTimeoutMs?: number;
  /** Count observers whose obs.subscribe fails (the edge dropped or did not answer them) instead of failing. */
  readonly subscribeTolerant?: boolean;
  /** edge-*: the route's flight recorder (`record:`, bench/scenarios/fanout-record.ts). */
  readonly record?: Record<string, unknown>;
  /** The Centrifugo binary (the `centrifugo` target). */
  readonly centrifugo?: string;
  /** Restricts the serving process (all its threads) to this CPU (taskset; Centrifugo also GOMAXPROCS=1). */
  readonly pinCore?: number;
  /**
   * Restricts the world and the generators to this CPU (with `pinCore` another one: the serving process then
   * has a core to itself, and its CPU per frame is not shared with theirs).
   */
  readonly pinRest?: number;
  /**
   * edge-*: where the probe's relay session goes instead of the observers' edge (`relayUrl`): `own`, a second
   * edge process of the same build in front of the same world (the relay off the loop that fans out, on the
   * same machine); `world`, the world itself (no edge: what the machine's load alone adds).
   */
  readonly relayVia?: 'own' | 'world';
  /** edge-uws: observers' stream connections on the edge's stream listener, a worker thread (`stream_listen`). */
  readonly streamListen?: boolean;
  /** With `streamListen`: the worker thread's `stream_worker_nice`. */
  readonly workerNice?: number;
}

export interface CaseProbe {
  /**
   * After the observers opened, before they subscribe (so that an overloaded edge cannot keep the probe
   * from opening): `url` is the route the observers use; `relayUrl` where its relay session goes instead
   * (`relayVia`); `worldUrl` the world behind the edge (edge targets), for a baseline under the same load.
   */
  ready(url: string, origin: string, relayUrl?: string, worldUrl?: string): Promise<void>;
  /** At the window's start, right after the generators'. */
  begin(): Promise<void>;
  /** At the window's end, right before the generators'; its answer becomes the result's `probe`. */
  end(): Promise<Record<string, unknown>>;
}

export interface CaseResult {
  readonly target: Target;
  readonly observers: number;
  /** Frames per second the source offers all observers together (N x channel rates). */
  readonly offered_fps: number;
  readonly opened: number;
  readonly open_failures: number;
  readonly open_errors?: string[];
  readonly setup_ms: { open: number; subscribe: number };
  /** Observers whose obs.subscribe failed (with `subscribeTolerant`). */
  readonly subscribe_failures?: number;
  readonly healthy: GroupSummary;
  readonly stalled?: GroupSummary;
  /** Healthy observers' delivered / offered (healthy share of the offer). */
  readonly delivered_ratio: number;
  /** Delivered payload+header bytes per second (healthy observers). */
  readonly delivered_mib_s: number;
  /** The process serving the observers (edge, world, or raw broadcast). */
  readonly server: ProcSummary & { cpu_us_per_frame: number };
  /** The world behind the edge (edge targets); the publisher (centrifugo). */
  readonly world?: ProcSummary;
  /** The whole machine over the window: how much CPU was left for anyone. */
  readonly machine?: MachineSummary;
  /** The centrifugo target's publisher: publications made, failed, skipped (server too slow) per channel. */
  readonly publisher?: Record<string, unknown>;
  /** The CPU the serving process was restricted to (`pinCore`), or why it could not be. */
  readonly pinned?: number | string;
  /** The edge's event-loop delay over the window (edge targets); a string if the edge did not answer. */
  readonly edge_loop_delay_ms?: LoopDelay | string;
  /** Each generator's load, peak RSS, and time its threads waited, runnable, for a CPU (% of one core). */
  readonly generators: readonly (GeneratorLoad & { rss_mib_max: number; runqueue_wait_pct: number })[];
  readonly generator_saturated: boolean;
  readonly probe?: Record<string, unknown>;
}

export interface LoopDelay {
  readonly samples: number;
  readonly p50_ms: number;
  readonly p99_ms: number;
  readonly max_ms: number;
  /** Event-loop utilisation over the window (busy share of wall time: above CPU share = waiting for a CPU). */
  readonly elu?: number;
  /** GC pauses over the window by kind (count, total, longest, how many over 5 ms). */
  readonly gc?: Record<string, { count: number; total_ms: number; max_ms: number; over_5ms: number }>;
}

/** The demo arm world's proprio payload at rest (what the raw broadcast sends in its place). */
const PROPRIO_PAYLOAD_BYTES = JSON.stringify({ p_m: [0, 0, 0.4], v_mps: [0, 0, 0] }).length;

/** Both channels of the fan-out workload, for direct obs.subscribe calls. */
export const SUBSCRIBE_ALL = [{ channel: 'proprio' }, { channel: 'camera' }];

export function offeredPerObserver(w: Workload): number {
  return (
    (w.channels.includes('proprio') ? w.proprioHz : 0) + (w.channels.includes('camera') ? w.cameraHz : 0)
  );
}

export async function runCase(ctx: BenchContext, o: CaseOptions): Promise<CaseResult> {
  const n = o.observers;
  const w = o.workload;
  const fds = n * 2 + 256;
  const started: { stop(): Promise<void> }[] = [];
  let gens: Generators | undefined;
  try {
    let source: World;
    let serverPid: number;
    let url: string;
    let relayUrl: string | undefined;
    let worldUrl: string | undefined;
    let worldPid: number | undefined;
    let edgeChild: Child | undefined;
    let publisher: Child | undefined;
    if (o.target === 'centrifugo') {
      if (o.centrifugo === undefined)
        throw new Error('the centrifugo target needs the binary (ensureCentrifugo)');
      const cf = await startCentrifugo(o.centrifugo, o.pinCore ?? 0);
      started.push(cf.service);
      const channels = [];
      // The publisher's 8-byte stamp plus the demo arm's proprio JSON; camera frames of the world's size.
      if (w.channels.includes('proprio'))
        channels.push({ name: 'proprio', rate_hz: w.proprioHz, payload_bytes: 8 + PROPRIO_PAYLOAD_BYTES });
      if (w.channels.includes('camera'))
        channels.push({ name: 'camera', rate_hz: w.cameraHz, payload_bytes: w.cameraWidth * w.cameraHeight });
      publisher = await Child.start(
        'bench/lib/centrifugo-pub-child.ts',
        [JSON.stringify({ apiUrl: cf.apiUrl, channels })],
        { node: ctx.runtime.node, build: ctx.runtime.build, name: 'centrifugo publisher' },
      );
      started.push(publisher);
      // Stamps are absolute hrtime: origin 0.
      source = { child: publisher, url: cf.wsUrl, origin: '0' };
      serverPid = cf.service.pid;
      worldPid = publisher.pid;
      url = cf.wsUrl;
    } else if (o.target === 'raw-uws') {
      const channels = [];
      if (w.channels.includes('proprio'))
        channels.push({ channel_id: 1, rate_hz: w.proprioHz, payload_bytes: PROPRIO_PAYLOAD_BYTES });
      if (w.channels.includes('camera'))
        channels.push({ channel_id: 2, rate_hz: w.cameraHz, payload_bytes: w.cameraWidth * w.cameraHeight });
      source = await startRawBroadcast(ctx.runtime, channels, fds);
      started.push(source.child);
      serverPid = source.child.pid;
      url = source.url;
    } else {
      source = await startWorld(
        ctx.runtime,
        {
          proprioHz: w.proprioHz,
          cameraHz: w.cameraHz,
          cameraWidth: w.cameraWidth,
          cameraHeight: w.cameraHeight,
          ...o.world,
        },
        fds,
      );
      started.push(source.child);
      if (o.target === 'world') {
        serverPid = source.child.pid;
        url = source.url;
      } else {
        const engine = o.target === 'edge-uws' ? 'uws' : 'ws';
        const edge = await startEdge(ctx.runtime, {
          engine,
          upstream: source.url,
          nofile: fds,
          ...(o.record !== undefined && { record: o.record }),
          ...(o.streamListen === true && {
            extra: { stream_listen: '127.0.0.1:0', stream_worker_nice: o.workerNice ?? 0 },
          }),
        });
        started.push(edge.child);
        edgeChild = edge.child;
        serverPid = edge.child.pid;
        worldPid = source.child.pid;
        url = edge.url;
        worldUrl = source.url;
        if (o.relayVia === 'world') relayUrl = source.url;
        if (o.relayVia === 'own') {
          const second = await startEdge(ctx.runtime, { engine, upstream: source.url });
          started.push(second.child);
          relayUrl = second.url;
        }
      }
    }
    // Centrifugo pins itself at its start (taskset, GOMAXPROCS=1).
    const pinned =
      o.pinCore === undefined
        ? undefined
        : o.target === 'centrifugo'
          ? o.pinCore
          : (pinToCore(serverPid, o.pinCore) ?? o.pinCore);
    gens = await Generators.start(ctx.runtime, Math.max(1, Math.ceil(n / o.perGenerator)), fds);
    if (o.pinRest !== undefined) {
      const rest = [...(worldPid !== undefined ? [worldPid] : []), ...Object.values(gens.pids)];
      for (const pid of rest) {
        const failed = pinToCore(pid, o.pinRest);
        if (failed !== undefined) throw new Error(`pinning the world and generators: ${failed}`);
      }
    }
    const opened = await gens.open(n, {
      mode: o.target === 'raw-uws' ? 'raw' : o.target === 'centrifugo' ? 'centrifugo' : 'awp',
      url,
      credential: BENCH_TOKEN,
      origin: source.origin,
      channelNames: { 1: 'proprio', 2: 'camera' },
    });
    await o.probe?.ready(url, source.origin, relayUrl, worldUrl);
    const subscribed =
      o.target === 'raw-uws'
        ? { ms: 0, failed: 0 }
        : await gens.subscribeCounting(
            w.channels.map((channel) => ({ channel })),
            o.subscribeTimeoutMs,
            o.subscribeTolerant === true,
          );
    const stalled = Math.round(n * (o.stallFraction ?? 0));
    if (stalled > 0) await gens.stall(stalled);
    await sleep(o.warmupS * 1000);
    const sampler = new ProcSampler({
      server: serverPid,
      ...(worldPid !== undefined ? { world: worldPid } : {}),
      ...gens.pids,
    });
    sampler.begin();
    await edgeChild?.request('loop-reset', {}, 15_000).catch(() => undefined);
    await gens.begin();
    await o.probe?.begin();
    await sleep(o.durationS * 1000);
    const probe = await o.probe?.end();
    const m = await gens.end();
    const procs = sampler.end();
    const published = await publisher
      ?.request('stats', {}, 15_000)
      .then(({ ok: _ok, id: _id, ...rest }) => rest)
      .catch(() => null);
    // A saturated edge may not read its IPC channel for many seconds: that is itself the finding.
    const loop =
      edgeChild === undefined
        ? undefined
        : await edgeChild.request<LoopDelay & Record<string, unknown>>('loop', {}, 15_000).catch(() => null);
    const perObserver = offeredPerObserver(w);
    const delivered = m.healthy.delivered_fps + (stalled > 0 ? m.stalled.delivered_fps : 0);
    const bytes = Object.values(m.healthy.channels).reduce((a, c) => a + c.fps * c.frame_bytes, 0);
    const server = procs.server!;
    return {
      target: o.target,
      observers: n,
      offered_fps: n * perObserver,
      opened: opened.opened,
      open_failures: opened.failed,
      ...(opened.errors.length > 0 ? { open_errors: opened.errors } : {}),
      setup_ms: { open: opened.open_ms, subscribe: subscribed.ms },
      ...(subscribed.failed > 0 ? { subscribe_failures: subscribed.failed } : {}),
      healthy: m.healthy,
      ...(stalled > 0 ? { stalled: m.stalled } : {}),
      delivered_ratio: Math.round((m.healthy.delivered_fps / ((n - stalled) * perObserver)) * 1000) / 1000,
      delivered_mib_s: Math.round((bytes / 2 ** 20) * 10) / 10,
      server: {
        ...server,
        cpu_us_per_frame: delivered > 0 ? Math.round(((server.cpu_pct * 1e4) / delivered) * 100) / 100 : NaN,
      },
      ...(loop !== undefined
        ? {
            edge_loop_delay_ms:
              loop === null
                ? 'no answer within 15 s'
                : loop.samples === 0
                  ? 'no sample: no timer ran during the window'
                  : {
                      p50_ms: loop.p50_ms,
                      p99_ms: loop.p99_ms,
                      max_ms: loop.max_ms,
                      samples: loop.samples,
                      elu: loop.elu,
                      ...(loop.gc !== undefined && { gc: loop.gc }),
                    },
          }
        : {}),
      ...(worldPid !== undefined ? { world: procs.world! } : {}),
      ...(sampler.machine !== undefined ? { machine: sampler.machine } : {}),
      ...(published !== undefined ? { publisher: published ?? { error: 'no answer within 15 s' } } : {}),
      ...(pinned !== undefined ? { pinned } : {}),
      generators: m.generators.map((g, i) => ({
        ...g,
        rss_mib_max: procs[`generator_${i + 1}`]?.rss_mib_max ?? NaN,
        runqueue_wait_pct: procs[`generator_${i + 1}`]?.runqueue_wait_pct ?? NaN,
      })),
      generator_saturated: m.generators.some((g) => g.saturated),
      ...(probe !== undefined ? { probe } : {}),
    };
  } finally {
    await gens?.stop();
    for (const c of started.reverse()) await c.stop();
  }
}
