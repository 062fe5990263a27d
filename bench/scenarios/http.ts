/**
 * The HTTP side: `/metrics` under load (autocannon, with and without observers receiving the fan-out
 * workload; `/healthz` on the same listener is the baseline handler), and the WebSocket upgrade rate of
 * the edge on each engine against the raw uWS server (accepting any credential-bearing `awp` upgrade).
 */
import { get } from 'node:http';
import { Child, stopAll } from '../lib/child.js';
import { ratio, type BenchContext } from '../lib/context.js';
import { SUBSCRIBE_ALL } from '../lib/fanout-case.js';
import { Generators, type GroupSummary } from '../lib/generators.js';
import { ProcSampler } from '../lib/procstat.js';
import { UWS_HINT } from '../lib/runtime.js';
import { BENCH_TOKEN, startEdge, startRawBroadcast, startWorld } from '../lib/setup.js';
import { MIXED } from './fanout.js';

interface CannonResult {
  requests_per_s: number;
  latency_ms: { p50: number; p99: number; max: number };
  errors: number;
  non2xx: number;
  cpu: { cpu_pct: number };
  saturated: boolean;
}

interface UpgradeResult {
  upgrades_per_s: number;
  failed: number;
  statuses: Record<string, number>;
  latency: unknown;
  cpu: { cpu_pct: number };
  saturated: boolean;
}

interface UpgradeSummary {
  upgrades_per_s: number;
  failed: number;
  statuses: Record<string, number>;
  /** Median handshake time per generator (ms). */
  latency_p50_ms: number[];
  generators: { cpu_pct: number; saturated: boolean }[];
  server_cpu_pct: number;
}

export interface HttpSummary {
  readonly bench: 'http';
  readonly uws: { available: boolean; reason?: string };
  readonly engine: string;
  readonly metrics_bytes: { idle: number; loaded: number };
  readonly observers: number;
  readonly scrape: Record<
    string,
    CannonResult & { edge_cpu_pct: number; fanout?: Pick<GroupSummary, 'delivered_fps' | 'latency'> }
  >;
  /** The observers with no HTTP load, for comparison with their figures during the scrape runs. */
  readonly fanout_alone: { edge_cpu_pct: number } & Pick<GroupSummary, 'delivered_fps' | 'latency'>;
  readonly ratios: Record<string, number | null>;
  readonly upgrades: Record<string, UpgradeSummary>;
  readonly upgrade_ratios: Record<string, number | null>;
  readonly method: string;
}

function fetchBytes(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    get(url, (res) => {
      let n = 0;
      res.on('data', (c: Buffer) => (n += c.length));
      res.on('end', () => resolve(n));
    }).on('error', reject);
  });
}

export async function runHttp(ctx: BenchContext): Promise<HttpSummary> {
  const uwsOk = ctx.runtime.uws.ok;
  const engine = uwsOk ? 'uws' : 'ws';
  const window = ctx.durationS ?? 5;
  // Below saturation: a saturated fan-out starves the admin listener (see RESULTS.md).
  const n = ctx.full ? 200 : 100;
  const children: Child[] = [];
  let gens: Generators | undefined;
  try {
    const http = await Child.start('bench/lib/http-gen-child.ts', [], {
      node: ctx.runtime.node,
      build: ctx.runtime.build,
      name: 'http generator',
    });
    // A second generator for the upgrade loops: one saturates before the raw uWS server does.
    const http2 = await Child.start('bench/lib/http-gen-child.ts', [], {
      node: ctx.runtime.node,
      build: ctx.runtime.build,
      name: 'http generator 2',
    });
    children.push(http, http2);
    const world = await startWorld(ctx.runtime, MIXED, n * 2 + 256);
    children.push(world.child);
    const edge = await startEdge(ctx.runtime, { engine, upstream: world.url, nofile: n * 2 + 256 });
    children.push(edge.child);
    const scrape: HttpSummary['scrape'] = {};
    const cannon = async (name: string, path: string) => {
      ctx.log(`http: autocannon ${path} (${name}, ${window} s)`);
      const sampler = new ProcSampler({ edge: edge.child.pid });
      sampler.begin();
      await gens?.begin();
      const r = await http.request<CannonResult & Record<string, unknown>>(
        'autocannon',
        { url: `${edge.adminUrl}${path}`, connections: 10, durationS: window },
        (window + 30) * 1000,
      );
      const fan = await gens?.end();
      const { id: _id, ok: _ok, ...rest } = r;
      scrape[name] = {
        ...(rest as unknown as CannonResult),
        edge_cpu_pct: sampler.end().edge!.cpu_pct,
        ...(fan !== undefined
          ? { fanout: { delivered_fps: fan.healthy.delivered_fps, latency: fan.healthy.latency } }
          : {}),
      };
    };
    const idleBytes = await fetchBytes(`${edge.adminUrl}/metrics`);
    await cannon('healthz_idle', '/healthz');
    await cannon('metrics_idle', '/metrics');
    gens = await Generators.start(ctx.runtime, 1, n * 2 + 256);
    await gens.open(n, { mode: 'awp', url: edge.url, credential: BENCH_TOKEN, origin: world.origin });
    await gens.subscribe(SUBSCRIBE_ALL);
    await new Promise((r) => setTimeout(r, 2000));
    const loadedBytes = await fetchBytes(`${edge.adminUrl}/metrics`);
    // The fan-out alone, for the observers' figures without any HTTP load.
    const sampler = new ProcSampler({ edge: edge.child.pid });
    sampler.begin();
    await gens.begin();
    await new Promise((r) => setTimeout(r, window * 1000));
    const alone = await gens.end();
    const aloneCpu = sampler.end().edge!.cpu_pct;
    await cannon('healthz_loaded', '/healthz');
    await cannon('metrics_loaded', '/metrics');
    await gens.stop();
    gens = undefined;
    await stopAll([edge.child, world.child]);

    // Upgrades: each target fresh, the same generator.
    const upgrades: HttpSummary['upgrades'] = {};
    const upgradeTargets = [
      { name: 'edge-ws', kind: 'ws' as const },
      ...(uwsOk
        ? [
            { name: 'edge-uws', kind: 'uws' as const },
            { name: 'raw-uws', kind: 'raw' as const },
          ]
        : []),
    ];
    for (const t of upgradeTargets) {
      ctx.log(`http: upgrade rate, ${t.name} (${window} s)`);
      let server: Child;
      let url: string;
      let extra: Child | undefined;
      if (t.kind === 'raw') {
        const raw = await startRawBroadcast(ctx.runtime, []);
        server = raw.child;
        url = raw.url;
      } else {
        // A world nobody reaches: upgrades alone never dial upstream.
        const w = await startWorld(ctx.runtime, MIXED);
        extra = w.child;
        const e = await startEdge(ctx.runtime, { engine: t.kind, upstream: w.url });
        server = e.child;
        url = e.url;
      }
      const sampler = new ProcSampler({ server: server.pid });
      sampler.begin();
      const parts = await Promise.all(
        [http, http2].map((g) =>
          g.request<UpgradeResult & Record<string, unknown>>(
            'upgrades',
            { url, credential: BENCH_TOKEN, concurrency: 16, durationS: window },
            (window + 30) * 1000,
          ),
        ),
      );
      upgrades[t.name] = {
        upgrades_per_s: parts.reduce((a, p) => a + p.upgrades_per_s, 0),
        failed: parts.reduce((a, p) => a + p.failed, 0),
        statuses: Object.assign({}, ...parts.map((p) => p.statuses)) as Record<string, number>,
        latency_p50_ms: parts.map((p) => Math.round((p.latency as { p50_us: number }).p50_us / 10) / 100),
        generators: parts.map((p) => ({ cpu_pct: p.cpu.cpu_pct, saturated: p.saturated })),
        server_cpu_pct: sampler.end().server!.cpu_pct,
      };
      await stopAll([server, extra]);
    }
    const per = (k: string) => upgrades[k]?.upgrades_per_s ?? NaN;
    return {
      bench: 'http',
      uws: uwsOk
        ? { available: true }
        : { available: false, reason: `${ctx.runtime.uws.reason}; ${UWS_HINT}` },
      engine,
      metrics_bytes: { idle: idleBytes, loaded: loadedBytes },
      observers: n,
      scrape,
      fanout_alone: {
        edge_cpu_pct: aloneCpu,
        delivered_fps: alone.healthy.delivered_fps,
        latency: alone.healthy.latency,
      },
      ratios: {
        'metrics/healthz idle': ratio(
          scrape.metrics_idle!.requests_per_s,
          scrape.healthz_idle!.requests_per_s,
        ),
        'metrics/healthz loaded': ratio(
          scrape.metrics_loaded!.requests_per_s,
          scrape.healthz_loaded!.requests_per_s,
        ),
        'metrics loaded/idle': ratio(
          scrape.metrics_loaded!.requests_per_s,
          scrape.metrics_idle!.requests_per_s,
        ),
        'fanout fps during /metrics load / alone': ratio(
          scrape.metrics_loaded!.fanout!.delivered_fps,
          alone.healthy.delivered_fps,
        ),
      },
      upgrades,
      upgrade_ratios: {
        'edge-uws/raw-uws': ratio(per('edge-uws'), per('raw-uws')),
        'edge-ws/raw-uws': ratio(per('edge-ws'), per('raw-uws')),
        'edge-uws/edge-ws': ratio(per('edge-uws'), per('edge-ws')),
      },
      method:
        'autocannon: 10 connections, keep-alive, no pipelining, from its own process. "loaded": N observers of the ' +
        'fan-out workload receive frames during the run; their delivery during /metrics load is compared with the ' +
        'fan-out alone. Upgrades: 2 generator processes x 16 concurrent loops, each opening a WebSocket (credential + awp) and resetting it ' +
        'once upgraded; the rate counts completed 101 handshakes.',
    };
  } finally {
    await gens?.stop();
    await stopAll(children.reverse());
  }
}
