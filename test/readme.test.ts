/**
 * The README's promise: `npm start` serves the demo, and the agent in the README, saved outside the clone
 * and run as the README says, connects and acts against both demo worlds and against the reference world
 * (`awp-sim` behind `awp-edge serve --upstream`, when test:interop's .venv holds it), and reports a refused
 * upgrade or request as one line with exit code 1. Runs the built CLI (what `npm start` runs) when `dist/`
 * exists, the sources otherwise.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = new URL('..', import.meta.url).pathname;
const children: ChildProcess[] = [];
// Outside the clone: the agent must not depend on the project's node_modules.
const agentDir = mkdtempSync(join(tmpdir(), 'readme-agent-'));
const agentFile = join(agentDir, 'agent.mjs');
const awpSim = join(root, '.venv', 'bin', 'awp-sim');

afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGINT');
  rmSync(agentDir, { recursive: true, force: true });
});

function readmeAgent(): string {
  const readme = readFileSync(`${root}README.md`, 'utf8');
  const block = /```js\n(\/\/ agent\.mjs[\s\S]*?)```/.exec(readme);
  if (block === null) throw new Error('README has no agent.mjs example');
  return block[1]!;
}

/** The edge's CLI as `npm start` runs it (dist/), or from the sources. */
function cli(args: readonly string[], env: NodeJS.ProcessEnv): ChildProcess {
  const built = existsSync(`${root}dist/cli/awp-edge.js`);
  const entry = built ? ['dist/cli/awp-edge.js'] : ['--import', 'tsx', 'src/cli/awp-edge.ts'];
  const child = spawn(process.execPath, [...entry, ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return child;
}

/** Resolves with the matches of `patterns` in the child's stdout once all have appeared. */
function waitForOutput(child: ChildProcess, patterns: readonly RegExp[], what: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${what} did not start: ${out}`)), 30_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const found = patterns.map((p) => p.exec(out)?.[1]);
      if (found.every((f) => f !== undefined)) {
        clearTimeout(timer);
        resolve(found);
      }
    });
    child.once('exit', (code) => reject(new Error(`${what} exited with ${code}: ${out}`)));
  });
}

interface AgentRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** `node agent.mjs` as the README says: Node 22+ as is, Node 20 with --experimental-websocket. */
function runAgent(env: Record<string, string>): Promise<AgentRun> {
  const major = Number(process.versions.node.split('.')[0]);
  const flags = major < 22 ? ['--experimental-websocket'] : [];
  const agent = spawn(process.execPath, [...flags, agentFile], {
    cwd: agentDir,
    env: { PATH: process.env.PATH, ...env },
  });
  let stdout = '';
  let stderr = '';
  agent.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  agent.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => {
    const timer = setTimeout(() => agent.kill(), 60_000);
    agent.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The agent's run ended as the README says a successful one does. */
function expectActed(run: AgentRun, world: RegExp, mode: 'streaming' | 'lockstep'): void {
  const all = run.stdout + run.stderr;
  expect(all).toMatch(new RegExp(`^world ${world.source} \\(${mode}\\), embodiment \\S+, channels \\S`, 'm'));
  expect(all).toMatch(/^session \S+/m);
  expect(all).toMatch(/^admitted accepted$/m);
  expect(all).toMatch(/^action a-1 completed/m);
  // Every channel the agent subscribed to delivered frames.
  const observed = /^observed (.*)$/m.exec(all)?.[1];
  expect(observed, all).toBeDefined();
  for (const part of observed!.split(', ')) expect(part, all).toMatch(/^\S+ x[1-9]\d*$/);
  expect(run.stderr, all).toBe('');
  expect(run.code, all).toBe(0);
}

/** A failure the README promises: exactly one line on stderr, exit code 1. */
function expectOneLineFailure(run: AgentRun, line: RegExp): void {
  expect(run.stderr.trimEnd().split('\n'), run.stderr).toHaveLength(1);
  expect(run.stderr).toMatch(line);
  expect(run.code).toBe(1);
}

beforeAll(() => writeFileSync(agentFile, readmeAgent()));

describe('README: the agent against `npm start`', () => {
  let arm = '';
  let grid = '';
  let demoArm = '';
  let metrics = '';
  let token = '';

  beforeAll(async () => {
    const demo = cli(['demo', '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0', '--log-level', 'warn'], {
      AWP_EDGE_AGENT_TOKENS: '',
    });
    [arm = '', grid = '', demoArm = '', metrics = '', token = ''] = await waitForOutput(
      demo,
      [
        /streaming arm\s+(ws:\/\/\S+)/,
        /lockstep grid\s+(ws:\/\/\S+)/,
        /demo agents\s+(ws:\/\/[^\s,]+)/,
        /metrics\s+(http:\/\/\S+)/,
        /agent token\s+(\S+)/,
      ],
      'demo',
    );
  }, 40_000);

  it('acts on the streaming arm', async () => {
    expectActed(await runAgent({ AWP_URL: arm, AWP_TOKEN: token }), /arm-demo/, 'streaming');
  }, 70_000);

  it('acts on the lockstep grid, advancing it itself', async () => {
    expectActed(await runAgent({ AWP_URL: grid, AWP_TOKEN: token }), /gridworld/, 'lockstep');
  }, 70_000);

  it('a refused upgrade is one line with the HTTP status', async () => {
    expectOneLineFailure(
      await runAgent({ AWP_URL: arm, AWP_TOKEN: 'not-the-token' }),
      /^agent: ws:\/\/\S+\/worlds\/arm: upgrade refused: HTTP 401 /,
    );
    expectOneLineFailure(
      await runAgent({ AWP_URL: arm.replace('/worlds/arm', '/worlds/none'), AWP_TOKEN: token }),
      /^agent: ws:\/\/\S+: upgrade refused: HTTP 404 /,
    );
  }, 70_000);

  it('a refused request is one line with the error code', async () => {
    // The demo's own arm agent holds arm_01 of its world: once its session is up, ours is refused.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const text = await fetch(metrics).then((r) => r.text());
      if (/^awp_edge_sessions\{route="demo-arm",kind="relay",state="attached"\} [1-9]/m.test(text)) break;
      if (Date.now() > deadline) throw new Error('the demo arm agent never held its session');
      await new Promise((r) => setTimeout(r, 200));
    }
    expectOneLineFailure(
      await runAgent({ AWP_URL: demoArm, AWP_TOKEN: token }),
      /^agent: session\.open refused: AWP_EMBODIMENT_UNAVAILABLE \(\d+\)/,
    );
  }, 70_000);
});

/** awp-sim on a free loopback port, as the README starts it (but on port 0). */
function startAwpSim(mode: 'streaming' | 'lockstep', worldToken: string): Promise<string> {
  const sim = spawn(
    awpSim,
    ['serve', '--host', '127.0.0.1', '--port', '0', '--mode', mode, `--token=${worldToken}`, '--no-audit'],
    { cwd: agentDir, env: { ...process.env, PYTHONUNBUFFERED: '1' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(sim);
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`awp-sim did not listen: ${out}`)), 30_000);
    const seen = (d: Buffer) => {
      out += d.toString();
      const url = /world listening on (ws:\/\/\S+)/.exec(out)?.[1];
      if (url !== undefined) {
        clearTimeout(timer);
        resolve(url);
      }
    };
    sim.stdout.on('data', seen);
    sim.stderr.on('data', seen);
    sim.once('exit', (code) => reject(new Error(`awp-sim exited with ${code}: ${out}`)));
  });
}

const simPresent = existsSync(awpSim);
if (!simPresent)
  console.warn(
    `README agent against awp-sim: skipped, ${awpSim} is absent (npm run test:interop installs it; run this file after it)`,
  );

describe.skipIf(!simPresent)(
  'README: the agent against the reference world (awp-sim) through the edge',
  () => {
    for (const mode of ['streaming', 'lockstep'] as const) {
      it(`acts on awp-sim (${mode}) behind awp-edge serve --upstream`, async () => {
        const world = await startAwpSim(mode, `world-${mode}`);
        const edge = cli(
          ['serve', '--upstream', `${world}/`, '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0'],
          {
            AWP_EDGE_UPSTREAM_TOKEN: `world-${mode}`,
            AWP_EDGE_AGENT_TOKENS: 'agent-secret',
          },
        );
        const [listen = ''] = await waitForOutput(edge, [/"listen":"([^"]+)"/], 'awp-edge serve');
        const url = `ws://${listen}/`;
        expectActed(await runAgent({ AWP_URL: url, AWP_TOKEN: 'agent-secret' }), /awp-sim/, mode);
        edge.kill('SIGINT');
      }, 90_000);
    }
  },
);
