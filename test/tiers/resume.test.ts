/**
 * Issue 13 item 2 (c): resume through three tiers of edges (world <- C <- B <- A).
 *
 * - An agent dropped at the leaf resumes at the leaf and gets every missed status_seq exactly once.
 * - The middle tier is SIGKILLed and started again. What happens is decided by B's store, as for any
 *   replica: with Redis, B finds the session again, so agents at A are suspended (1014 from A, the
 *   world suspends the session) and resume at A once B is back, within the world's reconnect window,
 *   missing nothing. With the memory store B has forgotten the session: the resume is refused with
 *   AWP_SESSION_UNKNOWN (a clear reason: open a new session), and the world's session stays suspended
 *   until its own reconnect window ends. Observers at A are closed with session.state world_shutdown
 *   (observer sessions live in B's hub; issue 13 item 1) and open again at A from resync keyframes.
 */
import { describe, expect, it } from 'vitest';
import type { RunningDemoWorld } from '../../src/demo/index.js';
import { isResyncKeyframe, ObserverClient } from '../fanout/observer-client.js';
import { AwpClient, type Json } from '../support/awp-client.js';
import { redisServerAvailable, startRedis } from '../support/redis.js';
import {
  EDGE_AGENT_TOKEN,
  LaggingAgent,
  QUICK_MOVE,
  SLOW_MOVE,
  range,
  seqOf,
  replayedOf,
  sequencedOf,
  sleep,
  startArmWorld,
  until,
  useCleanups,
  worldSession,
} from '../scale/rig.js';
import { startTiers, type Tier, type TierRig } from './rig.js';

const LAG = 3;

describe('edges in front of edges: resume at either tier (issue 13)', () => {
  const cleanup = useCleanups();

  /** Opens a session at the leaf, starts the slow move and lets statuses flow. */
  async function actingAgent(
    world: RunningDemoWorld,
    leaf: Tier,
  ): Promise<{ agent: LaggingAgent; ready: Json }> {
    const client = await LaggingAgent.connect(leaf.url());
    cleanup(() => client.close());
    const ready = await client.ok('session.open', { embodiment: 'arm_01', mode: 'streaming' });
    const agent = new LaggingAgent(client, LAG);
    cleanup(() => agent.stop());
    agent.startPinging();
    await client.ok('action.submit', { action_id: 'a-1', type: 'move_to_pose', params: SLOW_MOVE });
    await client.waitNotification(
      'action.status',
      (p) => p.action_id === 'a-1' && p.progress !== undefined && (p.status_seq as number) >= 6,
      5000,
    );
    const worldId = [...world.world.sessions.entries()].find(([, s]) => s.embodiment === 'arm_01')?.[0];
    expect(worldId, 'the world holds the relayed session').toBeDefined();
    return { agent, ready };
  }

  function worldSessionOfArm(world: RunningDemoWorld): ReturnType<typeof worldSession> {
    const id = [...world.world.sessions.entries()].find(([, s]) => s.embodiment === 'arm_01')?.[0];
    if (id === undefined) throw new Error('the world holds no arm session');
    return worldSession(world, id);
  }

  /**
   * Resumes at the leaf with what the agent processed (retrying while a tier below is not back:
   * AWP_EDGE_UPSTREAM_UNAVAILABLE is retryable); asserts every missed status_seq once, in order, equal
   * to what the first connection got where they overlap, then the motion's completion and a new action.
   */
  async function resumeAndCheck(
    world: RunningDemoWorld,
    rig: TierRig,
    first: LaggingAgent,
    ready: Json,
  ): Promise<void> {
    const last = first.processed;
    expect(last).toBeGreaterThan(0);
    const firstSeen = new Map(sequencedOf(first.client).map((m) => [seqOf(m), JSON.stringify(m.params)]));
    let client: AwpClient | undefined;
    let resumed: Json | undefined;
    const deadline = performance.now() + 15_000;
    while (resumed === undefined) {
      client = await LaggingAgent.connect(rig.leaf.url());
      cleanup(() => client!.close());
      const r = await client.call(
        'session.resume',
        { session_token: ready.session_token, last_status_seq: last },
        10_000,
      );
      if (r.error === undefined) resumed = r.result as Json;
      else {
        const data = (r.error as { data?: { retryable?: boolean } }).data;
        expect(data?.retryable, `resume refused: ${JSON.stringify(r.error)}`).toBe(true);
        expect(performance.now(), `resume still refused: ${JSON.stringify(r.error)}`).toBeLessThan(deadline);
        client.close();
        await sleep(250);
      }
    }
    expect(resumed.session_token).toBe(ready.session_token);
    expect(resumed.session_id).toBe(ready.session_id);
    const replayTo = resumed.replay_to_status_seq as number;
    expect(replayTo).toBeGreaterThan(last);
    const live = await client!.waitNotification('session.state', (p) => p.reason === 'resumed', 5000);
    expect(live.status_seq).toBe(replayTo + 1);
    const replayed = replayedOf(client!);
    expect(replayed.map(seqOf)).toEqual(range(last + 1, replayTo + 1));
    for (const m of replayed) {
      const before = firstSeen.get(seqOf(m));
      if (before !== undefined) expect(JSON.stringify(m.params), `status_seq ${seqOf(m)}`).toBe(before);
    }
    const again = new LaggingAgent(client!, 0);
    cleanup(() => again.stop());
    again.startPinging();
    await client!.waitNotification(
      'action.status',
      (p) => p.action_id === 'a-1' && p.state === 'completed',
      10_000,
    );
    await client!.ok('action.submit', { action_id: 'a-2', type: 'move_to_pose', params: QUICK_MOVE });
    await client!.waitNotification(
      'action.status',
      (p) => p.action_id === 'a-2' && p.state === 'completed',
      8000,
    );
    const notified = client!.statusSeqs();
    expect(notified, 'notifications strictly in order').toEqual([...new Set(notified)].sort((x, y) => x - y));
    const inResults = client!.received
      .map((m) => (m.result as { status_seq?: unknown } | undefined)?.status_seq)
      .filter((v): v is number => typeof v === 'number');
    const all = [...notified, ...inResults].sort((x, y) => x - y);
    expect(all).toEqual(range(last + 1, all.at(-1)!));
    await until(
      () => worldSessionOfArm(world).statusSeq === all.at(-1),
      3000,
      'every status_seq the world assigned',
    );
    console.log(
      JSON.stringify({ test: 'tiers-resume', agent_last_status_seq: last, replay_to_status_seq: replayTo }),
    );
  }

  it('AWP-CTL-008 AWP-SES-010 an agent dropped at the leaf resumes at the leaf and misses nothing', async () => {
    const world = await startArmWorld(cleanup);
    const rig = await startTiers(cleanup, world.url);
    const { agent, ready } = await actingAgent(world, rig.leaf);
    agent.client.drop();
    agent.stop();
    // Every tier drops its upstream connection at once: the world suspends the session.
    await until(
      () => worldSessionOfArm(world).state === 'suspended',
      5000,
      'the world to suspend the session',
    );
    await sleep(500); // statuses keep coming while the agent is away
    await resumeAndCheck(world, rig, agent, ready);
  });

  it.skipIf(!redisServerAvailable())(
    'AWP-CTL-008 the middle tier is SIGKILLed and restarted: with its sessions in Redis, agents at the leaf resume and miss nothing',
    async () => {
      const redis = await startRedis();
      cleanup(() => redis.dispose());
      const world = await startArmWorld(cleanup);
      const rig = await startTiers(cleanup, world.url, {
        perTier: (i) => (i === 1 ? { redisUrl: redis.url } : {}),
      });
      const { agent, ready } = await actingAgent(world, rig.leaf);
      await rig.tiers[1]!.edge.waitLog((l) => l.event === 'session_opened', 3000, 'session_opened at B');

      const restarted = rig.restart(1);
      // The leaf reports its upstream lost (1014): the agent is suspended at the leaf, not closed for good.
      const closed = await agent.client.waitClosed(5000);
      agent.stop();
      expect(closed.code).toBe(1014);
      await until(
        () => worldSessionOfArm(world).state === 'suspended',
        5000,
        'the world to suspend the session',
      );
      expect(worldSessionOfArm(world).actions.get('a-1')?.state).toBe('executing');
      await restarted;
      await resumeAndCheck(world, rig, agent, ready);
      await rig.tiers[1]!.edge.waitLog((l) => l.event === 'session_resumed', 3000, 'session_resumed at B');
    },
  );

  it('the middle tier is SIGKILLed and restarted with the memory store: the resume is refused with AWP_SESSION_UNKNOWN; observers at the leaf are closed with world_shutdown and open again', async () => {
    const world = await startArmWorld(cleanup);
    const rig = await startTiers(cleanup, world.url);
    const { agent, ready } = await actingAgent(world, rig.leaf);
    const observer = await ObserverClient.open(rig.leaf.url(), {
      kind: 'ws',
      credential: EDGE_AGENT_TOKEN,
      subscribe: [{ channel: 'state' }],
      timeoutMs: 10_000,
    });
    cleanup(() => observer.close());
    await until(() => observer.log('state').count > 3, 5000, 'frames at the observer');

    await rig.restart(1);
    const closed = await agent.client.waitClosed(5000);
    agent.stop();
    expect(closed.code).toBe(1014);
    const ended = await observer.waitNotification('session.state', (p) => p.state === 'closed', 5000);
    expect(ended.reason).toBe('world_shutdown');
    expect((await observer.waitClosed(5000)).code).toBe(1011);

    const client = await LaggingAgent.connect(rig.leaf.url());
    cleanup(() => client.close());
    const r = await client.call(
      'session.resume',
      { session_token: ready.session_token, last_status_seq: agent.processed },
      10_000,
    );
    const error = r.error as { code: number; message: string; data?: Json } | undefined;
    expect(error, 'the resume is refused').toBeDefined();
    expect(error!.message).toBe('AWP_SESSION_UNKNOWN');
    // The world still holds its session (suspended) until its reconnect window (20 s here): the arm
    // stays bound that long.
    expect(worldSessionOfArm(world).state).toBe('suspended');
    const reopened = await client.call('session.open', { embodiment: 'arm_01', mode: 'streaming' }, 10_000);
    expect((reopened.error as { message?: string } | undefined)?.message).toBe('AWP_EMBODIMENT_UNAVAILABLE');

    // A new observer session at the leaf is served again, from a resync keyframe.
    const again = await ObserverClient.open(rig.leaf.url(), {
      kind: 'ws',
      credential: EDGE_AGENT_TOKEN,
      subscribe: [{ channel: 'state' }],
      timeoutMs: 10_000,
    });
    cleanup(() => again.close());
    await until(() => again.log('state').count > 3, 8000, 'frames at the new observer');
    expect(isResyncKeyframe(again.log('state').flags[0]!)).toBe(true);
  });
});
