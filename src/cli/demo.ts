/**
 * `awp-edge demo` (what `npm start` runs): the built-in demo worlds with the edge in front of them, and the
 * live viewer. Demo agents move an arm and walk a grid through the edge (relay sessions) in worlds of their
 * own (/worlds/demo-arm, /worlds/demo-grid): each world has one embodiment, so /worlds/arm and /worlds/grid
 * stay free for the user's agents.
 */
import { randomBytes } from 'node:crypto';
import { AGENT_TOKENS_ENV, validateConfig, type CommandLine } from '../config/load.js';
import type { EdgeConfig } from '../config/schema.js';
import { startArmAgent } from '../demo/agents/arm-agent.js';
import type { DemoAgent } from '../demo/agents/agent.js';
import { startGridAgent } from '../demo/agents/grid-agent.js';
import { startDemoWorld, type RunningDemoWorld } from '../demo/server.js';
import { Edge } from '../edge/edge.js';
import { watchSignals } from './signals.js';

export interface RunningDemo {
  readonly edge: Edge;
  readonly config: EdgeConfig;
  readonly worlds: readonly RunningDemoWorld[];
  readonly agents: readonly DemoAgent[];
  /** The agent credential (generated unless AWP_EDGE_AGENT_TOKENS gives one). */
  readonly token: string;
  readonly tokenSupplied: boolean;
  /** The viewer page, with the credential in the fragment (never sent to a server). */
  viewerUrl(withToken: boolean): string;
  close(): Promise<void>;
}

export interface DemoOptions {
  /** Run the demo agents (default true). */
  readonly agents?: boolean;
  /** Extra top-level configuration (tests: timing, engine). */
  readonly extra?: Record<string, unknown>;
  readonly log?: (line: string) => void;
}

/** The agents' worlds, then the users'. */
const DEMO_KINDS = ['arm', 'grid', 'arm', 'grid'] as const;

export async function startDemo(cli: CommandLine, opts: DemoOptions = {}): Promise<RunningDemo> {
  const supplied = process.env[AGENT_TOKENS_ENV]?.trim() || undefined;
  const tokens = supplied !== undefined ? supplied.split(',').map((t) => t.trim()) : undefined;
  const token = tokens?.[0] ?? randomBytes(24).toString('base64url');
  const worlds: RunningDemoWorld[] = [];
  const withAgents = opts.agents !== false;
  try {
    for (const kind of withAgents ? DEMO_KINDS : DEMO_KINDS.slice(2))
      // The grid's camera (the grid from above, per tick) is the demo's: the reference trace has none.
      worlds.push(await startDemoWorld({ kind, host: '127.0.0.1', port: 0, cameraCellPx: 32 }));
  } catch (err) {
    for (const w of worlds) await w.close();
    throw err;
  }
  // The agents' worlds first: the viewer lists routes in this order, the moving ones on top.
  const names = withAgents ? ['demo-arm', 'demo-grid', 'arm', 'grid'] : ['arm', 'grid'];
  const config = validateConfig(
    {
      listen: cli.listen,
      admin: cli.admin,
      engine: cli.engine,
      log_level: cli.log_level ?? 'info',
      agents: { tokens: tokens ?? [token] },
      routes: worlds.map((w, i) => ({ name: names[i], path: `/worlds/${names[i]!}`, upstream: w.url })),
      viewer: { enabled: true },
      ...opts.extra,
    },
    'demo',
  );
  const edge = await Edge.start(config).catch(async (err: unknown) => {
    for (const w of worlds) await w.close();
    throw err;
  });
  const base = `ws://${config.listen.host}:${edge.port}`;
  const agents: DemoAgent[] = withAgents
    ? [
        startArmAgent({ url: `${base}/worlds/demo-arm`, token, log: opts.log }),
        startGridAgent({ url: `${base}/worlds/demo-grid`, token, log: opts.log }),
      ]
    : [];
  return {
    edge,
    config,
    worlds,
    agents,
    token,
    tokenSupplied: supplied !== undefined,
    viewerUrl: (withToken) =>
      `http://${config.listen.host}:${edge.port}/viewer/${withToken ? `#token=${encodeURIComponent(token)}` : ''}`,
    async close() {
      await Promise.all(agents.map((a) => a.stop()));
      await edge.close();
      for (const w of worlds) await w.close();
    },
  };
}

export async function runDemo(cli: CommandLine): Promise<number> {
  // Agents report only trouble (a lost connection they recover from): their moves show in the viewer.
  const signals = watchSignals();
  const demo = await startDemo(cli, {
    log: (line) => {
      if (line.includes('reconnecting')) process.stderr.write(`demo agent: ${line}\n`);
    },
  });
  demo.edge.containProcessFaults();
  const { config, edge } = demo;
  const base = `ws://${config.listen.host}:${edge.port}`;
  process.stdout.write(
    [
      '',
      `awp-edge demo: built-in worlds behind the edge (engine: ${edge.engine})`,
      `  live viewer     ${demo.viewerUrl(!demo.tokenSupplied)}`,
      demo.tokenSupplied
        ? `                  (open ${demo.viewerUrl(false)} and give it your token, or append #token=<token>)`
        : '                  (the token is in the #fragment: browsers never send it to a server)',
      `  streaming arm   ${base}/worlds/arm      (free for your agent)`,
      `  lockstep grid   ${base}/worlds/grid     (free for your agent)`,
      `  demo agents     ${base}/worlds/demo-arm, ${base}/worlds/demo-grid (moving; watch them in the viewer)`,
      `  agent token     ${demo.tokenSupplied ? `(from ${AGENT_TOKENS_ENV})` : demo.token}`,
      `                  send it as "Authorization: Bearer <token>" or subprotocol "awp.bearer.<token>" next to "awp"`,
      `  metrics         http://${config.admin.host}:${edge.adminPort}/metrics`,
      `  health          http://${config.admin.host}:${edge.adminPort}/healthz`,
      '  Ctrl-C stops.',
      '',
    ].join('\n'),
  );
  // SIGHUP validates the credentials again as serve does (the demo's come from the environment or are
  // generated: nothing changes, the log says so).
  signals.running(() => edge.reloadCredentials('signal'));
  await signals.stopped;
  await demo.close();
  return 0;
}
