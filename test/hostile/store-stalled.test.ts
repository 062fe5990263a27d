/**
 * A Redis session store that accepts connections but stops answering (SIGSTOPped, a stuck script, a
 * blackholed path): once a command times out the edge is not ready (/readyz 503) and refuses new
 * sessions with the retryable store error at once, instead of reporting ready while writes pile up
 * behind a connection that never answers; once the store answers again the edge is ready again.
 */
import { describe, expect, it } from 'vitest';
import { RedisSessionStore } from '../../src/store/redis-store.js';
import type { Json } from '../support/awp-client.js';
import { FakeRedis } from '../store/fake-redis.js';
import { agentOn, rigPerTest, until } from './support.js';

const { start, cleanups } = rigPerTest();

const OPEN: Json = { embodiment: 'e1', mode: 'streaming' };

async function readyz(adminUrl: string): Promise<number> {
  return (await fetch(`${adminUrl}/readyz`)).status;
}

describe('a session store that stops answering', () => {
  it('after a store command times out, /readyz is 503 and session.open gets AWP_EDGE_STORE_UNAVAILABLE at once, until the store answers again', async () => {
    const fake = await FakeRedis.start();
    const store = new RedisSessionStore({ url: fake.url, commandTimeoutMs: 500, connectTimeoutMs: 500 });
    cleanups.push(
      () => void store.close(),
      () => void fake.close(),
    );
    expect(await store.whenReady(10_000)).toBe(true);
    const r = await start({}, { store });
    expect(await readyz(r.edge.adminUrl)).toBe(200);

    fake.hang();
    // This open's store write gets no reply: after the command timeout the open fails (an error, or the
    // connection closed 1011), not hangs.
    const first = await agentOn(r.edge, '/w');
    cleanups.push(() => first.close());
    await expect(first.ok('session.open', OPEN, 15_000)).rejects.toThrow(
      /store unavailable|STORE_UNAVAILABLE/,
    );

    // Before the fix the client stayed 'ready': /readyz 200, and every write queued behind the stall.
    await until(async () => (await readyz(r.edge.adminUrl)) === 503, 10_000, '/readyz to turn 503');
    const second = await agentOn(r.edge, '/w');
    cleanups.push(() => second.close());
    const refused = await second.call('session.open', OPEN, 15_000);
    expect(refused.error, JSON.stringify(refused)).toMatchObject({
      code: -32003,
      message: 'AWP_EDGE_STORE_UNAVAILABLE',
      data: { retryable: true },
    });

    fake.answer();
    await until(async () => (await readyz(r.edge.adminUrl)) === 200, 20_000, '/readyz to turn 200 again');
    const third = await agentOn(r.edge, '/w');
    cleanups.push(() => third.close());
    expect((await third.ok('session.open', OPEN, 15_000)).session_token).toBeDefined();
  }, 60_000);
});
