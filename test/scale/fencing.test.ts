/**
 * Issue 8, fencing across replicas: a replica that suspended a session keeps an expiry timer for it;
 * when the agent has meanwhile resumed at another replica, that timer must not delete the session
 * from the shared store (SessionStore.delete with the replica's stale fence is refused).
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { redisServerAvailable, startRedis } from '../support/redis.js';
import {
  LaggingAgent,
  range,
  seqOf,
  replayedOf,
  sleep,
  startArmWorld,
  startReplica,
  until,
  useCleanups,
  worldSession,
} from './rig.js';

/** The world's reconnect window; the edge expires a suspended session 2 s after it (EXPIRY_MARGIN_MS). */
const WINDOW_MS = 1000;
const EDGE_EXPIRY_MS = WINDOW_MS + 2000;
const PREFIX = 'fence-test:';

describe.skipIf(!redisServerAvailable())('scale-out: fencing between replicas (issue 8)', () => {
  const cleanup = useCleanups();

  it('AWP-SES-010 a replica whose suspended session was resumed elsewhere does not delete it when its own expiry fires', async () => {
    const redis = await startRedis();
    cleanup(() => redis.dispose());
    const raw = new Redis(redis.url);
    cleanup(() => raw.disconnect());
    const world = await startArmWorld(cleanup, { watchdogMs: WINDOW_MS, reconnectWindowMs: WINDOW_MS });
    const routes = [{ name: 'arm', path: '/arm', upstream: world.url, observers: 'relay' as const }];
    const [a, b] = await Promise.all([
      startReplica(cleanup, { routes, redisUrl: redis.url, keyPrefix: PREFIX }),
      startReplica(cleanup, { routes, redisUrl: redis.url, keyPrefix: PREFIX }),
    ]);

    const first = await LaggingAgent.connect(a.url('/arm'));
    cleanup(() => first.close());
    const ready = await first.ok('session.open', { mode: 'streaming' });
    const token = ready.session_token as string;
    const sessionId = ready.session_id as string;
    const keys = [`${PREFIX}{${token}}:rec`, `${PREFIX}{${token}}:jnl`];
    first.drop();
    await a.waitLog((l) => l.event === 'session_suspended', 2000, 'A to suspend the session');
    const suspendedAt = performance.now();

    // The agent resumes at B; A still holds its (now stale) copy and expiry timer.
    const second = await LaggingAgent.connect(b.url('/arm'));
    cleanup(() => second.close());
    const last = first.statusSeqs().at(-1) ?? 0;
    await second.ok('session.resume', { session_token: token, last_status_seq: last });
    await second.waitNotification('session.state', (p) => p.reason === 'resumed');
    expect(await raw.hget(keys[0]!, 'f')).toBe('2');

    // Past A's expiry for the session (it fires, sees no attachment of its own, and ends its copy).
    await sleep(Math.max(0, EDGE_EXPIRY_MS + 500 - (performance.now() - suspendedAt)));
    await second.ok('ping', { origin_ns: 1 }); // the world sees the agent: the session lives on
    expect(await raw.exists(keys[0]!), 'the session record is still in Redis').toBe(1);
    expect(await raw.hget(keys[0]!, 'f')).toBe('2');

    // And it still resumes, anywhere: the agent drops from B and comes back at A.
    const seen = second.statusSeqs().at(-1)!;
    second.drop();
    await until(() => worldSession(world, sessionId).state === 'suspended', 2000, 'the world to suspend it');
    await b.waitLog((l) => l.event === 'session_suspended', 2000, 'B to suspend it');
    const third = await LaggingAgent.connect(a.url('/arm'));
    cleanup(() => third.close());
    const resumed = await third.ok('session.resume', { session_token: token, last_status_seq: seen });
    const replayTo = resumed.replay_to_status_seq as number;
    await third.waitNotification('session.state', (p) => p.reason === 'resumed');
    expect(replayedOf(third).map(seqOf)).toEqual(range(seen + 1, replayTo + 1));
  });
});
