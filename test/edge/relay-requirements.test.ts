/** Relay-session requirements through the edge, in front of the real demo arm world. */
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startDemoWorld } from '../../src/demo/index.js';
import { FLAG_KEYFRAME, FLAG_RESYNC, peekFrame } from '../../src/protocol/frame.js';
import { AwpClient, initializeParams, type Json } from '../support/awp-client.js';
import { AGENT_TOKEN, startEdge, type TestEdge } from '../support/edge.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const MOVE = { pose: { frame: 'base', p_m: [0.3, 0.2, 0.3], q: [0, 0, 0, 1] }, max_velocity_mps: 0.05 };

async function setup(world: Parameters<typeof startDemoWorld>[0] = { kind: 'arm' }) {
  const w = await startDemoWorld({ host: '127.0.0.1', port: 0, ...world });
  const edge = await startEdge([{ path: '/arm', upstream: w.url }]);
  cleanups.push(
    () => w.close(),
    () => edge.close(),
  );
  return { world: w, edge };
}

async function open(edge: TestEdge, params: Json = { embodiment: 'arm_01', mode: 'streaming' }) {
  const agent = await AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN });
  cleanups.push(() => agent.close());
  await agent.ok('initialize', initializeParams());
  const ready = await agent.ok('session.open', params);
  return { agent, ready };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A TCP hop to 127.0.0.1:`port` that waits `delayMs` before connecting each client through. */
async function delayingHop(port: number, delayMs: number): Promise<{ port: number; close: () => void }> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    sockets.add(client);
    client.pause();
    setTimeout(() => {
      const upstream = connect(port, '127.0.0.1', () => {
        client.pipe(upstream).pipe(client);
        client.resume();
      });
      sockets.add(upstream);
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
      client.on('close', () => upstream.destroy());
    }, delayMs);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

describe('relay sessions through the edge (demo arm world)', () => {
  it('AWP-SAF-003 AWP-SAF-005 the edge never originates upstream: a quiet agent still trips the world watchdog', async () => {
    const { world, edge } = await setup({ kind: 'arm', watchdogMs: 400, heartbeatIntervalMs: 150 });
    const { agent } = await open(edge);
    await agent.ok('action.submit', { action_id: 'a-1', type: 'move_to_pose', params: MOVE });
    await agent.waitNotification('action.status', (p) => p.state === 'executing');
    const t0 = performance.now();
    // The agent answers the world's pings (its transport library) and says nothing else.
    const failed = await agent.waitNotification('action.status', (p) => p.state === 'failed', 3000);
    const entered = await agent.waitNotification(
      'world.event',
      (p) => p.event === 'safe_state_entered',
      3000,
    );
    expect(failed.reason).toBe('connection_lost');
    expect(entered.detail).toMatchObject({ embodiment: 'arm_01' });
    expect(performance.now() - t0).toBeLessThan(400 + 600);
    // World pings reached the agent and its pongs went back: the session stayed active (AWP-SAF-002).
    expect(agent.received.some((m) => m.method === 'ping')).toBe(true);
    expect([...world.world.sessions.values()][0]).toMatchObject({ state: 'active' });
  });

  it('AWP-SAF-001 AWP-SAF-002 a silent agent hop is detected with WebSocket pings and mirrored upstream', async () => {
    const { world, edge } = await setup();
    const { agent } = await open(edge);
    // The agent's TCP socket stops reading: no pongs, no messages (a hung process, a cut cable).
    (agent.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    const sessions = () => [...world.world.sessions.values()] as { state: string }[];
    const end = performance.now() + 5000; // test hop ping interval is 1 s: lost after two silent intervals
    while (sessions()[0]?.state !== 'suspended' && performance.now() < end) await sleep(50);
    expect(sessions()[0]?.state).toBe('suspended');
  });

  it('AWP-SES-010 a resume on a new connection replaces the old one through the edge', async () => {
    const { edge } = await setup();
    const { agent, ready } = await open(edge);
    const last = Math.max(0, ...agent.statusSeqs());
    const second = await AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN });
    cleanups.push(() => second.close());
    await second.ok('initialize', initializeParams());
    const resumed = await second.ok('session.resume', {
      session_token: ready.session_token,
      last_status_seq: last,
    });
    expect(resumed.session_id).toBe(ready.session_id);
    const replaced = await second.waitNotification(
      'session.state',
      (p) => p.reason === 'connection_replaced',
    );
    expect(replaced.state).toBe('suspended');
    await second.waitNotification('session.state', (p) => p.reason === 'resumed');
    expect((await agent.waitClosed()).code).toBe(1014);
    expect((await second.ok('ping', { origin_ns: 3 })).origin_ns).toBe(3);
  });

  it('AWP-ACT-001 AWP-ACT-010 idempotent resubmission and refused submissions pass through unchanged', async () => {
    const { world, edge } = await setup();
    const { agent } = await open(edge);
    const first = await agent.ok('action.submit', { action_id: 'a-1', type: 'move_to_pose', params: MOVE });
    const again = await agent.ok('action.submit', { action_id: 'a-1', type: 'move_to_pose', params: MOVE });
    expect(again.received_ts_mono_ns).toBe(first.received_ts_mono_ns);
    const conflict = await agent.call('action.submit', {
      action_id: 'a-1',
      type: 'move_to_pose',
      params: { ...MOVE, max_velocity_mps: 0.1 },
    });
    expect(conflict.error).toMatchObject({ code: 3004 });
    world.engageEstop();
    await agent.waitNotification('world.event', (p) => p.event === 'e_stop_engaged');
    await sleep(110);
    const refused = await agent.call('action.submit', {
      action_id: 'a-2',
      type: 'move_to_pose',
      params: MOVE,
    });
    expect(refused.error).toMatchObject({ code: 3005, data: { retryable: true } });
    world.releaseEstop();
    await agent.waitNotification('world.event', (p) => p.event === 'e_stop_released');
    // The refused a-2 created nothing: the same id is admitted now, and it did not count toward the rate.
    const admitted = await agent.ok('action.submit', {
      action_id: 'a-2',
      type: 'move_to_pose',
      params: MOVE,
    });
    expect(admitted.action_id).toBe('a-2');
  });

  it('AWP-TRN-012 a lockstep tick sent right after the stream connection opens has its frame on the stream, none inline', async () => {
    const { world, edge } = await setup({ kind: 'grid' });
    // The world's stream endpoint answers slowly (a delaying TCP hop in front of it), as a busy world may.
    const slow = await delayingHop(world.port, 150);
    cleanups.push(() => slow.close());
    (world.world.config as { streamUrl?: string }).streamUrl = `ws://127.0.0.1:${slow.port}/stream`;
    const { agent, ready } = await open(edge, {
      embodiment: 'avatar_0',
      mode: 'lockstep',
      subscribe: [{ channel: 'grid_view' }],
    });
    const ws = (ready.stream_endpoints as { binding: string; url: string }[]).find(
      (e) => e.binding === 'ws',
    )!;
    const stream = await AwpClient.connect(ws.url, { credential: ready.session_token as string });
    cleanups.push(() => stream.close());
    // The edge accepted the agent's stream connection and is still dialling the world's: the tick waits,
    // so the world sees its stream connection first, as the agent did.
    const mark = agent.received.length;
    const tick = typeof ready.tick === 'number' ? ready.tick : 0;
    await agent.ok('world.tick', { expected_tick: tick });
    await until(() => stream.binary.length > 0);
    expect(agent.received.slice(mark).filter((m) => m.method === 'obs.frame')).toHaveLength(0);
  });

  it('AWP-TRN-012 AWP-TRN-010 AWP-TRN-008 the ws stream binding through the edge: resync first, no inline while down, resync after resume', async () => {
    const { edge } = await setup({ kind: 'arm', stateStaleAfterMs: 200 });
    const { agent, ready } = await open(edge, {
      embodiment: 'arm_01',
      mode: 'streaming',
      subscribe: [{ channel: 'state' }],
    });
    const stateId = (ready.granted as { channels: { channel: string; channel_id: number }[] }).channels.find(
      (c) => c.channel === 'state',
    )!.channel_id;
    const ws = (ready.stream_endpoints as { binding: string; url: string }[]).find(
      (e) => e.binding === 'ws',
    )!;
    expect(ws.url).toBe(`${edge.url('/arm')}/stream`);
    expect((ready.stream_endpoints as { binding: string }[]).at(-1)).toEqual({ binding: 'inline' });
    // Inline until the stream connection is up.
    await agent.waitNotification('obs.frame', (p) => p.channel_id === stateId);
    const stream = await AwpClient.connect(ws.url, { credential: ready.session_token as string });
    await until(() => stream.binary.length > 0);
    const first = peekFrame(stream.binary[0]!);
    expect(first.channel_id).toBe(stateId);
    expect(first.flags & (FLAG_RESYNC | FLAG_KEYFRAME)).toBe(FLAG_RESYNC | FLAG_KEYFRAME);
    // ... then only there.
    await sleep(150);
    const inlineMark = agent.received.length;
    await sleep(300);
    expect(agent.received.slice(inlineMark).filter((m) => m.method === 'obs.frame')).toHaveLength(0);
    // The stream drops while control stays up: no inline fallback, and the world reports the outage.
    stream.drop();
    const mark = agent.received.length;
    const degraded = await agent.waitNotification(
      'world.event',
      (p) => p.event === 'channel_degraded',
      3000,
      mark,
    );
    expect(degraded.detail).toMatchObject({ channel: 'state' });
    expect(agent.received.slice(mark).filter((m) => m.method === 'obs.frame')).toHaveLength(0);
    // Reconnect: the reliable channel restarts with a resync keyframe.
    const again = await AwpClient.connect(ws.url, { credential: ready.session_token as string });
    cleanups.push(() => again.close());
    await until(() => again.binary.length > 0);
    expect(peekFrame(again.binary[0]!).flags & FLAG_RESYNC).toBe(FLAG_RESYNC);
    // Suspension closes stream connections; after resume, channels are inline until re-established.
    agent.drop();
    await again.waitClosed();
    const back = await AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN });
    cleanups.push(() => back.close());
    await back.ok('initialize', initializeParams());
    const resumed = await back.ok('session.resume', {
      session_token: ready.session_token,
      last_status_seq: 0,
    });
    expect((resumed.stream_endpoints as { binding: string }[]).map((e) => e.binding)).toEqual([
      'ws',
      'inline',
    ]);
    await back.waitNotification('obs.frame', (p) => p.channel_id === stateId);
  });
});

async function until(cond: () => boolean, timeoutMs = 3000): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!cond()) {
    if (performance.now() > end) throw new Error('condition not met in time');
    await sleep(10);
  }
}
