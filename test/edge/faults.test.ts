/**
 * Faults through the edge in front of the real demo worlds: the agent drops mid-motion, resumes,
 * the world restarts, the world is unreachable.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startDemoWorld, type RunningDemoWorld } from '../../src/demo/index.js';
import { AwpClient, initializeParams, type Json } from '../support/awp-client.js';
import { AGENT_TOKEN, startEdge, type TestEdge } from '../support/edge.js';
import { freePort } from '../support/ports.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const WATCHDOG_MS = 400;
const MOVE = { pose: { frame: 'base', p_m: [0.3, 0.2, 0.3], q: [0, 0, 0, 1] }, max_velocity_mps: 0.05 };

async function armBehindEdge(port = 0): Promise<{ world: RunningDemoWorld; edge: TestEdge }> {
  const world = await startDemoWorld({
    kind: 'arm',
    host: '127.0.0.1',
    port,
    watchdogMs: WATCHDOG_MS,
    heartbeatIntervalMs: 1000,
    reconnectWindowMs: 5000,
  });
  const edge = await startEdge([{ path: '/arm', upstream: world.url }]);
  cleanups.push(
    () => world.close(),
    () => edge.close(),
  );
  return { world, edge };
}

async function openArm(edge: TestEdge): Promise<{ agent: AwpClient; ready: Json }> {
  const agent = await AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN });
  cleanups.push(() => agent.close());
  await agent.ok('initialize', initializeParams());
  const ready = await agent.ok('session.open', {
    embodiment: 'arm_01',
    mode: 'streaming',
    subscribe: [{ channel: 'state' }],
  });
  return { agent, ready };
}

/** The world's own view of its only session. */
function worldSession(world: RunningDemoWorld) {
  const sessions = [...world.world.sessions.values()];
  expect(sessions).toHaveLength(1);
  return sessions[0] as unknown as { state: string; conn: unknown };
}

describe('faults through the edge (demo worlds)', () => {
  it('AWP-SES-003 AWP-SAF-004 the agent drops mid-motion: the world sees the drop at once and enters safe state at watchdog_ms', async () => {
    const { world, edge } = await armBehindEdge();
    const { agent } = await openArm(edge);
    await agent.ok('action.submit', { action_id: 'a-1', type: 'move_to_pose', params: MOVE });
    await agent.waitNotification('action.status', (p) => p.state === 'executing');
    const dropped = performance.now();
    agent.drop();
    // Mirrored at once: the world suspends the session long before three heartbeat intervals (3 s).
    await until(() => worldSession(world).state === 'suspended', 1000);
    const seenAfter = performance.now() - dropped;
    expect(seenAfter).toBeLessThan(500);
    // The watchdog still runs: the motion is failed at watchdog_ms (the world records it for replay).
    await sleep(WATCHDOG_MS + 300);
    const s = world.world.sessions.values().next().value as unknown as {
      actions: Map<string, { state: string }>;
    };
    expect(s.actions.get('a-1')?.state).toBe('failed');
  });

  it('AWP-CTL-005 AWP-CTL-008 AWP-SAF-008 resume through the edge replays every missed status_seq once, in order, and control is regained by a new action', async () => {
    const { edge } = await armBehindEdge();
    const { agent, ready } = await openArm(edge);
    await agent.ok('action.submit', { action_id: 'a-1', type: 'move_to_pose', params: MOVE });
    await agent.waitNotification('action.status', (p) => p.state === 'executing');
    const before = agent.statusSeqs();
    const last = before.at(-1)!;
    agent.drop();
    await sleep(WATCHDOG_MS + 400); // safe state entered while away

    const again = await AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN });
    cleanups.push(() => again.close());
    await again.ok('initialize', initializeParams());
    const resumed = await again.ok('session.resume', {
      session_token: ready.session_token,
      last_status_seq: last,
    });
    expect(resumed.session_token).toBe(ready.session_token);
    expect(resumed.safe_state).toBe(true);
    const replayTo = resumed.replay_to_status_seq as number;
    expect(replayTo).toBeGreaterThan(last);
    await again.waitNotification('session.state', (p) => p.reason === 'resumed');
    const replayed = again.statusSeqs();
    // Every status_seq after the agent's last, exactly once, in order, then the live 'resumed'.
    expect(replayed).toEqual(range(last + 1, replayTo + 2));
    const kinds = again.received
      .filter((m) => m.id === undefined)
      .map(
        (m) =>
          `${m.method as string}:${JSON.stringify((m.params as Json).state ?? (m.params as Json).event)}`,
      );
    expect(kinds).toContain('action.status:"failed"');
    expect(kinds).toContain('world.event:"safe_state_entered"');
    // A valid token is not permission to move; a new action is (AWP-SAF-008).
    await sleep(110); // max_action_rate_hz 10
    await again.ok('action.submit', { action_id: 'a-2', type: 'move_to_pose', params: MOVE });
    await again.waitNotification('world.event', (p) => p.event === 'safe_state_exited');
    await again.waitNotification('action.status', (p) => p.action_id === 'a-2' && p.state === 'executing');
    const all = again.statusSeqs();
    expect(all).toEqual([...new Set(all)].sort((a, b) => a - b));
  });

  it('AWP-SES-008 the world restarts: resume gets AWP_SESSION_UNKNOWN and a new session opens', async () => {
    // A port outside the ephemeral range, so nothing else takes it while the world is down.
    const { world, edge } = await armBehindEdge(await freePort());
    const { agent, ready } = await openArm(edge);
    const port = world.port;
    await world.close();
    // The edge mirrors the lost upstream connection to the agent (1014), which reconnects.
    const closed = await agent.waitClosed();
    expect(closed.code).toBe(1014);
    const restarted = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port });
    cleanups.push(() => restarted.close());
    const again = await AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN });
    cleanups.push(() => again.close());
    await again.ok('initialize', initializeParams());
    const refused = await again.call('session.resume', {
      session_token: ready.session_token,
      last_status_seq: 0,
    });
    expect(refused.error).toMatchObject({ code: 2005, message: 'AWP_SESSION_UNKNOWN' });
    const fresh = await again.ok('session.open', { embodiment: 'arm_01', mode: 'streaming' });
    expect(fresh.session_token).not.toBe(ready.session_token);
  });

  it('the upstream is unreachable: the agent gets a clear, retryable error and a close, not a hang', async () => {
    const edge = await startEdge([{ path: '/gone', upstream: 'ws://127.0.0.1:9/' }]);
    cleanups.push(() => edge.close());
    const agent = await AwpClient.connect(edge.url('/gone'), { credential: AGENT_TOKEN });
    const started = performance.now();
    const answer = await agent.call('initialize', initializeParams());
    expect(answer.error).toMatchObject({
      code: -32001,
      message: 'AWP_EDGE_UPSTREAM_UNAVAILABLE',
      data: { retryable: true },
    });
    expect((answer.error as { data: { detail: string } }).data.detail).toMatch(/ECONNREFUSED/);
    expect((await agent.waitClosed()).code).toBe(1014);
    expect(performance.now() - started).toBeLessThan(3000);
  });

  it("AWP-TRN-013 the world refuses a relay agent's stream connection: the agent's stream closes with 1014, its session goes on", async () => {
    const { world, edge } = await armBehindEdge();
    const { agent, ready } = await openArm(edge);
    // The world's stream endpoint refuses the world's own token from now on (HTTP 401 to the edge's dial).
    world.world.streamTokenValid = () => false;
    const endpoint = (ready.stream_endpoints as { binding: string; url: string }[]).find(
      (e) => e.binding === 'ws',
    )!;
    const stream = await AwpClient.connect(endpoint.url, { credential: ready.session_token as string });
    expect(await stream.waitClosed()).toEqual({ code: 1014, reason: 'world stream endpoint unavailable' });
    const metrics = await (await fetch(`${edge.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/awp_edge_upstream_failures_total\{[^}]*kind="stream"[^}]*\} 1/);
    // The control session is untouched.
    expect((await agent.ok('ping', { origin_ns: 5 })).origin_ns).toBe(5);
  });
});

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from }, (_, i) => from + i);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function until(cond: () => boolean, timeoutMs: number): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!cond()) {
    if (performance.now() > end) throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(5);
  }
}
