/**
 * The README's promise: `npm start` serves the demo, and the agent in the README connects and acts.
 * Runs the built CLI (what `npm start` runs) when `dist/` exists, the sources otherwise.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';

const root = new URL('..', import.meta.url).pathname;
let demo: ChildProcess | undefined;
const agentFile = `${root}readme-agent.tmp.mjs`;

afterAll(() => {
  demo?.kill('SIGINT');
  rmSync(agentFile, { force: true });
});

function readmeAgent(): string {
  const readme = readFileSync(`${root}README.md`, 'utf8');
  const block = /```js\n(\/\/ agent\.mjs[\s\S]*?)```/.exec(readme);
  if (block === null) throw new Error('README has no agent.mjs example');
  return block[1]!;
}

function startDemo(): Promise<{ url: string; token: string }> {
  const built = existsSync(`${root}dist/cli/awp-edge.js`);
  const args = built ? ['dist/cli/awp-edge.js'] : ['--import', 'tsx', 'src/cli/awp-edge.ts'];
  demo = spawn(
    process.execPath,
    [...args, 'demo', '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0', '--log-level', 'warn'],
    {
      cwd: root,
      env: { ...process.env, AWP_EDGE_AGENT_TOKENS: '' },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`demo did not start: ${out}`)), 20_000);
    demo!.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const url = /streaming arm\s+(ws:\/\/\S+)/.exec(out)?.[1];
      const token = /agent token\s+(\S+)/.exec(out)?.[1];
      if (url !== undefined && token !== undefined) {
        clearTimeout(timer);
        resolve({ url, token });
      }
    });
    demo!.once('exit', (code) => reject(new Error(`demo exited with ${code}: ${out}`)));
  });
}

describe('README', () => {
  it('npm start serves the demo and the README agent connects and acts', async () => {
    const { url, token } = await startDemo();
    writeFileSync(agentFile, readmeAgent());
    const agent = spawn(process.execPath, [agentFile], {
      cwd: root,
      env: { ...process.env, AWP_URL: url, AWP_TOKEN: token },
    });
    let out = '';
    agent.stdout.on('data', (d: Buffer) => (out += d.toString()));
    agent.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => {
        agent.kill();
        resolve(null);
      }, 20_000);
      agent.once('exit', (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    expect(out).toMatch(/world arm-demo/);
    expect(out).toMatch(/session \S+/);
    expect(out).toMatch(/admitted accepted/);
    expect(out).toMatch(/action a-1 completed/);
    expect(code).toBe(0);
  }, 45_000);
});
