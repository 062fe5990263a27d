/**
 * Edges in front of edges (issue 13 item 3): what each tier of edges adds, and what the world serves.
 *
 * Four paths to four identical demo arm worlds, in the same run: `direct` (the world itself), and chains
 * of 1, 2 and 3 edges (world <- edge <- edge <- edge, each edge's route upstream the edge below, with
 * its credential). Measured on every path at once, so all see the same machine noise:
 *
 * - ping round trip of an acting agent (a relay session: every edge relays the ping to the world), one
 *   agent process interleaving its requests over the four paths (as bench/scenarios/relay.ts);
 * - world sessions per N observers at the leaf (1 per hub: one, however many observers), with each
 *   tier's own count of observer sessions and upstream hub connections from its /metrics;
 * - frame age at the leaf: one observer on the `ws` binding at the top of each chain (or at the world),
 *   one generator process per path, the 100 Hz `proprio` channel; age = receipt hrtime - (the world's
 *   origin + the world's ts_send_ns), which every edge forwards unchanged.
 */
import { Child, stopAll } from '../lib/child.js';
import { diff, sleep, type BenchContext } from '../lib/context.js';
import { Generators, type GroupSummary } from '../lib/generators.js';
import type { LatencySummary } from '../lib/histogram.js';
import { ProcSampler } from '../lib/procstat.js';
import { BENCH_TOKEN, ROUTE_PATH, startEdge, startWorld, type Edge, type World } from '../lib/setup.js';

/** A path: its world and its edges from the world up (none for `direct`). */
interface Path {
  readonly name: string;
  readonly world: World;
  readonly edges: Edge[];
  /** Where agents and observers connect: the top edge, or the world. */
  readonly url: string;
}

interface TierCount {
  /** Observer sessions this edge serves (the tier above's hub, or the observers at the leaf). */
  readonly observer_sessions: number;
  /** Its upstream observer sessions (hubs' control connections). */
  readonly hub_connections: number;
}

interface SessionsRow {
  readonly observers: number;
  readonly opened: number;
  /** Observer sessions the world serves, per path. */
  readonly world_observer_sessions: Record<string, number>;
  /** Per path with edges: each edge from the world up. */
  readonly tiers: Record<string, TierCount[]>;
}

export interface TiersSummary {
  readonly bench: 'tiers';
  readonly engine: string;
  readonly ping: Record<string, { latency: LatencySummary; failures: number }>;
  readonly frame_age: Record<string, GroupSummary['latency'] & { delivered_fps: number; observers: number }>;
  /** p50 / p99 each path adds over direct, and per tier (the path's added latency / its edges), us. */
  readonly added_us: Record<
    string,
    {
      ping_p50: number | null;
      ping_p99: number | null;
      age_p50: number | null;
      age_p99: number | null;
      per_tier_ping_p50: number | null;
      per_tier_age_p50: number | null;
    }
  >;
  /** CPU of each edge over the frame window, % of one core, per path from the world up. */
  readonly edge_cpu_pct: Record<string, number[]>;
  readonly sessions: SessionsRow[];
  readonly method: string;
}

const METHOD =
  'Four demo arm worlds; direct, and chains of 1, 2 and 3 edges (best engine available, memory store, ' +
  'log_level warn, hub_linger 60 s). Pings: one relay agent per path (arm_01), back-to-back rounds over ' +
  'the four paths in rotating order, round trip = hrtime at the read of the answer - hrtime before the ' +
  "write. Sessions: N observer sessions (no channels) opened at each path's top (cumulative: 1, 10, " +
  "100[, 1000]), then the world's count of open observer sessions and each edge's " +
  'awp_edge_sessions{kind=observer} and awp_edge_upstream_connections{kind=hub}. Frame age: one observer ' +
  'per path on the ws binding subscribed to proprio (100 Hz, 73-byte frames), one generator per path, 2 s ' +
  'warm-up then the window; age = receipt hrtime - (world origin + ts_send_ns) on the shared ' +
  "CLOCK_MONOTONIC; the edges forward the world's stamp, so the age holds every hop.";

/** The sum of a metric's samples whose labels include `labels` (Prometheus text). */
function sample(text: string, name: string, labels: Record<string, string>): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const brace = line.indexOf('}');
    const labelText = brace < 0 ? '' : line.slice(name.length + 1, brace);
    if (Object.entries(labels).every(([k, v]) => labelText.includes(`${k}="${v}"`)))
      sum += Number(line.slice(brace < 0 ? name.length : brace + 1).trim());
  }
  return sum;
}

async function tierCount(edge: Edge): Promise<TierCount> {
  const text = await (await fetch(`${edge.adminUrl}/metrics`)).text();
  return {
    observer_sessions: sample(text, 'awp_edge_sessions', { kind: 'observer' }),
    hub_connections: sample(text, 'awp_edge_upstream_connections', { kind: 'hub' }),
  };
}

async function worldObservers(w: World): Promise<number> {
  return (await w.child.request<{ observers: number }>('sessions')).observers;
}

export async function runTiers(ctx: BenchContext): Promise<TiersSummary> {
  const engine = ctx.runtime.uws.ok ? 'uws' : 'ws';
  const window = ctx.durationS ?? (ctx.full ? 20 : 10);
  const sizes = ctx.full ? [1, 10, 100, 1000] : [1, 10, 100];
  const maxN = sizes.at(-1)!;
  const fds = maxN * 2 + 512;
  const children: Child[] = [];
  const paths: Path[] = [];
  try {
    for (let k = 0; k <= 3; k++) {
      const world = await startWorld(ctx.runtime, { maxActionRateHz: 1000 }, fds);
      children.push(world.child);
      const edges: Edge[] = [];
      for (let i = 0; i < k; i++) {
        const upstream = i === 0 ? world.url : edges[i - 1]!.url;
        const edge = await startEdge(ctx.runtime, {
          engine,
          upstream,
          nofile: fds,
          extra: {
            routes: [
              {
                name: 'arm',
                path: ROUTE_PATH,
                upstream,
                // The edge below accepts BENCH_TOKEN: the tier's credential toward it.
                ...(i > 0 && { upstream_token: BENCH_TOKEN }),
                hub_linger_ms: 60_000,
              },
            ],
          },
        });
        children.push(edge.child);
        edges.push(edge);
      }
      paths.push({
        name: k === 0 ? 'direct' : `tiers-${k}`,
        world,
        edges,
        url: edges.at(-1)?.url ?? world.url,
      });
    }
    ctx.log(`tiers: paths ${paths.map((p) => p.name).join(', ')} (engine ${engine})`);

    // Ping round trips of relay agents, interleaved.
    const agent = await Child.start('bench/lib/agent-gen-child.ts', [], {
      node: ctx.runtime.node,
      build: ctx.runtime.build,
      name: 'agent',
    });
    children.push(agent);
    await agent.request('connect', {
      targets: paths.map((p) => ({ name: p.name, url: p.url })),
      credential: BENCH_TOKEN,
    });
    const rounds = ctx.full ? 5000 : 1500;
    ctx.log(`tiers: ${rounds} ping rounds`);
    await agent.request('pings', { rounds: 200 });
    const ping = await agent.request<{
      targets: Record<string, { latency: LatencySummary; failures: number }>;
    }>('pings', { rounds }, 300_000);
    await agent.request('close');

    // World sessions per N observers at the top of each path.
    const sessions: SessionsRow[] = [];
    const idle = await Promise.all(paths.map(() => Generators.start(ctx.runtime, 1, fds)));
    try {
      let have = 0;
      for (const n of sizes) {
        ctx.log(`tiers: ${n} observer sessions per path`);
        const opened = await Promise.all(
          paths.map((p, i) =>
            idle[i]!.open(n - have, {
              mode: 'idle',
              url: p.url,
              credential: BENCH_TOKEN,
              origin: p.world.origin,
            }),
          ),
        );
        have = n;
        await sleep(1000);
        const world: Record<string, number> = {};
        const tiers: Record<string, TierCount[]> = {};
        for (const p of paths) {
          world[p.name] = await worldObservers(p.world);
          if (p.edges.length > 0) tiers[p.name] = await Promise.all(p.edges.map(tierCount));
        }
        sessions.push({
          observers: n,
          opened: Math.min(...(await Promise.all(idle.map((g) => g.alive())))),
          world_observer_sessions: world,
          tiers,
        });
        if (opened.some((o) => o.failed > 0))
          ctx.log(`  open failures: ${opened.map((o) => `${o.failed} (${o.errors.join('; ')})`).join(', ')}`);
      }
    } finally {
      await Promise.all(idle.map((g) => g.stop()));
    }

    // Frame age at the top of each path, all paths in the same window.
    // One observer per path: the age then holds each hop's cost and no fan-out (bench/scenarios/fanout.ts
    // measures that); the census's idle sessions are closed or suspended by now and get no frames.
    ctx.log(`tiers: one observer per path, frame age over ${window} s`);
    const gens = await Promise.all(paths.map(() => Generators.start(ctx.runtime, 1, fds)));
    const age: TiersSummary['frame_age'] = {};
    const edgeCpu: Record<string, number[]> = {};
    try {
      await Promise.all(
        paths.map((p, i) =>
          gens[i]!.open(1, {
            mode: 'awp',
            url: p.url,
            credential: BENCH_TOKEN,
            origin: p.world.origin,
            channelNames: { 1: 'proprio' },
          }),
        ),
      );
      await Promise.all(gens.map((g) => g.subscribe([{ channel: 'proprio' }])));
      await sleep(2000);
      const sampler = new ProcSampler(
        Object.fromEntries(paths.flatMap((p) => p.edges.map((e, i) => [`${p.name}/${i}`, e.child.pid]))),
      );
      sampler.begin();
      await Promise.all(gens.map((g) => g.begin()));
      await sleep(window * 1000);
      const reports = await Promise.all(gens.map((g) => g.end()));
      const procs = sampler.end();
      for (const [i, p] of paths.entries()) {
        const h = reports[i]!.healthy;
        age[p.name] = { ...h.latency, delivered_fps: h.delivered_fps, observers: h.observers };
        edgeCpu[p.name] = p.edges.map((_, j) => procs[`${p.name}/${j}`]!.cpu_pct);
      }
    } finally {
      await Promise.all(gens.map((g) => g.stop()));
    }

    const direct = paths[0]!.name;
    const added: TiersSummary['added_us'] = {};
    for (const p of paths.slice(1)) {
      const k = p.edges.length;
      const pingP50 = diff(ping.targets[p.name]!.latency.p50_us, ping.targets[direct]!.latency.p50_us);
      const ageP50 = diff(age[p.name]!.p50_us, age[direct]!.p50_us);
      added[p.name] = {
        ping_p50: pingP50,
        ping_p99: diff(ping.targets[p.name]!.latency.p99_us, ping.targets[direct]!.latency.p99_us),
        age_p50: ageP50,
        age_p99: diff(age[p.name]!.p99_us, age[direct]!.p99_us),
        per_tier_ping_p50: pingP50 === null ? null : Math.round(pingP50 / k),
        per_tier_age_p50: ageP50 === null ? null : Math.round(ageP50 / k),
      };
    }
    return {
      bench: 'tiers',
      engine,
      ping: ping.targets,
      frame_age: age,
      added_us: added,
      edge_cpu_pct: edgeCpu,
      sessions,
      method: METHOD,
    };
  } finally {
    await stopAll(children.reverse());
  }
}
