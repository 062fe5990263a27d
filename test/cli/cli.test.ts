/**
 * The command line as an operator meets it: versions, help on every command, one-line answers with a
 * suggestion for mistakes (rc 2), one-line operator errors that name the listener (rc 1), and an example
 * configuration that passes check-config. Runs the sources in a child process, as `npx awp-edge` would.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { afterAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { COMMAND_NAMES } from '../../src/cli/args.js';
import { EXAMPLE_CONFIG } from '../../src/cli/example-config.js';
import { validateConfig } from '../../src/config/load.js';

const root = join(import.meta.dirname, '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'awp-edge-cli-'));
const version = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;

afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function awpEdge(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/awp-edge.ts', ...args], {
    cwd: root,
    env: { ...process.env, AWP_EDGE_AGENT_TOKENS: 'cli-test-token', ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

function oneLine(r: Run): string {
  const lines = r.stderr.trimEnd().split('\n');
  expect(lines, r.stderr).toHaveLength(1);
  expect(r.stderr).not.toMatch(/\n\s+at /);
  return lines[0]!;
}

describe('awp-edge version', () => {
  it('--version, -V and version print one line naming the version, spec revision and Node.js', async () => {
    for (const args of [['--version'], ['-V'], ['version']]) {
      const r = await awpEdge(args);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(
        new RegExp(
          `^awp-edge ${version.replace(/\./g, '\\.')} \\(AWP 0\\.1, spec revision 0\\.1-draft\\.10; Node\\.js ${process.version.replace(/\./g, '\\.')}; engine auto: (uws|ws)`,
        ),
      );
      expect(r.stdout.trimEnd().split('\n')).toHaveLength(1);
    }
  }, 60_000);
});

describe('awp-edge --help', () => {
  it('every command answers --help and help COMMAND with its usage and options (rc 0)', async () => {
    for (const c of COMMAND_NAMES) {
      for (const args of [
        [c, '--help'],
        [c, '-h'],
        ['help', c],
      ]) {
        const r = await awpEdge(args);
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
        expect(r.stdout).toMatch(new RegExp(`^awp-edge ${c}: `));
        expect(r.stdout).toMatch(/\nUsage:\n {2}awp-edge /);
        expect(r.stdout).toMatch(/\nOptions:\n( {2}.*\n)* {2}-h, --help /);
      }
    }
  }, 120_000);

  it('the top-level help lists every command', async () => {
    const r = await awpEdge(['--help']);
    expect(r.code).toBe(0);
    for (const c of COMMAND_NAMES) expect(r.stdout).toContain(`awp-edge ${c} `);
  }, 30_000);
});

describe('mistakes on the command line: one line, a suggestion, rc 2', () => {
  const cases: [string[], RegExp][] = [
    [
      ['serve', '--listn', '127.0.0.1:1'],
      /^awp-edge serve: unknown option --listn \(did you mean --listen\?\)$/,
    ],
    [
      ['check-config', '--strikt', 'x.yaml'],
      /^awp-edge check-config: unknown option --strikt \(did you mean --strict\?\)$/,
    ],
    [['sevre'], /^awp-edge: unknown command "sevre" \(did you mean serve\? see awp-edge --help\)$/],
    [['demo', '--upstream', 'ws://x/'], /^awp-edge demo: option --upstream is for awp-edge serve, not demo$/],
    [['serve', '--listen'], /^awp-edge serve: option --listen needs a value/],
    [['check-config', 'a.yaml', 'b.yaml'], /^awp-edge check-config: unexpected argument "b.yaml"/],
    [['serve'], /^awp-edge serve: needs --upstream URL or --config FILE/],
    [
      ['--upstream', 'ws://x/'],
      /^awp-edge: --upstream needs a command first \(awp-edge serve --upstream \.\.\.\)$/,
    ],
    [
      ['serve', '--upstream', 'ws://x/', '--token=abc'],
      /^awp-edge: refusing --token: credentials never come from the command line/,
    ],
  ];
  for (const [args, line] of cases) {
    it(`awp-edge ${args.join(' ')}`, async () => {
      const r = await awpEdge(args);
      expect(r.code).toBe(2);
      if (args.includes('--token=abc')) expect(r.stderr).toMatch(line);
      else expect(oneLine(r)).toMatch(line);
      expect(r.stderr).not.toContain('abc');
    }, 30_000);
  }
});

describe('operator errors: one line naming the listener, rc 1', () => {
  let taken: Server | undefined;
  afterAll(() => taken?.close());

  it('a port in use names the listener it was meant for, on serve and demo', async () => {
    taken = createServer();
    await new Promise<void>((resolve) => taken!.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    const serve = await awpEdge([
      'serve',
      '--upstream',
      'ws://127.0.0.1:9/',
      '--listen',
      `127.0.0.1:${port}`,
      '--admin',
      '127.0.0.1:0',
    ]);
    expect(serve.code).toBe(1);
    expect(oneLine(serve)).toBe(
      `awp-edge serve: cannot listen on 127.0.0.1:${port} (listen: the agent-facing listener): the port is in use (another process listens there)`,
    );
    const admin = await awpEdge([
      'serve',
      '--upstream',
      'ws://127.0.0.1:9/',
      '--listen',
      '127.0.0.1:0',
      '--admin',
      `127.0.0.1:${port}`,
      '--engine',
      'ws',
    ]);
    expect(admin.code).toBe(1);
    expect(oneLine(admin)).toMatch(
      new RegExp(`^awp-edge serve: cannot listen on 127\\.0\\.0\\.1:${port} \\(admin: the admin listener\\)`),
    );
    const demo = await awpEdge([
      'demo',
      '--listen',
      '127.0.0.1:0',
      '--admin',
      `127.0.0.1:${port}`,
      '--engine',
      'ws',
    ]);
    expect(demo.code).toBe(1);
    expect(oneLine(demo)).toMatch(
      new RegExp(
        `^awp-edge demo: cannot listen on 127\\.0\\.0\\.1:${port} \\(--admin: the admin listener\\)`,
      ),
    );
  }, 90_000);

  it('an unreadable config file is named, without a stack trace', async () => {
    const r = await awpEdge(['serve', '--config', join(dir, 'absent.yaml')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${join(dir, 'absent.yaml')}: cannot read`);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  }, 30_000);
});

describe('awp-edge example-config', () => {
  it('prints a commented configuration that check-config passes as printed', async () => {
    const r = await awpEdge(['example-config']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(EXAMPLE_CONFIG);
    expect(r.stdout.split('\n').filter((l) => l.includes('#')).length).toBeGreaterThan(20);
    const file = join(dir, 'edge.yaml');
    writeFileSync(file, r.stdout);
    const check = await awpEdge(['check-config', file], { AWP_EDGE_AGENT_TOKENS: '' });
    expect(check.stderr).toBe('');
    expect(check.code).toBe(0);
    expect(check.stdout).toMatch(/: ok \(1 route: \/\)/);
    // Its secrets are named, not present: check-config lists them as needed at run time.
    expect(check.stdout).toContain('AWP_EDGE_UPSTREAM_TOKEN');
  }, 60_000);

  it('passes the published schema, as an editor checks it, and the loader with its variables set', () => {
    const schema = JSON.parse(readFileSync(join(root, 'src/config/edge.schema.json'), 'utf8')) as object;
    const editor = new Ajv({ allErrors: true, strict: false }).compile(schema);
    const raw = parseYaml(EXAMPLE_CONFIG) as unknown;
    expect(editor(raw), JSON.stringify(editor.errors)).toBe(true);
    const c = validateConfig(raw, 'example', { AWP_EDGE_AGENT_TOKENS: 'a', AWP_EDGE_UPSTREAM_TOKEN: 'u' });
    expect(c.routes[0]).toMatchObject({ path: '/', upstream: 'ws://127.0.0.1:8710/', upstream_token: 'u' });
    expect(c.budgets.max_sessions).toBe(1024);
  });
});
