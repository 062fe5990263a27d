/**
 * The `awp-edge` command (`awp-edge --help`; each command has `--help`):
 *   awp-edge serve --upstream ws://HOST:PORT[/path] [--listen HOST:PORT] [--admin HOST:PORT]
 *   awp-edge serve --config edge.yaml
 *   awp-edge check-config [--strict] edge.yaml
 *   awp-edge demo
 *   awp-edge example-config
 *   awp-edge recordings verify FILE... | recordings show FILE
 *   awp-edge replay FILE --world URL
 *   awp-edge version | --version
 * Mistakes on the command line and operator errors are one line on stderr (exit code 2 and 1).
 */
import { parseAddress } from '../config/address.js';
import {
  checkConfigFile,
  commandLineSource,
  ConfigError,
  configFileSource,
  type CommandLine,
  type ConfigSource,
} from '../config/load.js';
import type { EdgeConfig } from '../config/schema.js';
import { edgeVersion, SPEC_REVISION } from '../edge/admin.js';
import { Edge } from '../edge/edge.js';
import { uwsAvailability } from '../transport/uws-load.js';
import {
  COMMAND_NAMES,
  COMMANDS,
  commandHelp,
  parseCommand,
  unknownCommand,
  UsageError,
  type Parsed,
} from './args.js';
import { runDemo } from './demo.js';
import { EXAMPLE_CONFIG } from './example-config.js';
import { operatorError, type Listener } from './operator-errors.js';
import { recordingsCommand, type Output } from './recordings.js';
import { ReplayError, replayCommand } from './replay.js';
import { watchSignals } from './signals.js';

const USAGE = `awp-edge: an edge proxy for the Agent World Protocol (AWP v0.1, spec revision ${SPEC_REVISION})

Usage:
${COMMAND_NAMES.map((c) => `  awp-edge ${c.padEnd(15)} ${COMMANDS[c]!.summary}`).join('\n')}
  awp-edge --version

awp-edge COMMAND --help says more about each.
`;

const CREDENTIAL_FLAG =
  /^--?(token|tokens|agent-tokens?|upstream-token|approver-tokens?|auth|password|secret|bearer)(=|$)/i;

export async function main(argv: readonly string[]): Promise<number> {
  const offending = argv.find((a) => CREDENTIAL_FLAG.test(a));
  if (offending !== undefined) {
    process.stderr.write(
      `awp-edge: refusing ${offending.split('=')[0]}: credentials never come from the command line (they end up in ps and shell history);\n` +
        'use AWP_EDGE_AGENT_TOKENS / AWP_EDGE_APPROVER_TOKENS / AWP_EDGE_UPSTREAM_TOKEN or the config file\n',
    );
    return 2;
  }
  const [command, ...rest] = argv;
  if (command === undefined) {
    process.stderr.write(USAGE);
    return 2;
  }
  if (command === '--help' || command === '-h') return out(USAGE);
  if (command === '--version' || command === '-V') return out(versionLine());
  if (COMMANDS[command] === undefined) return usageError(unknownCommand(command));
  let args: Parsed;
  try {
    args = parseCommand(command, rest);
  } catch (err) {
    if (err instanceof UsageError) return usageError(err.message);
    throw err;
  }
  if (args.values.help === true) return out(commandHelp(command));
  const str = (k: 'upstream' | 'config' | 'listen' | 'admin' | 'engine' | 'log-level') =>
    args.values[k] as string | undefined;
  const cli: CommandLine = {
    upstream: str('upstream'),
    listen: str('listen'),
    admin: str('admin'),
    engine: str('engine'),
    log_level: str('log-level'),
  };
  let listeners: Listener[] = listenersOf(cli);
  try {
    switch (command) {
      case 'help': {
        const topic = args.positionals[0];
        if (topic === undefined) return out(USAGE);
        if (COMMANDS[topic] === undefined) return usageError(unknownCommand(topic));
        return out(commandHelp(topic));
      }
      case 'version':
        return out(versionLine());
      case 'example-config':
        return out(EXAMPLE_CONFIG);
      case 'serve': {
        const source = configFor(cli, str('config'));
        listeners = listenersOf(cli, source.config);
        return await serve(source);
      }
      case 'check-config': {
        const file = args.positionals[0] ?? str('config');
        if (file === undefined)
          throw new UsageError('awp-edge check-config: needs a FILE (see awp-edge check-config --help)');
        // Without --strict, secrets that only the running edge has (variables, mounted files) are listed.
        const { config, runtime } = checkConfigFile(file, process.env, args.values.strict === true);
        process.stdout.write(
          `${file}: ok (${config.routes.length} route${config.routes.length === 1 ? '' : 's'}: ${config.routes.map((r) => r.path).join(', ')})\n` +
            runtime.map((r) => `  ${r}\n`).join(''),
        );
        return 0;
      }
      case 'recordings':
        return recordingsCommand(args, STDIO);
      case 'replay':
        return await replayCommand(args, STDIO);
      default: // demo
        return await runDemo(cli);
    }
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`awp-edge: ${err.message}\n`);
      return 2;
    }
    if (err instanceof UsageError) return usageError(err.message);
    if (err instanceof ReplayError) {
      process.stderr.write(`awp-edge replay: ${err.message}\n`);
      return 1;
    }
    const line = operatorError(err, listeners);
    if (line !== undefined) {
      process.stderr.write(`awp-edge ${command}: ${line}\n`);
      return 1;
    }
    throw err;
  }
}

const STDIO: Output = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
};

function out(text: string): number {
  process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  return 0;
}

function usageError(line: string): number {
  process.stderr.write(`${line}\n`);
  return 2;
}

/** `awp-edge 0.1.0 (AWP 0.1, spec revision 0.1-draft.10; Node.js v20.20.2; engine auto: uws)`. */
function versionLine(): string {
  const engine = uwsAvailability().ok ? 'uws' : 'ws (uWebSockets.js does not load here)';
  return `awp-edge ${edgeVersion()} (AWP 0.1, spec revision ${SPEC_REVISION}; Node.js ${process.version}; engine auto: ${engine})`;
}

/** The listeners a run opens, to name the one that cannot listen. */
function listenersOf(cli: CommandLine, config?: EdgeConfig): Listener[] {
  const at = (key: string, what: string, given: string | undefined, dflt: string): Listener[] => {
    const a = parseAddress(given ?? dflt);
    return a === undefined ? [] : [{ key, what, host: a.host, port: a.port }];
  };
  if (config === undefined)
    return [
      ...at('--listen', 'the agent-facing listener', cli.listen, '127.0.0.1:8720'),
      ...at('--admin', 'the admin listener', cli.admin, '127.0.0.1:9464'),
    ];
  const wt = config.webtransport?.listen;
  return [
    { key: 'listen', what: 'the agent-facing listener', ...config.listen },
    { key: 'admin', what: 'the admin listener', ...config.admin },
    ...(wt !== undefined ? [{ key: 'webtransport.listen', what: 'the WebTransport listener', ...wt }] : []),
  ];
}

function configFor(cli: CommandLine, file: string | undefined): ConfigSource {
  if (file !== undefined && cli.upstream !== undefined)
    throw new UsageError('awp-edge serve: give either --upstream or --config, not both');
  if (file !== undefined) return configFileSource(file, process.env, cli);
  if (cli.upstream === undefined)
    throw new UsageError('awp-edge serve: needs --upstream URL or --config FILE (see awp-edge serve --help)');
  return commandLineSource(cli);
}

/**
 * Runs the edge until SIGTERM (graceful drain) or SIGINT (immediate stop); SIGHUP re-reads the credential
 * files (new connections use them, open sessions keep running).
 */
export async function serve(source: ConfigSource): Promise<number> {
  const signals = watchSignals();
  const edge = await Edge.start(source.config, { reread: source.reread });
  edge.containProcessFaults();
  signals.running(() => edge.reloadCredentials('signal'));
  const signal = await signals.stopped;
  if (signal === 'SIGTERM') await edge.drain();
  else await edge.close();
  return 0;
}
