/**
 * Memory: RSS (and V8 heap) per idle session at N sessions: observer sessions (served by the edge's hub)
 * and relay sessions (observers on an `observers: relay` route: each holds an upstream connection and a
 * world session), on each engine; baselines: the world holding the same idle sessions itself, and idle
 * connections on the raw uWS server (the engine's floor). Per session = (reading at N - reading at a
 * warm-up count) / (N - warm-up), both readings after full GCs.
 */
import { nofileCeiling, type Child } from '../lib/child.js';
import { ratio, sleep, type BenchContext } from '../lib/context.js';
import { Generators } from '../lib/generators.js';
import { readProc } from '../lib/procstat.js';
import { UWS_HINT } from '../lib/runtime.js';
import { BENCH_TOKEN, startEdge, startRawBroadcast, startWorld } from '../lib/setup.js';

type Kind = 'edge-observer' | 'edge-relay' | 'world' | 'raw-uws';

interface Reading {
  readonly rss: number;
  readonly heapUsed: number;
  readonly external: number;
}

export interface MemoryCase {
  readonly target: string;
  readonly sessions: number;
  /** Why fewer sessions than asked were held, if so. */
  readonly capped?: string;
  readonly opened: number;
  readonly alive_at_end: number;
  readonly open_ms: number;
  readonly failures: number;
  readonly errors?: string[];
  /** Bytes per session (the serving process: edge, world or raw server). */
  readonly per_session_bytes: { rss: number; heap: number; external: number };
  readonly per_session_kib: { rss: number; heap: number };
  readonly rss_mib: { warm: number; loaded: number };
  /** The world's RSS per session behind a relay route (it holds one session per relay session). */
  readonly world_per_session_rss_bytes?: number;
}

export interface MemorySummary {
  readonly bench: 'memory';
  readonly uws: { available: boolean; reason?: string };
  readonly sessions: number;
  readonly cases: MemoryCase[];
  readonly ratios: Record<string, number | null>;
  readonly method: string;
}

const WARM = 200;

async function reading(child: Child): Promise<Reading> {
  const m = (await child.request<{ memory: NodeJS.MemoryUsage }>('memory')).memory;
  await sleep(200);
  const proc = readProc(child.pid);
  return { rss: proc?.rss_bytes ?? m.rss, heapUsed: m.heapUsed, external: m.external + m.arrayBuffers };
}

export async function runMemory(ctx: BenchContext): Promise<MemorySummary> {
  const uwsOk = ctx.runtime.uws.ok;
  const n = ctx.full ? 10_000 : 1_000;
  const cases: MemoryCase[] = [];
  const engines = uwsOk ? (['ws', 'uws'] as const) : (['ws'] as const);
  const plan: { target: string; kind: Kind; engine?: 'ws' | 'uws' }[] = [
    ...engines.map((engine) => ({
      target: `edge-${engine} observer`,
      kind: 'edge-observer' as const,
      engine,
    })),
    ...engines.map((engine) => ({ target: `edge-${engine} relay`, kind: 'edge-relay' as const, engine })),
    { target: 'world', kind: 'world' },
    ...(uwsOk ? [{ target: 'raw-uws connection', kind: 'raw-uws' as const }] : []),
  ];
  for (const p of plan) {
    // A relay session holds two descriptors at the edge (agent + upstream): the open-file limit may cap N.
    const perSession = p.kind === 'edge-relay' ? 2 : 1;
    const ceiling = nofileCeiling(perSession * n + 512);
    const count = Math.min(n, Math.floor((ceiling - 512) / perSession));
    const capped =
      count < n ? `open-file limit ${ceiling}: ${perSession} descriptors per session at the edge` : undefined;
    ctx.log(`memory: ${p.target} x ${count} idle sessions${capped !== undefined ? ` (${capped})` : ''}`);
    const started: Child[] = [];
    let gens: Generators | undefined;
    try {
      let server: Child;
      let world: Child | undefined;
      let url: string;
      let origin = '0';
      if (p.kind === 'raw-uws') {
        const raw = await startRawBroadcast(ctx.runtime, [], ceiling, true);
        started.push(raw.child);
        server = raw.child;
        url = raw.url;
      } else {
        // Heartbeats every 5 s (the demo default) keep idle sessions alive and cost a little traffic.
        const w = await startWorld(
          ctx.runtime,
          { proprioHz: 100, cameraHz: 30 },
          nofileCeiling(count + 512),
          true,
        );
        started.push(w.child);
        origin = w.origin;
        if (p.kind === 'world') {
          server = w.child;
          url = w.url;
        } else {
          const e = await startEdge(ctx.runtime, {
            engine: p.engine!,
            upstream: w.url,
            observers: p.kind === 'edge-relay' ? 'relay' : 'fanout',
            nofile: ceiling,
            exposeGc: true,
          });
          started.push(e.child);
          server = e.child;
          world = w.child;
          url = e.url;
        }
      }
      gens = await Generators.start(ctx.runtime, Math.max(1, Math.ceil(count / 5000)), 5000 + 512);
      const mode = p.kind === 'raw-uws' ? 'connect' : 'idle';
      const req = { mode, url, credential: BENCH_TOKEN, origin } as const;
      const warm = await gens.open(WARM, req);
      await sleep(1000);
      const r0 = await reading(server);
      const w0 = world !== undefined ? await reading(world) : undefined;
      const rest = await gens.open(count - WARM, req);
      await sleep(2000);
      const r1 = await reading(server);
      const w1 = world !== undefined ? await reading(world) : undefined;
      const alive = await gens.alive();
      const d = count - WARM;
      const per = (a: number, b: number) => Math.round((b - a) / d);
      const c: MemoryCase = {
        target: p.target,
        sessions: count,
        ...(capped !== undefined ? { capped } : {}),
        opened: warm.opened + rest.opened,
        alive_at_end: alive,
        open_ms: rest.open_ms,
        failures: warm.failed + rest.failed,
        ...(warm.errors.length + rest.errors.length > 0
          ? { errors: [...warm.errors, ...rest.errors].slice(0, 3) }
          : {}),
        per_session_bytes: {
          rss: per(r0.rss, r1.rss),
          heap: per(r0.heapUsed, r1.heapUsed),
          external: per(r0.external, r1.external),
        },
        per_session_kib: {
          rss: Math.round((per(r0.rss, r1.rss) / 1024) * 10) / 10,
          heap: Math.round((per(r0.heapUsed, r1.heapUsed) / 1024) * 10) / 10,
        },
        rss_mib: {
          warm: Math.round((r0.rss / 2 ** 20) * 10) / 10,
          loaded: Math.round((r1.rss / 2 ** 20) * 10) / 10,
        },
        ...(w0 !== undefined && w1 !== undefined && p.kind === 'edge-relay'
          ? { world_per_session_rss_bytes: per(w0.rss, w1.rss) }
          : {}),
      };
      ctx.log(
        `  ${c.opened} opened, ${c.alive_at_end} alive; ${c.per_session_kib.rss} KiB RSS, ${c.per_session_kib.heap} KiB heap per session`,
      );
      cases.push(c);
    } finally {
      await gens?.stop();
      for (const c of started.reverse()) await c.stop();
    }
  }
  const rss = (t: string) => cases.find((c) => c.target === t)?.per_session_bytes.rss ?? NaN;
  const ratios: Record<string, number | null> = {};
  for (const e of engines) {
    ratios[`edge-${e} observer / world session`] = ratio(rss(`edge-${e} observer`), rss('world'));
    ratios[`edge-${e} observer / raw-uws connection`] = ratio(
      rss(`edge-${e} observer`),
      rss('raw-uws connection'),
    );
    ratios[`edge-${e} relay / world session`] = ratio(rss(`edge-${e} relay`), rss('world'));
  }
  if (uwsOk)
    ratios['edge-uws observer / edge-ws observer'] = ratio(rss('edge-uws observer'), rss('edge-ws observer'));
  return {
    bench: 'memory',
    uws: uwsOk ? { available: true } : { available: false, reason: `${ctx.runtime.uws.reason}; ${UWS_HINT}` },
    sessions: n,
    cases,
    ratios,
    method:
      `Idle session: a control connection, initialize, session.open with no subscriptions (no stream connection), ` +
      `answering heartbeats. Readings after gc() twice (the serving processes run with --expose-gc), RSS from ` +
      `/proc/<pid>/status; per session = (reading at N - reading at ${WARM}) / (N - ${WARM}). The raw-uws case ` +
      `holds bare WebSocket connections.`,
  };
}
