/**
 * An agent that sends session.resume to a replica and leaves before the shared store answers. The replica
 * has claimed the session, which another replica served, but nobody takes it. The replica keeps it as
 * suspended, with its reconnect window running, rather than for good (one leaked session per token).
 */
import { describe, expect, it } from 'vitest';
import { redisServerAvailable, startRedis } from '../support/redis.js';
import { LaggingAgent, sleep, startArmWorld, startReplica, until, useCleanups } from './rig.js';

/** The world's reconnect window; the edge expires a suspended session 2 s after it (EXPIRY_MARGIN_MS). */
const WINDOW_MS = 1000;
const EDGE_EXPIRY_MS = WINDOW_MS + 2000;

async function suspendedAt(adminUrl: string): Promise<number> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith('awp_edge_sessions{') && l.includes('state="suspended"'));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}

describe.skipIf(!redisServerAvailable())('scale-out: a resume abandoned during the store lookup', () => {
  const cleanup = useCleanups();

  it('a session claimed for an agent that left is suspended with its window, not held for good', async () => {
    const redis = await startRedis();
    cleanup(() => redis.dispose());
    const world = await startArmWorld(cleanup, { watchdogMs: WINDOW_MS, reconnectWindowMs: WINDOW_MS });
    const routes = [{ name: 'arm', path: '/arm', upstream: world.url, observers: 'relay' as const }];
    const options = { routes, redisUrl: redis.url, keyPrefix: 'abandon-test:' };
    const [a, b] = await Promise.all([startReplica(cleanup, options), startReplica(cleanup, options)]);

    const first = await LaggingAgent.connect(a.url('/arm'));
    cleanup(() => first.close());
    const token = (await first.ok('session.open', { mode: 'streaming' })).session_token as string;
    first.drop();
    await a.waitLog((l) => l.event === 'session_suspended', 5000, 'A to suspend the session');

    // At B: the resume, and the agent gone at once (before Redis answers B's lookup and claim).
    for (let i = 0; i < 5; i++) {
      const agent = await LaggingAgent.connect(b.url('/arm'));
      agent.send({
        jsonrpc: '2.0',
        id: 1,
        method: 'session.resume',
        params: { session_token: token, last_status_seq: 0 },
      });
      agent.drop();
    }
    await sleep(EDGE_EXPIRY_MS);
    await until(async () => (await suspendedAt(b.adminUrl)) === 0, 10_000, 'B to let the session go');
  }, 60_000);

  it("an observer session claimed for an agent that left is not restored there, nor counted against the credential's session budget", async () => {
    const redis = await startRedis();
    cleanup(() => redis.dispose());
    const world = await startArmWorld(cleanup);
    const routes = [{ name: 'arm', path: '/arm', upstream: world.url, observers: 'fanout' as const }];
    const options = {
      routes,
      redisUrl: redis.url,
      keyPrefix: 'abandon-observer-test:',
      extra: { budgets: { max_sessions: 1 } },
    };
    const [a, b] = await Promise.all([startReplica(cleanup, options), startReplica(cleanup, options)]);

    const first = await LaggingAgent.connect(a.url('/arm'));
    cleanup(() => first.close());
    const ready = await first.ok('session.open', { mode: 'streaming', subscribe: [{ channel: 'state' }] });
    first.drop();
    await sleep(1000); // A stores the observer session as suspended

    const agent = await LaggingAgent.connect(b.url('/arm'));
    agent.send({
      jsonrpc: '2.0',
      id: 1,
      method: 'session.resume',
      params: { session_token: ready.session_token, last_status_seq: 0 },
    });
    agent.drop();
    await sleep(1000);
    // The credential holds no session at B: one more may open there.
    const next = await LaggingAgent.connect(b.url('/arm'));
    cleanup(() => next.close());
    const opened = await next.call('session.open', { mode: 'streaming', subscribe: [{ channel: 'state' }] });
    expect(opened.error).toBeUndefined();
  }, 60_000);
});
