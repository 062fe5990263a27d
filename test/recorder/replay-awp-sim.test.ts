/**
 * Replay against the reference world (issue 14 item 4, AWP-REP-003): a lockstep session on awp-sim (with
 * the sim feature: seeded sensor noise) is recorded through the edge, then `awp-edge replay` plays its
 * agent side against a fresh awp-sim: with the recorded seed it reports no difference; with another seed
 * it names the first frame that differs. Needs test:interop's .venv (npm run test:interop installs it).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorld, type World } from '../interop/world.js';
import type { Peers } from '../interop/venv.js';
import { AwpClient, type Json } from '../support/awp-client.js';
import { AGENT_TOKEN, startEdge, type TestEdge } from '../support/edge.js';

const root = join(import.meta.dirname, '..', '..');
const awpSim = join(root, '.venv', 'bin', 'awp-sim');
const present = existsSync(awpSim);
const peers: Peers = {
  python: join(root, '.venv', 'bin', 'python'),
  awpSim,
  awpConformance: join(root, '.venv', 'bin', 'awp-conformance'),
  versions: {},
  installed: false,
};
const dir = mkdtempSync(join(tmpdir(), 'awp-replay-'));
const cleanups: (() => Promise<void> | void)[] = [];
let recording = '';

afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  rmSync(dir, { recursive: true, force: true });
});

function world(name: string): Promise<World> {
  return startWorld(peers, { mode: 'lockstep', features: ['sim'], dir: join(dir, name), record: false }).then(
    (w) => {
      cleanups.push(() => w.stop());
      return w;
    },
  );
}

function awpEdge(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/awp-edge.ts', ...args], {
    cwd: root,
    env: { ...process.env, ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

if (!present)
  console.warn(`replay against awp-sim: skipped, ${awpSim} is absent (npm run test:interop installs it)`);

describe.skipIf(!present)('awp-edge replay against awp-sim (AWP-REP-003)', () => {
  beforeAll(async () => {
    // The recorded session: lockstep, seed 7, a move driven by ticks to completion, then closed.
    const recorded = await world('recorded');
    const recordings = join(dir, 'recordings');
    const edge: TestEdge = await startEdge([
      { path: '/', upstream: recorded.url, upstream_token: recorded.token, record: { dir: recordings } },
    ]);
    cleanups.push(() => edge.close());
    const agent = await AwpClient.connect(edge.url('/'), { credential: AGENT_TOKEN });
    cleanups.push(() => agent.drop());
    await agent.ok('initialize', {
      protocol_versions: ['0.1'],
      agent: { name: 'replay-test', version: '0.1.0', vendor: 'awp-edge' },
      consumes_modalities: ['proprio/json', 'text/event+json'],
    });
    const ready = await agent.ok('session.open', {
      embodiment: 'arm_01',
      mode: 'lockstep',
      subscribe: [{ channel: 'proprio' }, { channel: 'arm_state' }],
      admin: ['tick'],
      seed: 7,
    });
    let tick = ready.tick as number;
    await agent.ok('action.submit', {
      action_id: 'a-1',
      type: 'move_to_pose',
      params: { pose: { frame: 'base', p_m: [0.2, 0.1, 0.3], q: [0, 0, 0, 1] } },
    });
    const done = () =>
      agent.received.some((m: Json) => {
        const p = m.params as Json | undefined;
        return (
          m.method === 'action.status' &&
          p?.action_id === 'a-1' &&
          ['completed', 'failed'].includes(p.state as string)
        );
      });
    for (let i = 0; i < 200 && !done(); i++)
      tick = (await agent.ok('world.tick', { expected_tick: tick, count: 5 })).tick as number;
    expect(done()).toBe(true);
    await agent.ok('world.tick', { expected_tick: tick, count: 3 }); // frames after the action, too
    await agent.ok('session.close', {});
    agent.drop();
    await edge.close(); // the recording ends and is written out
    const files = readdirSync(recordings);
    expect(files).toHaveLength(1);
    recording = join(recordings, files[0]!);
    const text = readFileSync(recording, 'utf8');
    expect(text).toContain('"kind":"frame"');
    expect(text).toContain('"seed":7');
  }, 120_000);

  it('reports no difference against a fresh world with the recorded seed', async () => {
    const fresh = await world('same-seed');
    const r = await awpEdge(['replay', recording, '--world', fresh.url], {
      AWP_EDGE_UPSTREAM_TOKEN: fresh.token,
    });
    console.log(`same seed: ${r.stdout.trim()}`);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /^reproduced: \d+ calls replayed; [1-9]\d* frames on 2 channel\(s\) and [1-9]\d* transitions as recorded\n$/,
    );
  }, 90_000);

  it('reports the first difference against a world opened with another seed', async () => {
    const fresh = await world('other-seed');
    const r = await awpEdge(['replay', recording, '--world', fresh.url, '--seed', '8'], {
      AWP_EDGE_UPSTREAM_TOKEN: fresh.token,
    });
    console.log(`other seed: ${r.stderr.trim()}`);
    expect(r.code).toBe(1);
    // The noisy proprio payloads differ from the first frame on; the transitions do not depend on noise.
    expect(r.stderr).toMatch(
      /^not reproduced: channel proprio: frame 1 differs: recorded sha256:[0-9a-f]{16}, replayed sha256:[0-9a-f]{16} \(\d+ recorded, \d+ replayed\)\n$/,
    );
  }, 90_000);

  it('refuses a file that does not verify, naming the line', async () => {
    const edited = join(dir, 'edited.jsonl');
    const lines = readFileSync(recording, 'utf8').split('\n');
    lines[3] = lines[3]!.replace('"jsonrpc"', '"jsonRPC"');
    writeFileSync(edited, lines.join('\n'));
    const r = await awpEdge(['replay', edited, '--world', 'ws://127.0.0.1:9/'], {});
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^awp-edge replay: .*edited\.jsonl:5: prev_hash does not match the previous line .* \(not replayed\)\n$/,
    );
  }, 30_000);
});
