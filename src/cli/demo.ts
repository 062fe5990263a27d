/**
 * `awp-edge demo` (what `npm start` runs): the built-in demo worlds with the edge in front of them.
 */
import { randomBytes } from 'node:crypto';
import { AGENT_TOKENS_ENV, validateConfig, type CommandLine } from '../config/load.js';
import { startDemoWorld, type RunningDemoWorld } from '../demo/server.js';
import { Edge } from '../edge/edge.js';

export async function runDemo(cli: CommandLine): Promise<number> {
  const supplied = process.env[AGENT_TOKENS_ENV]?.trim() || undefined;
  const token = supplied?.split(',')[0]?.trim() ?? randomBytes(24).toString('base64url');
  const worlds: RunningDemoWorld[] = [];
  try {
    worlds.push(await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0 }));
    worlds.push(await startDemoWorld({ kind: 'grid', host: '127.0.0.1', port: 0 }));
  } catch (err) {
    for (const w of worlds) await w.close();
    throw err;
  }
  const [arm, grid] = worlds as [RunningDemoWorld, RunningDemoWorld];
  const config = validateConfig(
    {
      listen: cli.listen,
      admin: cli.admin,
      engine: cli.engine,
      log_level: cli.log_level ?? 'info',
      agents: { tokens: supplied !== undefined ? supplied.split(',').map((t) => t.trim()) : [token] },
      routes: [
        { name: 'arm', path: '/worlds/arm', upstream: arm.url },
        { name: 'grid', path: '/worlds/grid', upstream: grid.url },
      ],
    },
    'demo',
  );
  const edge = await Edge.start(config);
  const base = `ws://${config.listen.host}:${edge.port}`;
  process.stdout.write(
    [
      '',
      `awp-edge demo: two built-in worlds behind the edge (engine: ${edge.engine})`,
      `  streaming arm   ${base}/worlds/arm`,
      `  lockstep grid   ${base}/worlds/grid`,
      `  agent token     ${supplied !== undefined ? `(from ${AGENT_TOKENS_ENV})` : token}`,
      `                  send it as "Authorization: Bearer <token>" or subprotocol "awp.bearer.<token>" next to "awp"`,
      `  metrics         http://${config.admin.host}:${edge.adminPort}/metrics`,
      `  health          http://${config.admin.host}:${edge.adminPort}/healthz`,
      '  Ctrl-C stops.',
      '',
    ].join('\n'),
  );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await edge.close();
  for (const w of worlds) await w.close();
  return 0;
}
