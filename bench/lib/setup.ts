/** Starting the benchmark's processes: worlds, edges, the raw broadcast, load generators. */
import { Child } from './child.js';
import type { Runtime } from './runtime.js';

/** The agent credential every benchmark edge accepts. */
export const BENCH_TOKEN = 'bench-agent-credential-0123456789';
export const ROUTE_PATH = '/arm';

export interface World {
  readonly child: Child;
  readonly url: string;
  /** process.hrtime.bigint() at (just before) the world's session-clock origin. */
  readonly origin: string;
}

export interface WorldOptions {
  readonly proprioHz?: number;
  readonly cameraHz?: number;
  readonly cameraWidth?: number;
  readonly cameraHeight?: number;
  readonly maxActionRateHz?: number;
  readonly heartbeatIntervalMs?: number;
  readonly stepMs?: number;
}

export async function startWorld(
  rt: Runtime,
  options: WorldOptions,
  nofile?: number,
  exposeGc = false,
): Promise<World> {
  const child = await Child.start('bench/lib/world-child.ts', [JSON.stringify(options)], {
    node: rt.node,
    build: rt.build,
    name: 'world',
    ...(nofile !== undefined ? { nofile } : {}),
    ...(exposeGc ? { execArgv: ['--expose-gc'] } : {}),
  });
  return { child, url: child.hello.url as string, origin: child.hello.origin as string };
}

export interface Edge {
  readonly child: Child;
  readonly url: string;
  readonly adminUrl: string;
  readonly engine: string;
}

/** Budgets high enough never to refuse a benchmark's own load (the defaults are per-credential guards). */
export const BENCH_BUDGETS = {
  max_connections: 1_000_000,
  max_sessions: 1_000_000,
  max_messages_per_second: 10_000_000,
  max_bytes_per_second: 2 ** 40,
};

export interface EdgeOptions {
  readonly engine: 'ws' | 'uws';
  readonly upstream: string;
  readonly observers?: 'fanout' | 'relay';
  readonly logLevel?: string;
  readonly nofile?: number;
  readonly exposeGc?: boolean;
  readonly extra?: Record<string, unknown>;
  /** The route's flight recorder (`record:`), off when absent. */
  readonly record?: Record<string, unknown>;
}

/** Extra node flags for a kind of process, e.g. AWP_BENCH_EDGE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof". */
function extraArgs(env: string): string[] {
  return (process.env[env] ?? '').split(' ').filter((a) => a !== '');
}

export async function startEdge(rt: Runtime, o: EdgeOptions): Promise<Edge> {
  const config = {
    listen: '127.0.0.1:0',
    admin: '127.0.0.1:0',
    engine: o.engine,
    // warn: a benchmark measures the data path; info logs one line per session event (open, close).
    log_level: o.logLevel ?? 'warn',
    agents: { tokens: [BENCH_TOKEN] },
    budgets: BENCH_BUDGETS,
    // Every generator connects from 127.0.0.1, a thousand at once: the per-address cap on pending
    // handshakes (64, a flood defence) would close some of them (ECONNRESET), and the cases would compare
    // different observer counts. The listener-wide cap stays.
    transport: { max_pending_handshakes_per_address: 1024 },
    routes: [
      {
        name: 'arm',
        path: ROUTE_PATH,
        upstream: o.upstream,
        observers: o.observers ?? 'fanout',
        hub_linger_ms: 60_000,
        ...(o.record !== undefined && { record: o.record }),
      },
    ],
    ...o.extra,
  };
  const child = await Child.start('bench/lib/edge-child.ts', [JSON.stringify(config)], {
    node: rt.node,
    build: rt.build,
    name: `edge (${o.engine})`,
    ...(o.nofile !== undefined ? { nofile: o.nofile } : {}),
    execArgv: [...(o.exposeGc === true ? ['--expose-gc'] : []), ...extraArgs('AWP_BENCH_EDGE_ARGS')],
  });
  const port = child.hello.port as number;
  return {
    child,
    url: `ws://127.0.0.1:${port}${ROUTE_PATH}`,
    adminUrl: `http://127.0.0.1:${child.hello.adminPort as number}`,
    engine: child.hello.engine as string,
  };
}

export interface RawChannel {
  readonly channel_id: number;
  readonly rate_hz: number;
  readonly payload_bytes: number;
}

export async function startRawBroadcast(
  rt: Runtime,
  channels: readonly RawChannel[],
  nofile?: number,
  exposeGc = false,
): Promise<World> {
  const child = await Child.start('bench/lib/raw-broadcast-child.ts', [JSON.stringify({ channels })], {
    node: rt.node,
    build: rt.build,
    name: 'raw broadcast (uWS)',
    ...(nofile !== undefined ? { nofile } : {}),
    ...(exposeGc ? { execArgv: ['--expose-gc'] } : {}),
  });
  return { child, url: child.hello.url as string, origin: child.hello.origin as string };
}

/**
 * AWP_BENCH_GENERATOR_NICE=N runs the load generators at that niceness: on two shared cores they otherwise
 * take the CPU from the edge, the world and the probe, and the latencies measured are partly their
 * scheduling (as if the observers ran on other machines, which this one cannot have).
 */
export function startGenerator(rt: Runtime, name: string, nofile?: number): Promise<Child> {
  const nice = Number(process.env.AWP_BENCH_GENERATOR_NICE ?? 0);
  return Child.start('bench/lib/observer-gen-child.ts', [], {
    node: rt.node,
    build: rt.build,
    name,
    ...(nofile !== undefined ? { nofile } : {}),
    ...(nice > 0 ? { nice } : {}),
  });
}
