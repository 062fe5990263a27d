/**
 * Issue 8: observer hubs with several replicas. Observers (fan-out) spread over two replicas of one
 * route: each replica serves its observers from one upstream observer session, so the world holds
 * one observer session per replica (2), not one per observer (N + M).
 */
import { describe, expect, it } from 'vitest';
import type { RunningDemoWorld } from '../../src/demo/index.js';
import { AwpClient, initializeParams } from '../support/awp-client.js';
import type { EdgeProcess } from '../support/edge-process.js';
import { redisServerAvailable, startRedis } from '../support/redis.js';
import { EDGE_AGENT_TOKEN, sleep, startArmWorld, startReplica, until, useCleanups } from './rig.js';

const ON_A = 6;
const ON_B = 4;

/** The world's sessions without an embodiment (observer sessions), and how many of them are live. */
function worldObservers(world: RunningDemoWorld): { id: string; state: string }[] {
  return [...world.world.sessions.values()]
    .filter((s) => s.embodiment === null)
    .map((s) => ({ id: s.id, state: s.state }));
}

describe.skipIf(!redisServerAvailable())('scale-out: observer hubs on several replicas (issue 8)', () => {
  const cleanup = useCleanups();

  async function observe(edge: EdgeProcess): Promise<AwpClient> {
    const client = await AwpClient.connect(edge.url('/arm'), { credential: EDGE_AGENT_TOKEN });
    cleanup(() => client.close());
    await client.ok('initialize', initializeParams(['proprio/json', 'text/event+json']));
    await client.ok('session.open', { mode: 'streaming', subscribe: [{ channel: 'state', rate_hz: 10 }] });
    return client;
  }

  it('AWP-EMB-004 each replica keeps at most one upstream observer session per route', async () => {
    const redis = await startRedis();
    cleanup(() => redis.dispose());
    const world = await startArmWorld(cleanup);
    const routes = [
      { name: 'arm', path: '/arm', upstream: world.url, observers: 'fanout' as const, hub_linger_ms: 300 },
    ];
    const [a, b] = await Promise.all([
      startReplica(cleanup, { routes, redisUrl: redis.url }),
      startReplica(cleanup, { routes, redisUrl: redis.url }),
    ]);

    // An acting agent as well: its relay session is the world's only session with an embodiment.
    const actor = await AwpClient.connect(a.url('/arm'), { credential: EDGE_AGENT_TOKEN });
    cleanup(() => actor.close());
    await actor.ok('initialize', initializeParams());
    await actor.ok('session.open', { embodiment: 'arm_01', mode: 'streaming' });

    // Observers join one at a time, alternating replicas, so every join sees the hub already up.
    const observers: AwpClient[] = [];
    for (let i = 0; i < ON_A + ON_B; i++) observers.push(await observe(i % 2 === 0 || i >= 2 * ON_B ? a : b));
    // ... and a burst of simultaneous joins on both replicas.
    observers.push(...(await Promise.all([observe(a), observe(b), observe(a), observe(b)])));
    const onA = ON_A + 2;
    const onB = ON_B + 2;
    expect(observers).toHaveLength(onA + onB);

    // Every observer is served: frames of the subscribed channel arrive on each.
    await Promise.all(observers.map((o) => o.waitNotification('obs.frame', () => true, 5000)));
    expect(worldObservers(world)).toHaveLength(2);
    expect([...world.world.sessions.values()].filter((s) => s.embodiment !== null)).toHaveLength(1);

    // Still two while observers come and go on each replica.
    await observers.shift()!.ok('session.close', {});
    await observers.pop()!.ok('session.close', {});
    observers.push(await observe(b), await observe(a));
    await sleep(200);
    const live = worldObservers(world).filter((s) => s.state !== 'closed' && s.state !== 'suspended');
    expect(live).toHaveLength(2);
    console.log(
      JSON.stringify({
        test: 'observer-hubs',
        observers_on_a: onA,
        observers_on_b: onB,
        world_observer_sessions: live.length,
      }),
    );

    // When every observer of a replica has closed its session, the hub closes its upstream session
    // after the linger (suspended observers would keep it: they may still resume).
    await Promise.all(observers.map((o) => o.ok('session.close', {})));
    await until(
      () => worldObservers(world).every((s) => s.state === 'closed'),
      5000,
      'the hubs to close their upstream observer sessions',
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}: ${JSON.stringify(worldObservers(world))}`);
    });
  });
});
