/**
 * Credentials rotate without dropping sessions, against a real `awp-edge serve` process: its credential
 * files are rewritten and the process gets SIGHUP (watching off here: the signal alone) or, with watching
 * on, a Kubernetes-style Secret volume swaps its `..data` symlink. New connections and resumes use the new
 * set (a retired credential is refused with 401), open relay and observer sessions keep working on the
 * credential they authenticated with, the upstream credential of new dials rotates too, and a broken file
 * keeps the old set, with one log line naming the file and awp_edge_config_reloads_total{result="failure"}.
 */
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoWorld, type RunningDemoWorld } from '../../src/demo/index.js';
import { AwpClient, HttpRefusal, initializeParams, type Json } from '../support/awp-client.js';
import { startEdgeProcess, type EdgeLogLine, type EdgeProcess } from '../support/edge-process.js';

const OLD = 'rotation-old-agent-token';
const NEW = 'rotation-new-agent-token';
const MOVE = { pose: { frame: 'base', p_m: [0.3, 0.2, 0.3], q: [0, 0, 0, 1] }, max_velocity_mps: 0.05 };

const dir = mkdtempSync(join(tmpdir(), 'awp-edge-rotate-'));
const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  rmSync(dir, { recursive: true, force: true });
});

/** Writes a file the way a careful operator does: a temporary file renamed over the old one. */
function replace(file: string, text: string): void {
  writeFileSync(`${file}.tmp`, text);
  renameSync(`${file}.tmp`, file);
}

async function world(kind: 'arm', token?: string): Promise<RunningDemoWorld> {
  const w = await startDemoWorld({ kind, host: '127.0.0.1', port: 0, ...(token !== undefined && { token }) });
  cleanups.push(() => w.close());
  return w;
}

async function client(edge: EdgeProcess, path: string, credential: string): Promise<AwpClient> {
  const c = await AwpClient.connect(edge.url(path), { credential });
  cleanups.push(() => c.close());
  return c;
}

/** The HTTP status a connection attempt with `credential` gets: 101 when it opens. */
async function upgradeStatus(edge: EdgeProcess, path: string, credential: string): Promise<number> {
  try {
    (await AwpClient.connect(edge.url(path), { credential })).close();
    return 101;
  } catch (err) {
    if (err instanceof HttpRefusal) return err.status;
    throw err;
  }
}

/** A series' value on /metrics; `absent` when it is not there (else a missing series fails the test). */
async function metric(edge: EdgeProcess, series: string, absent?: number): Promise<number> {
  const text = await (await fetch(`${edge.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  if (line === undefined && absent !== undefined) return absent;
  if (line === undefined) throw new Error(`no ${series} on /metrics`);
  return Number(line.slice(series.length + 1));
}

/** Sends SIGHUP and waits for the next reload log line (success or failure). */
async function hangUp(edge: EdgeProcess): Promise<EdgeLogLine> {
  const from = edge.logs.length;
  process.kill(edge.pid, 'SIGHUP');
  return edge.waitLog(
    (l) =>
      edge.logs.indexOf(l) >= from &&
      (l.event === 'credentials_reloaded' || l.event === 'credentials_reload_failed'),
    10_000,
    'a reload log line',
  );
}

async function until(pred: () => Promise<boolean>, what: string, ms = 10_000): Promise<void> {
  for (const end = Date.now() + ms; !(await pred());) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function openArm(c: AwpClient): Promise<Json> {
  await c.ok('initialize', initializeParams());
  return c.ok('session.open', { embodiment: 'arm_01', mode: 'streaming', subscribe: [{ channel: 'state' }] });
}

describe('awp-edge serve: credential files re-read on SIGHUP', () => {
  const agentTokens = join(dir, 'agent-tokens');
  const worldToken = join(dir, 'world-token');
  let edge: EdgeProcess;

  beforeAll(async () => {
    writeFileSync(agentTokens, `${OLD}\n`);
    writeFileSync(worldToken, 'world-old');
    const [arm, arm2, guarded] = [await world('arm'), await world('arm'), await world('arm', 'world-new')];
    edge = await startEdgeProcess({
      routes: [],
      extra: {
        agents: { tokens_file: agentTokens },
        credential_files: { watch: false },
        routes: [
          { name: 'arm', path: '/arm', upstream: arm.url },
          { name: 'arm2', path: '/arm2', upstream: arm2.url },
          // The world wants world-new; the edge starts with world-old in its file.
          { name: 'guarded', path: '/guarded', upstream: guarded.url, upstream_token_file: worldToken },
        ],
      },
    });
    cleanups.push(() => edge.stop());
  }, 60_000);

  it('rotates agent and upstream credentials for new connections; open sessions keep working', async () => {
    expect(await metric(edge, 'awp_edge_config_reloads_total{result="success"}')).toBe(0);
    expect(await metric(edge, 'awp_edge_config_reloads_total{result="failure"}')).toBe(0);
    expect(await metric(edge, 'awp_edge_config_last_reload_successful')).toBe(1);
    const loadedAt = await metric(edge, 'awp_edge_config_last_reload_success_timestamp_seconds');
    expect(loadedAt).toBeGreaterThan(Date.now() / 1000 - 120);

    // Opened on the old credential: a relay session, another one to resume later, an observer session.
    const relay = await client(edge, '/arm', OLD);
    await openArm(relay);
    const away = await client(edge, '/arm2', OLD);
    const awayReady = await openArm(away);
    const observer = await client(edge, '/arm', OLD);
    await observer.ok('initialize', initializeParams());
    await observer.ok('session.open', { mode: 'streaming', subscribe: [{ channel: 'state', rate_hz: 20 }] });
    await observer.waitNotification('obs.frame');
    // The guarded world refuses the edge's old upstream credential.
    const early = await client(edge, '/guarded', OLD);
    const refused = await early.call('initialize', initializeParams());
    expect((refused.error as Json | undefined)?.code).toBe(-32001);
    expect((await early.waitClosed()).code).toBe(1014);
    // The client sees the close before the edge has finished it (a loaded machine shows the gap).
    await until(
      async () => (await metric(edge, 'awp_edge_agent_connections{route="guarded",kind="control"}', 0)) === 0,
      'the edge to see the refused connection closed',
    );

    replace(agentTokens, `${NEW}\n`);
    replace(worldToken, 'world-new\n');
    const reloaded = await hangUp(edge);
    expect(reloaded).toMatchObject({
      event: 'credentials_reloaded',
      trigger: 'signal',
      routes_changed: ['arm', 'arm2', 'guarded'],
      retired_connections: 3,
    });
    expect(reloaded.msg).toMatch(
      /^credentials reloaded: new connections use the new credentials of routes arm, arm2, guarded; 3 open connections keep running on retired credentials$/,
    );
    expect(JSON.stringify(reloaded)).not.toContain(NEW);
    expect(await metric(edge, 'awp_edge_config_reloads_total{result="success"}')).toBe(1);

    // New connections: the retired credential is refused, the new one accepted.
    expect(await upgradeStatus(edge, '/arm', OLD)).toBe(401);
    expect(await upgradeStatus(edge, '/arm', NEW)).toBe(101);

    // The open relay session acts on; the open observer session still gets frames.
    expect(
      (await relay.ok('action.submit', { action_id: 'a-1', type: 'move_to_pose', params: MOVE })).state,
    ).toBeDefined();
    await relay.waitNotification(
      'action.status',
      (p) => p.action_id === 'a-1' && p.state === 'executing',
      10_000,
    );
    const seen = observer.received.length;
    await observer.waitNotification('obs.frame', () => true, 5000, seen);
    expect((await observer.ok('ping', { origin_ns: 1 })).origin_ns).toBe(1);
    expect(relay.closed).toBeNull();
    expect(observer.closed).toBeNull();

    // A resume is a new connection: refused on the retired credential, accepted on the new one.
    away.drop();
    await until(
      async () =>
        (await metric(edge, 'awp_edge_sessions{route="arm2",kind="relay",state="suspended"}')) === 1,
      'the edge to see the drop',
    );
    expect(await upgradeStatus(edge, '/arm2', OLD)).toBe(401);
    const back = await client(edge, '/arm2', NEW);
    await back.ok('initialize', initializeParams());
    const resumed = await back.ok('session.resume', {
      session_token: awayReady.session_token,
      last_status_seq: 0,
    });
    expect(resumed.session_token).toBe(awayReady.session_token);

    // New dials carry the new upstream credential: the guarded world lets the edge in now.
    const late = await client(edge, '/guarded', NEW);
    await openArm(late);
  }, 90_000);

  it('a broken or missing file keeps the credentials in force; the next good one is taken', async () => {
    for (const [broken, says] of [
      [
        () => replace(agentTokens, '\n'),
        `agents.tokens_file: ${agentTokens} holds no credential (it is empty)`,
      ],
      [() => rmSync(agentTokens), `agents.tokens_file: cannot read ${agentTokens}: ENOENT`],
    ] as const) {
      broken();
      const failed = await hangUp(edge);
      expect(failed.event).toBe('credentials_reload_failed');
      expect(failed.msg).toContain(says);
      expect(failed.msg).toMatch(/; the edge keeps the credentials it had$/);
      expect(await metric(edge, 'awp_edge_config_last_reload_successful')).toBe(0);
      expect(await upgradeStatus(edge, '/arm', NEW)).toBe(101);
      expect(await upgradeStatus(edge, '/arm', OLD)).toBe(401);
    }
    expect(await metric(edge, 'awp_edge_config_reloads_total{result="failure"}')).toBe(2);
    const before = await metric(edge, 'awp_edge_config_last_reload_success_timestamp_seconds');

    replace(agentTokens, `${NEW},rotation-third-token\n`);
    // The relay and observer sessions opened on the credential retired by the first reload still run.
    expect(await hangUp(edge)).toMatchObject({ event: 'credentials_reloaded', retired_connections: 2 });
    expect(await metric(edge, 'awp_edge_config_last_reload_successful')).toBe(1);
    expect(await metric(edge, 'awp_edge_config_reloads_total{result="success"}')).toBe(2);
    expect(
      await metric(edge, 'awp_edge_config_last_reload_success_timestamp_seconds'),
    ).toBeGreaterThanOrEqual(before);
    expect(await upgradeStatus(edge, '/arm', 'rotation-third-token')).toBe(101);
    expect(edge.running).toBe(true);
  }, 60_000);
});

describe('awp-edge serve: credential files watched (Kubernetes Secret volume)', () => {
  /** A projected volume as the kubelet writes it: files are symlinks through `..data` to a timestamped dir. */
  const volume = join(dir, 'volume');
  let generation = 0;
  function publish(tokens: string): void {
    const next = `..2026_01_01_00_00_0${++generation}`;
    mkdirSync(join(volume, next), { recursive: true });
    writeFileSync(join(volume, next, 'agent-tokens'), tokens);
    symlinkSync(next, join(volume, '..data_tmp'));
    renameSync(join(volume, '..data_tmp'), join(volume, '..data')); // the atomic swap
    if (generation === 1) symlinkSync('..data/agent-tokens', join(volume, 'agent-tokens'));
    else rmSync(join(volume, `..2026_01_01_00_00_0${generation - 1}`), { recursive: true });
  }

  it('takes each swapped-in generation without a signal', async () => {
    publish('watched-token-1');
    const w = await world('arm');
    const edge = await startEdgeProcess({
      routes: [{ name: 'arm', path: '/arm', upstream: w.url }],
      extra: {
        agents: { tokens_file: join(volume, 'agent-tokens') },
        credential_files: { watch: true, debounce_ms: 200 },
      },
    });
    cleanups.push(() => edge.stop());
    const open = await client(edge, '/arm', 'watched-token-1');
    await openArm(open);
    for (const token of ['watched-token-2', 'watched-token-3']) {
      const from = edge.logs.length;
      publish(token);
      const line = await edge.waitLog(
        (l) => edge.logs.indexOf(l) >= from && l.event === 'credentials_reloaded',
        15_000,
        `the reload of ${token}`,
      );
      expect(line).toMatchObject({ trigger: 'watch', routes_changed: ['arm'] });
      expect(await upgradeStatus(edge, '/arm', token)).toBe(101);
      expect(await upgradeStatus(edge, '/arm', 'watched-token-1')).toBe(401);
    }
    // The session opened on the first generation is still served.
    expect((await open.ok('ping', { origin_ns: 7 })).origin_ns).toBe(7);
    expect(edge.logs.filter((l) => l.event === 'credentials_reload_failed')).toEqual([]);
  }, 60_000);
});
