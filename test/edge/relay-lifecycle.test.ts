/** The session lifecycle through the edge, in front of the demo arm world. */
import { afterEach, describe, expect, it } from 'vitest';
import { startDemoWorld } from '../../src/demo/index.js';
import { AwpClient, initializeParams, type Json } from '../support/awp-client.js';
import { AGENT_TOKEN, startEdge, type TestEdge } from '../support/edge.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const MOVE = { pose: { frame: 'base', p_m: [0.3, 0.2, 0.3], q: [0, 0, 0, 1] }, max_velocity_mps: 0.05 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function setup(options: Record<string, unknown> = {}) {
  const world = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0, ...options });
  const edge = await startEdge([{ path: '/arm', upstream: world.url }]);
  cleanups.push(
    () => world.close(),
    () => edge.close(),
  );
  return { world, edge };
}

async function agent(edge: TestEdge): Promise<AwpClient> {
  const a = await AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN });
  cleanups.push(() => a.close());
  await a.ok('initialize', initializeParams());
  return a;
}

describe('session lifecycle through the edge', () => {
  it('AWP-SES-009 AWP-SES-007 session_id passes end to end and every transition shares the world status_seq', async () => {
    const { world, edge } = await setup();
    const a = await agent(edge);
    const ready = await a.ok('session.open', {
      embodiment: 'arm_01',
      mode: 'streaming',
      subscribe: [{ channel: 'proprio' }],
    });
    expect([...world.world.sessions.keys()]).toEqual([ready.session_id]);
    const readyState = await a.waitNotification('session.state', (p) => p.state === 'ready');
    const active = await a.waitNotification('session.state', (p) => p.state === 'active');
    expect(readyState).toMatchObject({ reason: 'opened', status_seq: 1 });
    expect(active).toMatchObject({ reason: 'first_activity', status_seq: 2 });
    const admitted = await a.ok('action.submit', { action_id: 'a-1', type: 'move_to_pose', params: MOVE });
    expect(admitted.status_seq).toBe(3);
  });

  it('AWP-CTL-004 the agent ping is answered by the world on its session clock, and the world ping reaches the agent', async () => {
    const { edge } = await setup({ heartbeatIntervalMs: 200 });
    const a = await agent(edge);
    await a.ok('session.open', { embodiment: 'arm_01', mode: 'streaming' });
    const before = Number(process.hrtime.bigint());
    const pong = await a.ok('ping', { origin_ns: before });
    expect(pong.origin_ns).toBe(before);
    expect(typeof pong.receive_ns).toBe('number');
    expect(pong.transmit_ns as number).toBeGreaterThanOrEqual(pong.receive_ns as number);
    const worldPing = await a.waitFor((m) => m.method === 'ping' && m.id !== undefined, 2000, 'a world ping');
    expect((worldPing.params as Json).origin_ns).toEqual(expect.any(Number));
  });

  it('AWP-SES-006 session.close through the edge: cancelled in-flight action, closed, then the result', async () => {
    const { edge } = await setup();
    const a = await agent(edge);
    await a.ok('session.open', { embodiment: 'arm_01', mode: 'streaming' });
    await a.ok('action.submit', { action_id: 'a-1', type: 'move_to_pose', params: MOVE });
    await a.waitNotification('action.status', (p) => p.state === 'executing');
    const mark = a.received.length;
    expect(await a.ok('session.close', {}, 5000)).toEqual({});
    const after = a.received
      .slice(mark)
      .map((m) => `${m.method as string}:${String((m.params as Json | undefined)?.state)}`);
    expect(after).toContain('action.status:cancelled');
    expect(after.indexOf('session.state:closed')).toBeGreaterThan(after.indexOf('action.status:cancelled'));
    // The session is gone at the edge too: its token no longer resumes.
    expect(edge.edge.ctx.registry.size).toBe(0);
  });

  it('AWP-SES-004 AWP-SES-005 a resume within the window succeeds; after the window the world answers and releases the embodiment', async () => {
    const { edge } = await setup({ reconnectWindowMs: 600, watchdogMs: 300 });
    const a = await agent(edge);
    const ready = await a.ok('session.open', { embodiment: 'arm_01', mode: 'streaming' });
    a.drop();
    await sleep(100);
    const b = await agent(edge);
    await b.ok('session.resume', { session_token: ready.session_token, last_status_seq: 0 });
    b.drop();
    await sleep(600 + 500);
    const c = await agent(edge);
    const late = await c.call('session.resume', { session_token: ready.session_token, last_status_seq: 0 });
    expect((late.error as { code: number }).code).toBe(2003);
    // The window closed the session: the embodiment is free for a new one.
    const fresh = await c.ok('session.open', { embodiment: 'arm_01', mode: 'streaming' });
    expect(fresh.session_id).not.toBe(ready.session_id);
  });
});
