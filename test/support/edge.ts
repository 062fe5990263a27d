/** Starts an edge in-process on loopback for a test, with a known agent credential. */
import { validateConfig } from '../../src/config/load.js';
import { Edge, type EdgeOptions } from '../../src/edge/edge.js';
import { createLogger } from '../../src/telemetry/logger.js';

export const AGENT_TOKEN = 'test-agent-credential-0123456789';

export interface TestEdge {
  readonly edge: Edge;
  /** The agent-facing URL of a route path. */
  url(path?: string): string;
  readonly adminUrl: string;
  close(): Promise<void>;
}

export interface TestRoute {
  readonly path: string;
  readonly upstream: string;
  readonly name?: string;
  readonly upstream_token?: string;
  /** Origins of browser pages allowed to connect (default: the edge's own origin only). */
  readonly allowed_origins?: readonly string[];
  /** The flight recorder's `record:` section (issue 14). */
  readonly record?: Readonly<Record<string, unknown>>;
}

export async function startEdge(
  routes: readonly TestRoute[],
  extra: Record<string, unknown> = {},
  options: EdgeOptions = {},
): Promise<TestEdge> {
  const config = validateConfig(
    {
      listen: '127.0.0.1:0',
      admin: '127.0.0.1:0',
      log_level: 'silent',
      // CI runs the behaviour tests once per engine (see .ci/run).
      engine: process.env.AWP_EDGE_ENGINE ?? 'ws',
      agents: { tokens: [AGENT_TOKEN] },
      timing: { hop_ping_interval_ms: 1000 },
      routes: routes.map((r, i) => ({ name: r.name ?? `r${i}`, ...r })),
      ...extra,
    },
    'test',
    {},
  );
  const edge = await Edge.start(config, { log: createLogger('silent'), ...options });
  return {
    edge,
    url: (path = routes[0]?.path ?? '/') => `ws://127.0.0.1:${edge.port}${path}`,
    adminUrl: `http://127.0.0.1:${edge.adminPort}`,
    close: () => edge.close(),
  };
}
