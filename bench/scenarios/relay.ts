/**
 * Relay overhead: an acting agent's `ping` round trip and `action.submit` admission time (request to
 * result) through the edge versus directly to the world. Three identical worlds (one embodiment each),
 * one behind each engine's edge and one reached directly, plus a fourth behind a minimal pass-through
 * proxy (the floor of any relay on this machine); one agent process interleaves its requests over all
 * paths so that every path sees the same machine noise. nginx (Debian's nginx-light, installed if missing and
 * possible) proxies a fifth copy of the world without parsing it: what an operator would use instead of
 * an AWP-aware edge, the baseline the edge's added latency is compared with (edge added / nginx added).
 */
import { Child, stopAll } from '../lib/child.js';
import { diff, ratio, type BenchContext } from '../lib/context.js';
import type { LatencySummary } from '../lib/histogram.js';
import { BENCH_TOKEN, startEdge, startWorld } from '../lib/setup.js';
import { UWS_HINT } from '../lib/runtime.js';
import { ensureNginx, startNginx } from '../lib/nginx.js';
import type { Service } from '../lib/service.js';

interface PathResult {
  readonly latency: LatencySummary;
  readonly failures: number;
}

interface Added {
  readonly ping_p50: number | null;
  readonly ping_p99: number | null;
  readonly submit_p50: number | null;
  readonly submit_p99: number | null;
}

interface Phase {
  readonly targets: Record<string, PathResult>;
  readonly cpu: { cpu_pct: number };
  readonly wall_ms: number;
}

export interface RelaySummary {
  readonly bench: 'relay';
  readonly uws: { available: boolean; reason?: string };
  readonly ping: Phase;
  readonly submit: Phase;
  /** Median and p99 the edge (and the pass-through floor) adds over the direct path (us). */
  readonly added_us: Record<string, Added>;
  /** The nginx baseline: its version, or why it did not run (then there is no `nginx` path). */
  readonly nginx: { available: true; version: string } | { available: false; reason: string };
  /**
   * Per edge: what it adds over direct / what nginx adds over direct, same run (target: <= 1.5 on Node 24 +
   * uWebSockets.js). null where nginx adds nothing or less (noise at p99): read added_us then.
   */
  readonly vs_nginx?: Record<string, Added>;
  /** The runtime every process ran on (the target is for the production runtime, Node 24). */
  readonly node: string;
  readonly agent_saturated: boolean;
  readonly method: string;
}

const METHOD =
  'Per round the agent sends one request to each path in turn (rotating order) and waits for each answer; ' +
  'round trip = hrtime at the read that delivered the answer - hrtime just before the write. Pings: back to back. ' +
  'Submits: move_to_pose (preempt replace) every 25 ms per round; the worlds allow 1000 actions/s so no ' +
  'envelope refusal interferes. The edges run with log_level warn, memory store. nginx: one worker, ' +
  'proxy_http_version 1.1 with Upgrade/Connection "upgrade", proxy_buffering off, tcp_nodelay on, access_log off; ' +
  'vs_nginx = (edge - direct) / (nginx - direct) at the same quantile.';

export async function runRelay(ctx: BenchContext): Promise<RelaySummary> {
  const uwsOk = ctx.runtime.uws.ok;
  const engines = uwsOk ? (['ws', 'uws'] as const) : (['ws'] as const);
  const worldOpts = { maxActionRateHz: 1000 };
  const children: Child[] = [];
  let nginx: Service | undefined;
  const nginxState = await ensureNginx((line) => ctx.log(line));
  if (!nginxState.ok) ctx.log(`relay: nginx baseline skipped: ${nginxState.reason}`);
  try {
    const direct = await startWorld(ctx.runtime, worldOpts);
    children.push(direct.child);
    const targets = [{ name: 'direct', url: direct.url }];
    for (const engine of engines) {
      const world = await startWorld(ctx.runtime, worldOpts);
      children.push(world.child);
      const edge = await startEdge(ctx.runtime, { engine, upstream: world.url });
      children.push(edge.child);
      targets.push({ name: `edge-${engine}`, url: edge.url });
    }
    // The floor: a pass-through proxy that parses nothing, on the best engine available.
    const floorEngine = uwsOk ? 'uws' : 'ws';
    const floorWorld = await startWorld(ctx.runtime, worldOpts);
    children.push(floorWorld.child);
    const floor = await Child.start(
      'bench/lib/pass-relay-child.ts',
      [JSON.stringify({ upstream: floorWorld.url, engine: floorEngine })],
      {
        node: ctx.runtime.node,
        build: ctx.runtime.build,
        name: 'pass-through relay',
      },
    );
    children.push(floor);
    targets.push({ name: `passthrough-${floorEngine}`, url: floor.hello.url as string });
    // The operator's alternative: nginx proxying the WebSocket to its own copy of the world.
    if (nginxState.ok) {
      const nginxWorld = await startWorld(ctx.runtime, worldOpts);
      children.push(nginxWorld.child);
      const proxy = await startNginx(nginxWorld.url);
      nginx = proxy.service;
      targets.push({ name: 'nginx', url: proxy.url });
    }
    const agent = await Child.start('bench/lib/agent-gen-child.ts', [], {
      node: ctx.runtime.node,
      build: ctx.runtime.build,
      name: 'agent',
    });
    children.push(agent);
    await agent.request('connect', { targets, credential: BENCH_TOKEN });
    const pings = ctx.full ? 5000 : 1500;
    // Enough submits for a p99 to mean something (the ratio to nginx is read at p99 too).
    const submits = ctx.full ? 1000 : 400;
    ctx.log(
      `relay: ${pings} ping rounds, ${submits} submit rounds over ${targets.map((t) => t.name).join(', ')}`,
    );
    await agent.request('pings', { rounds: 200 }); // warm-up: JIT, connection buffers
    const ping = await agent.request<Phase & Record<string, unknown>>('pings', { rounds: pings }, 300_000);
    const submit = await agent.request<Phase & Record<string, unknown>>(
      'submits',
      { rounds: submits, intervalMs: 25 },
      300_000,
    );
    await agent.request('close');
    const base = (p: Phase) => p.targets.direct!.latency;
    const added: RelaySummary['added_us'] = {};
    const others = [...engines.map((e) => `edge-${e}`), `passthrough-${floorEngine}`];
    for (const k of [...others, ...(nginxState.ok ? ['nginx'] : [])]) {
      added[k] = {
        ping_p50: diff(ping.targets[k]!.latency.p50_us, base(ping).p50_us),
        ping_p99: diff(ping.targets[k]!.latency.p99_us, base(ping).p99_us),
        submit_p50: diff(submit.targets[k]!.latency.p50_us, base(submit).p50_us),
        submit_p99: diff(submit.targets[k]!.latency.p99_us, base(submit).p99_us),
      };
    }
    const ng = added.nginx;
    const vsNginx: Record<string, Added> = {};
    // nginx adding nothing (or less than nothing: noise at p99) leaves no ratio to read: null, see added_us.
    const over = (a: number | null, b: number | null) =>
      a === null || b === null || b <= 0 ? null : ratio(a, b);
    if (ng !== undefined) {
      for (const k of others) {
        const a = added[k]!;
        vsNginx[k] = {
          ping_p50: over(a.ping_p50, ng.ping_p50),
          ping_p99: over(a.ping_p99, ng.ping_p99),
          submit_p50: over(a.submit_p50, ng.submit_p50),
          submit_p99: over(a.submit_p99, ng.submit_p99),
        };
      }
    }
    return {
      bench: 'relay',
      uws: uwsOk
        ? { available: true }
        : { available: false, reason: `${ctx.runtime.uws.reason}; ${UWS_HINT}` },
      ping: { targets: ping.targets, cpu: ping.cpu, wall_ms: ping.wall_ms },
      submit: { targets: submit.targets, cpu: submit.cpu, wall_ms: submit.wall_ms },
      added_us: added,
      nginx: nginxState.ok
        ? { available: true, version: nginxState.version }
        : { available: false, reason: nginxState.reason },
      ...(ng !== undefined ? { vs_nginx: vsNginx } : {}),
      node: ctx.runtime.version,
      // Back-to-back requests keep the agent's one thread busy, but mostly waiting: >90 % CPU would bound the figures.
      agent_saturated: ping.cpu.cpu_pct > 90,
      method: METHOD,
    };
  } finally {
    await nginx?.stop();
    await stopAll(children.reverse());
  }
}
