/**
 * The command line's grammar: which options each command takes, their help, and the one-line answers to
 * what does not parse (an unknown option with the nearest known one, a missing value, a stray argument).
 */
import { parseArgs } from 'node:util';

export const OPTIONS = {
  upstream: {
    type: 'string',
    arg: 'URL',
    help: 'the world to front at path / (ws:// or wss://, no credential in it)',
  },
  config: {
    type: 'string',
    arg: 'FILE',
    help: 'a YAML config with several routes (awp-edge example-config prints one)',
  },
  listen: { type: 'string', arg: 'HOST:PORT', help: 'agent-facing listener (default 127.0.0.1:8720)' },
  admin: {
    type: 'string',
    arg: 'HOST:PORT',
    help: '/healthz, /readyz and /metrics (default 127.0.0.1:9464)',
  },
  engine: { type: 'string', arg: 'NAME', help: 'auto (default: uWebSockets.js where it loads), uws or ws' },
  'log-level': {
    type: 'string',
    arg: 'LEVEL',
    help: 'fatal, error, warn, info (default), debug, trace, silent',
  },
  strict: {
    type: 'boolean',
    help: 'the environment variables and files the config names must exist now (without it, absent ones are listed as needed at run time)',
  },
  open: {
    type: 'boolean',
    help: 'recordings verify: accept a file without its closing record (the edge may still be writing it)',
  },
  'final-hash': {
    type: 'string',
    arg: 'HEX',
    help: "recordings verify: the file's last line must hash to this (final_hash of its recording_closed log line)",
  },
  frames: {
    type: 'boolean',
    help: 'recordings show: one line per frame (default: one line per run of frames)',
  },
  world: {
    type: 'string',
    arg: 'URL',
    help: 'replay: the world to replay against (ws:// or wss://; its credential from AWP_EDGE_UPSTREAM_TOKEN)',
  },
  seed: {
    type: 'string',
    arg: 'N',
    help: 'replay: open the session with this seed instead of the recorded one (AWP-REP-001)',
  },
  help: { type: 'boolean', short: 'h', help: 'this help' },
} as const;

export type OptionName = keyof typeof OPTIONS;

export interface CommandSpec {
  readonly summary: string;
  readonly usage: readonly string[];
  readonly options: readonly OptionName[];
  /** Positional arguments it takes, at most. */
  readonly positionals: number;
  readonly more?: string;
}

const CREDENTIALS_FROM_ENV = `Credentials never come from the command line:
  AWP_EDGE_AGENT_TOKENS     agent credentials, comma-separated
  AWP_EDGE_APPROVER_TOKENS  approver credentials (with --upstream; AWP-APR-005), comma-separated
  AWP_EDGE_UPSTREAM_TOKEN   the edge's credential toward the world (with --upstream)`;

export const COMMANDS: Readonly<Record<string, CommandSpec>> = {
  serve: {
    summary: 'run the edge in front of one world (--upstream) or several (--config)',
    usage: [
      'awp-edge serve --upstream ws://HOST:PORT[/path] [--listen HOST:PORT] [--admin HOST:PORT]',
      'awp-edge serve --config edge.yaml [--listen HOST:PORT] [--admin HOST:PORT]',
    ],
    options: ['upstream', 'config', 'listen', 'admin', 'engine', 'log-level', 'help'],
    positionals: 0,
    more: `${CREDENTIALS_FROM_ENV}

SIGTERM drains (agents closed with 1001 over drain.window_ms), SIGINT stops at once.`,
  },
  'check-config': {
    summary: 'validate a config file without starting anything',
    usage: ['awp-edge check-config [--strict] edge.yaml'],
    options: ['config', 'strict', 'help'],
    positionals: 1,
  },
  demo: {
    summary: 'the built-in demo worlds behind the edge, with demo agents and the live viewer (npm start)',
    usage: ['awp-edge demo [--listen HOST:PORT] [--admin HOST:PORT]'],
    options: ['listen', 'admin', 'engine', 'log-level', 'help'],
    positionals: 0,
    more: 'AWP_EDGE_AGENT_TOKENS chooses the agent token (default: a generated one, printed).',
  },
  recordings: {
    summary: 'check flight-recorder files (hash chain, AWP-AUD-002 shape) or show one as a timeline',
    usage: [
      'awp-edge recordings verify [--open] [--final-hash HEX] FILE...',
      'awp-edge recordings show [--frames] FILE',
    ],
    options: ['open', 'final-hash', 'frames', 'help'],
    positionals: 100_000,
    more: `verify checks every record's shape (ts_mono_ns, direction, kind, body), the class label of the first
and the prev_hash chain, and that files the edge wrote end with their closing record; the files of one
session given together (rotated files) must link up. It prints FILE: ok per file, or FILE:LINE: problem for
the first bad line and exits 1.`,
  },
  replay: {
    summary: 'replay the agent side of a recorded relay session against a world and compare (AWP-REP-003)',
    usage: ['awp-edge replay FILE --world ws://HOST:PORT[/path] [--seed N]'],
    options: ['world', 'seed', 'help'],
    positionals: 1,
    more: `Sends initialize, the recorded session.open, then the recorded action.submit, action.cancel,
world.tick, world.reset, world.restore and session.close in order, as the world received them; compares
every frame's payload SHA-256 per channel and the ordered (action_id, state, reason). Replay against a world
started as the recorded one was (lockstep, same seed). Exit 0: reproduced; 1: a difference (the first of
frames and of transitions is printed), or the world could not be reached.
AWP_EDGE_UPSTREAM_TOKEN  the credential toward the world, if it needs one`,
  },
  'example-config': {
    summary: 'print a commented configuration to start from (it passes check-config)',
    usage: ['awp-edge example-config > edge.yaml'],
    options: ['help'],
    positionals: 0,
  },
  version: {
    summary: 'print the version, the spec revision, Node.js and the engine (also: awp-edge --version)',
    usage: ['awp-edge version'],
    options: ['help'],
    positionals: 0,
  },
  help: {
    summary: 'help on a command',
    usage: ['awp-edge help [COMMAND]'],
    options: ['help'],
    positionals: 1,
  },
};

export const COMMAND_NAMES = Object.keys(COMMANDS);

export function commandHelp(name: string): string {
  const c = COMMANDS[name]!;
  const width = Math.max(...c.options.map((o) => optionLabel(o).length)) + 2;
  return [
    `awp-edge ${name}: ${c.summary}`,
    '',
    'Usage:',
    ...c.usage.map((u) => `  ${u}`),
    '',
    'Options:',
    ...c.options.map((o) => `  ${optionLabel(o).padEnd(width)} ${OPTIONS[o].help}`),
    ...(c.more !== undefined ? ['', c.more] : []),
    '',
  ].join('\n');
}

function optionLabel(o: OptionName): string {
  const spec = OPTIONS[o];
  const short = 'short' in spec ? `-${spec.short}, ` : '';
  return `${short}--${o}${'arg' in spec ? ` ${spec.arg}` : ''}`;
}

/** A command-line mistake: one line, exit code 2. */
export class UsageError extends Error {}

export interface Parsed {
  readonly values: Partial<Record<OptionName, string | boolean>>;
  readonly positionals: readonly string[];
}

/** Parses a command's arguments, or throws a UsageError that says in one line what is wrong. */
export function parseCommand(name: string, args: readonly string[]): Parsed {
  const spec = COMMANDS[name]!;
  for (const a of args) {
    if (a === '--') break;
    if (!a.startsWith('-') || a === '-') continue;
    const flag = a.split('=')[0]!;
    const known = spec.options.some((o) => flag === `--${o}` || flag === shortOf(o));
    if (!known) throw new UsageError(unknownOption(name, flag));
  }
  const options = Object.fromEntries(spec.options.map((o) => [o, OPTIONS[o]]));
  try {
    const { values, positionals } = parseArgs({
      args: [...args],
      options,
      allowPositionals: true,
      strict: true,
    });
    if (positionals.length > spec.positionals) {
      const extra = positionals[spec.positionals]!;
      throw new UsageError(
        `awp-edge ${name}: unexpected argument ${JSON.stringify(extra)} (see awp-edge ${name} --help)`,
      );
    }
    return { values: values, positionals };
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(
      `awp-edge ${name}: ${parseProblem(err as Error & { code?: string })} (see awp-edge ${name} --help)`,
    );
  }
}

function shortOf(o: OptionName): string | undefined {
  const spec = OPTIONS[o];
  return 'short' in spec ? `-${spec.short}` : undefined;
}

function parseProblem(err: Error & { code?: string }): string {
  const flag = /'(--?[\w-]+)/.exec(err.message)?.[1] ?? 'an option';
  if (err.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE')
    return /argument missing/.test(err.message)
      ? `option ${flag} needs a value`
      : `option ${flag} takes no value`;
  return err.message.split('\n')[0]!;
}

function unknownOption(command: string, flag: string): string {
  const spec = COMMANDS[command]!;
  const bare = flag.replace(/^--?/, '');
  const elsewhere = COMMAND_NAMES.filter((c) => (COMMANDS[c]!.options as readonly string[]).includes(bare));
  if (elsewhere.length > 0)
    return `awp-edge ${command}: option ${flag} is for ${elsewhere.map((c) => `awp-edge ${c}`).join(' and ')}, not ${command}`;
  const near = nearest(bare, spec.options);
  return near !== undefined
    ? `awp-edge ${command}: unknown option ${flag} (did you mean --${near}?)`
    : `awp-edge ${command}: unknown option ${flag} (see awp-edge ${command} --help)`;
}

/** The unknown command answered in one line, with the nearest command. */
export function unknownCommand(command: string): string {
  if (command.startsWith('-')) {
    const owners = COMMAND_NAMES.filter((c) =>
      (COMMANDS[c]!.options as readonly string[]).includes(command.replace(/^--?/, '').split('=')[0]!),
    );
    return owners.length > 0
      ? `awp-edge: ${command.split('=')[0]!} needs a command first (awp-edge ${owners[0]!} ${command.split('=')[0]!} ...)`
      : `awp-edge: unknown option ${command.split('=')[0]!} (see awp-edge --help)`;
  }
  const near = nearest(command, COMMAND_NAMES);
  return `awp-edge: unknown command ${JSON.stringify(command)} (${near !== undefined ? `did you mean ${near}? ` : ''}see awp-edge --help)`;
}

/** The closest candidate within a few edits (or one the word starts), if any. */
export function nearest(word: string, candidates: readonly string[]): string | undefined {
  let best: { c: string; d: number } | undefined;
  for (const c of candidates) {
    const d = c.startsWith(word) && word.length >= 3 ? 0 : distance(word, c);
    if (best === undefined || d < best.d) best = { c, d };
  }
  return best !== undefined && best.d <= Math.max(1, Math.floor(best.c.length / 3)) ? best.c : undefined;
}

/** Edit distance with transpositions (optimal string alignment). */
function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [
    i,
    ...Array<number>(b.length).fill(0),
  ]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}
