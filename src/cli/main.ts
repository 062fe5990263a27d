/**
 * The `awp-edge` command:
 *   awp-edge serve --upstream ws://HOST:PORT[/path] [--listen HOST:PORT] [--admin HOST:PORT]
 *   awp-edge serve --config edge.yaml
 *   awp-edge check-config edge.yaml
 *   awp-edge demo
 */
import { parseArgs } from 'node:util';
import { ConfigError, configFromCommandLine, loadConfigFile, type CommandLine } from '../config/load.js';
import type { EdgeConfig } from '../config/schema.js';
import { Edge } from '../edge/edge.js';
import { runDemo } from './demo.js';

const USAGE = `awp-edge: an edge proxy for the Agent World Protocol (AWP v0.1, spec revision 0.1-draft.10)

Usage:
  awp-edge serve --upstream ws://HOST:PORT[/path] [--listen HOST:PORT] [--admin HOST:PORT]
  awp-edge serve --config edge.yaml [--listen HOST:PORT] [--admin HOST:PORT]
  awp-edge check-config edge.yaml
  awp-edge demo [--listen HOST:PORT] [--admin HOST:PORT]

Options:
  --upstream URL       the world to front at path / (ws:// or wss://, no credential in it)
  --config FILE        a YAML config with several routes (see README, "Configuration")
  --listen HOST:PORT   agent-facing listener (default 127.0.0.1:8720)
  --admin HOST:PORT    /healthz, /readyz and /metrics (default 127.0.0.1:9464)
  --engine NAME        auto (default), uws or ws
  --log-level LEVEL    fatal, error, warn, info (default), debug, trace, silent

Credentials never come from the command line:
  AWP_EDGE_AGENT_TOKENS    agent credentials, comma-separated
  AWP_EDGE_UPSTREAM_TOKEN  the edge's credential toward the world (with --upstream)
`;

const CREDENTIAL_FLAG = /^--?(token|tokens|agent-tokens?|upstream-token|auth|password|secret|bearer)(=|$)/i;

export async function main(argv: readonly string[]): Promise<number> {
  const offending = argv.find((a) => CREDENTIAL_FLAG.test(a));
  if (offending !== undefined) {
    process.stderr.write(
      `awp-edge: refusing ${offending.split('=')[0]}: credentials never come from the command line (they end up in ps and shell history);\n` +
        'use AWP_EDGE_AGENT_TOKENS / AWP_EDGE_UPSTREAM_TOKEN or the config file\n',
    );
    return 2;
  }
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(USAGE);
    return command === undefined ? 2 : 0;
  }
  let args: ReturnType<typeof parse>;
  try {
    args = parse(rest);
  } catch (err) {
    process.stderr.write(`awp-edge: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const cli: CommandLine = {
    upstream: args.values.upstream,
    listen: args.values.listen,
    admin: args.values.admin,
    engine: args.values.engine,
    log_level: args.values['log-level'],
  };
  try {
    switch (command) {
      case 'serve':
        return await serve(configFor(cli, args.values.config));
      case 'check-config': {
        const file = args.positionals[0] ?? args.values.config;
        if (file === undefined) throw new UsageError('check-config needs a FILE');
        const config = loadConfigFile(file);
        process.stdout.write(
          `${file}: ok (${config.routes.length} route${config.routes.length === 1 ? '' : 's'}: ${config.routes.map((r) => r.path).join(', ')})\n`,
        );
        return 0;
      }
      case 'demo':
        return await runDemo(cli);
      default:
        throw new UsageError(`unknown command ${JSON.stringify(command)}`);
    }
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`awp-edge: ${err.message}\n`);
      return 2;
    }
    if (err instanceof UsageError) {
      process.stderr.write(`awp-edge: ${err.message}\n\n${USAGE}`);
      return 2;
    }
    throw err;
  }
}

class UsageError extends Error {}

function parse(rest: readonly string[]) {
  return parseArgs({
    args: [...rest],
    allowPositionals: true,
    strict: true,
    options: {
      upstream: { type: 'string' },
      config: { type: 'string' },
      listen: { type: 'string' },
      admin: { type: 'string' },
      engine: { type: 'string' },
      'log-level': { type: 'string' },
    },
  });
}

function configFor(cli: CommandLine, file: string | undefined): EdgeConfig {
  if (file !== undefined && cli.upstream !== undefined)
    throw new UsageError('give either --upstream or --config, not both');
  if (file !== undefined) return loadConfigFile(file, process.env, cli);
  if (cli.upstream === undefined) throw new UsageError('serve needs --upstream URL or --config FILE');
  return configFromCommandLine(cli);
}

/** Runs the edge until SIGTERM (graceful drain) or SIGINT (immediate stop). */
export async function serve(config: EdgeConfig): Promise<number> {
  const edge = await Edge.start(config);
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
  if (signal === 'SIGTERM') await edge.drain();
  else await edge.close();
  return 0;
}
