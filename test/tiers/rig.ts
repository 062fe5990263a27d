/**
 * Edges in front of edges (issue 13): a chain of real `awp-edge serve` processes, each tier's route
 * upstream being the tier below, the lowest in front of the world. Counted from the world up:
 *
 *   world <- tiers[0] (C, central) <- tiers[1] (B) <- tiers[2] (A, the leaf) <- agents, observers
 *
 * Each tier accepts one credential from the tier above (agents present EDGE_AGENT_TOKEN at the leaf
 * only), and holds the credential the tier below issued it: through `upstream_token_env` (B, C) or
 * `upstream_token_file` (the leaf), as an operator gives it. A tier that carries another edge sees all of
 * that edge's agents and its observer hub on one credential, so the budgets per credential must hold
 * their sum (TIER_BUDGETS; README "Edges in front of edges").
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { metric } from '../hostile/support.js';
import type { EdgeProcess, EdgeProcessOptions, EdgeProcessRoute } from '../support/edge-process.js';
import { EDGE_AGENT_TOKEN, startReplica, type useCleanups } from '../scale/rig.js';

export const ROUTE_PATH = '/arm';
const TIER_NAMES = ['C', 'B', 'A'] as const;
const UPSTREAM_TOKEN_ENV = 'AWP_EDGE_TIER_UPSTREAM_TOKEN';

/**
 * Budgets a tier sets for the credential of the edge above it: that edge's relay agents (one session and
 * one control connection each; stream connections are not counted), its hub (one session, one control
 * connection) and every message its agents send. The defaults (1,024 sessions, 2,048 connections, 2,000
 * messages/s per credential) are sized for one agent's credential and would refuse a busy upper tier.
 */
export const TIER_BUDGETS = {
  max_connections: 200_000,
  max_sessions: 100_000,
  max_messages_per_second: 1_000_000,
  max_bytes_per_second: 1024 * 1024 * 1024,
} as const;

/** The credential tier `i` accepts from the tier above it (the leaf: the agents' credential). */
export function tierCredential(i: number, count: number): string {
  return i === count - 1 ? EDGE_AGENT_TOKEN : `edge-tier-${i}-credential-of-the-tier-above`;
}

export interface Tier {
  readonly name: string;
  readonly edge: EdgeProcess;
  /** The agent-facing URL of the route (default: the tier's route path). */
  url(path?: string): string;
  /** The tier's /metrics text. */
  metrics(): Promise<string>;
}

export interface TierRig {
  /** From the world up: tiers[0] is in front of the world, tiers.at(-1) is the leaf. */
  readonly tiers: Tier[];
  readonly leaf: Tier;
  /** SIGKILLs tier `i` and starts it again on the same ports with the same configuration. */
  restart(i: number, options?: { kill?: boolean }): Promise<Tier>;
}

export interface TierOptions {
  /** 1 to 3 edges (default 3). */
  readonly count?: number;
  readonly route?: Partial<EdgeProcessRoute>;
  /** Per tier (index from the world up): route keys over `route`. */
  readonly routeOf?: (i: number) => Partial<EdgeProcessRoute>;
  /** Per tier (index from the world up): further options, e.g. a Redis store. */
  readonly perTier?: (i: number) => Partial<EdgeProcessOptions>;
  /** Budgets of the tiers that carry another edge (default TIER_BUDGETS; null: the defaults). */
  readonly budgets?: Record<string, number> | null;
  readonly logLevel?: string;
}

export async function startTiers(
  cleanup: ReturnType<typeof useCleanups>,
  worldUrl: string,
  o: TierOptions = {},
): Promise<TierRig> {
  const count = o.count ?? 3;
  if (count < 1 || count > 3) throw new Error('1 to 3 tiers');
  const dir = mkdtempSync(join(tmpdir(), 'awp-edge-tiers-'));
  cleanup(() => rmSync(dir, { recursive: true, force: true }));
  const tiers: Tier[] = [];
  const configs: EdgeProcessOptions[] = [];

  const launch = async (i: number, options: EdgeProcessOptions): Promise<Tier> => {
    const edge = await startReplica(cleanup, options);
    const tier: Tier = {
      name: TIER_NAMES[3 - count + i]!,
      edge,
      url: (path = ROUTE_PATH) => edge.url(path),
      metrics: async () => (await fetch(`${edge.adminUrl}/metrics`)).text(),
    };
    tiers[i] = tier;
    return tier;
  };

  for (let i = 0; i < count; i++) {
    const below = i === 0 ? undefined : tiers[i - 1]!;
    const leaf = i === count - 1;
    const credential = below === undefined ? undefined : tierCredential(i - 1, count);
    const tokenFile = join(dir, `upstream-token-${i}`);
    if (credential !== undefined && leaf) writeFileSync(tokenFile, `${credential}\n`, { mode: 0o600 });
    const route: EdgeProcessRoute = {
      name: 'arm',
      path: ROUTE_PATH,
      upstream: below === undefined ? worldUrl : below.url(),
      ...(credential !== undefined &&
        (leaf ? { upstream_token_file: tokenFile } : { upstream_token_env: UPSTREAM_TOKEN_ENV })),
      ...o.route,
      ...o.routeOf?.(i),
    };
    const extra = o.perTier?.(i) ?? {};
    const budgets = o.budgets === undefined ? TIER_BUDGETS : o.budgets;
    const options: EdgeProcessOptions = {
      routes: [route],
      agentTokens: [tierCredential(i, count)],
      logLevel: o.logLevel ?? 'info',
      ...extra,
      env: { ...(credential !== undefined && !leaf && { [UPSTREAM_TOKEN_ENV]: credential }), ...extra.env },
      extra: {
        // The product's default: a tier's hop is lost after 10 s of silence. (The edge-process default,
        // 1 s, loses a test's agents when the test process, which runs the world, stalls for 2 s.)
        timing: { hop_ping_interval_ms: 5000 },
        ...(!leaf && budgets !== null && { budgets }),
        ...extra.extra,
      },
    };
    configs[i] = options;
    await launch(i, options);
  }

  return {
    tiers,
    get leaf() {
      return tiers.at(-1)!;
    },
    restart: async (i, r = {}) => {
      const old = tiers[i]!;
      if (r.kill !== false) old.edge.kill('SIGKILL');
      await old.edge.exited;
      const base = configs[i]!;
      return launch(i, {
        ...base,
        extra: {
          ...base.extra,
          listen: `127.0.0.1:${old.edge.port}`,
          admin: `127.0.0.1:${old.edge.adminPort}`,
        },
      });
    },
  };
}

/** What a tier's metrics say of its sessions and its upstream connections on the route. */
export interface TierCensus {
  readonly observerSessions: number;
  readonly relaySessions: number;
  readonly hubConnections: number;
  readonly controlConnections: number;
}

export async function census(tier: Tier): Promise<TierCensus> {
  const text = await tier.metrics();
  return {
    observerSessions: metric(text, 'awp_edge_sessions', { kind: 'observer' }),
    relaySessions: metric(text, 'awp_edge_sessions', { kind: 'relay' }),
    hubConnections: metric(text, 'awp_edge_upstream_connections', { kind: 'hub' }),
    controlConnections: metric(text, 'awp_edge_upstream_connections', { kind: 'control' }),
  };
}
