/**
 * A set of load-generator processes driven together: observers spread evenly over them, measurement
 * windows opened and closed together, and their reports merged (histograms summed).
 */
import type { Child } from './child.js';
import type { HistogramData, LatencySummary } from './histogram.js';
import { summarise } from './context.js';
import { round } from './ipc.js';
import type { Runtime } from './runtime.js';
import { startGenerator } from './setup.js';

interface ChannelReport {
  frames: number;
  bytes: number;
  fps: number;
  latency: HistogramData;
}

interface GroupReport {
  observers: number;
  closed: number;
  channels: Record<string, ChannelReport>;
  per_observer_fps: { min: number; median: number; max: number };
}

interface GenReport {
  wall_ms: number;
  cpu: { user_ms: number; system_ms: number; cpu_pct: number };
  elu: number;
  saturated: boolean;
  healthy: GroupReport;
  stalled: GroupReport;
}

export interface ChannelSummary {
  readonly fps: number;
  readonly frame_bytes: number;
  readonly latency: LatencySummary;
}

export interface GroupSummary {
  readonly observers: number;
  readonly closed: number;
  readonly delivered_fps: number;
  readonly per_observer_fps_min: number;
  readonly latency: LatencySummary;
  readonly channels: Record<string, ChannelSummary>;
}

export interface GeneratorLoad {
  readonly cpu_pct: number;
  readonly elu: number;
  readonly saturated: boolean;
}

export interface OpenRequest {
  readonly mode: 'awp' | 'raw' | 'idle' | 'connect' | 'centrifugo';
  readonly url: string;
  readonly credential: string;
  readonly origin: string;
  readonly channelNames?: Record<number, string>;
  readonly batch?: number;
}

export class Generators {
  private constructor(readonly children: readonly Child[]) {}

  static async start(rt: Runtime, count: number, nofile: number): Promise<Generators> {
    const children = await Promise.all(
      Array.from({ length: count }, (_, i) => startGenerator(rt, `generator ${i + 1}`, nofile)),
    );
    return new Generators(children);
  }

  get pids(): Record<string, number> {
    return Object.fromEntries(this.children.map((c, i) => [`generator_${i + 1}`, c.pid]));
  }

  /** Opens `total` observers, spread evenly; returns how many opened and the first errors. */
  async open(
    total: number,
    req: OpenRequest,
  ): Promise<{ opened: number; failed: number; errors: string[]; open_ms: number }> {
    const n = this.children.length;
    const results = await Promise.all(
      this.children.map((c, i) =>
        c.request<{ opened: number; failed: number; errors: string[]; open_ms: number }>(
          'open',
          { ...req, count: Math.floor(total / n) + (i < total % n ? 1 : 0) },
          600_000,
        ),
      ),
    );
    return {
      opened: results.reduce((a, r) => a + r.opened, 0),
      failed: results.reduce((a, r) => a + r.failed, 0),
      errors: results.flatMap((r) => r.errors).slice(0, 3),
      open_ms: Math.max(...results.map((r) => r.open_ms)),
    };
  }

  /** Subscribes every awp observer to `channels` (obs.subscribe). */
  async subscribe(
    channels: readonly { channel: string; rate_hz?: number }[],
    timeoutMs?: number,
  ): Promise<number> {
    return (await this.subscribeCounting(channels, timeoutMs, false)).ms;
  }

  /** `tolerant`: sessions whose obs.subscribe fails are counted instead of failing the call. */
  async subscribeCounting(
    channels: readonly { channel: string; rate_hz?: number }[],
    timeoutMs: number | undefined,
    tolerant: boolean,
  ): Promise<{ ms: number; failed: number }> {
    const r = await Promise.all(
      this.children.map((c) =>
        c.request<{ subscribe_ms: number; failed: number }>(
          'subscribe',
          { channels, timeoutMs, tolerant },
          600_000,
        ),
      ),
    );
    return { ms: Math.max(...r.map((x) => x.subscribe_ms)), failed: r.reduce((a, x) => a + x.failed, 0) };
  }

  /** Stalls `total` observers' stream connections, spread evenly. */
  async stall(total: number): Promise<void> {
    const n = this.children.length;
    await Promise.all(
      this.children.map((c, i) =>
        c.request('stall', { count: Math.floor(total / n) + (i < total % n ? 1 : 0) }),
      ),
    );
  }

  async begin(): Promise<void> {
    await Promise.all(this.children.map((c) => c.request('begin')));
  }

  async end(): Promise<{ healthy: GroupSummary; stalled: GroupSummary; generators: GeneratorLoad[] }> {
    const reports = await Promise.all(
      this.children.map((c) => c.request<GenReport & Record<string, unknown>>('end')),
    );
    const wallS = Math.max(...reports.map((r) => r.wall_ms)) / 1000;
    return {
      healthy: merge(
        reports.map((r) => r.healthy),
        wallS,
      ),
      stalled: merge(
        reports.map((r) => r.stalled),
        wallS,
      ),
      generators: reports.map((r) => ({ cpu_pct: r.cpu.cpu_pct, elu: r.elu, saturated: r.saturated })),
    };
  }

  async alive(): Promise<number> {
    const r = await Promise.all(this.children.map((c) => c.request<{ alive: number }>('alive')));
    return r.reduce((a, x) => a + x.alive, 0);
  }

  async stop(): Promise<void> {
    await Promise.all(this.children.map((c) => c.request('close', {}, 10_000).catch(() => undefined)));
    await Promise.all(this.children.map((c) => c.stop()));
  }
}

function merge(groups: readonly GroupReport[], wallS: number): GroupSummary {
  const names = new Set(groups.flatMap((g) => Object.keys(g.channels)));
  const channels: Record<string, ChannelSummary> = {};
  let frames = 0;
  for (const name of [...names].sort()) {
    const parts = groups.map((g) => g.channels[name]).filter((c): c is ChannelReport => c !== undefined);
    const f = parts.reduce((a, c) => a + c.frames, 0);
    const bytes = parts.reduce((a, c) => a + c.bytes, 0);
    frames += f;
    channels[name] = {
      fps: round(f / wallS),
      frame_bytes: f > 0 ? Math.round(bytes / f) : 0,
      latency: summarise(parts.map((c) => c.latency)),
    };
  }
  const observers = groups.reduce((a, g) => a + g.observers, 0);
  return {
    observers,
    closed: groups.reduce((a, g) => a + g.closed, 0),
    delivered_fps: round(frames / wallS),
    per_observer_fps_min:
      observers > 0
        ? Math.min(...groups.filter((g) => g.observers > 0).map((g) => g.per_observer_fps.min))
        : 0,
    latency: summarise(groups.flatMap((g) => Object.values(g.channels).map((c) => c.latency))),
    channels,
  };
}
