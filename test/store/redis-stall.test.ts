/**
 * RedisSessionStore against a Redis that accepts connections but stops answering: a command that times
 * out must not stay queued in the client with its arguments (a journal step can be megabytes) while
 * more writes pile up behind it, and the store must report unhealthy (so /readyz and session admission
 * refuse) until a connection is ready again.
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import type { JournalEntry } from '../../src/session/journal.js';
import { RedisSessionStore, StoreUnavailableError } from '../../src/store/redis-store.js';
import { redisServerAvailable, startRedis } from '../support/redis.js';
import { entry, record } from './contract.js';
import { FakeRedis } from './fake-redis.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Polls `check` every 20 ms until true; fails after `timeoutMs`. */
async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function fakeAndStore(): Promise<{ fake: FakeRedis; store: RedisSessionStore }> {
  const fake = await FakeRedis.start();
  cleanups.push(() => fake.close());
  const store = new RedisSessionStore({ url: fake.url, commandTimeoutMs: 300, connectTimeoutMs: 500 });
  cleanups.push(() => store.close());
  expect(await store.whenReady(10_000)).toBe(true);
  return { fake, store };
}

/** A journal step of about 1 MiB. */
const bigStep = (): JournalEntry[] =>
  Array.from({ length: 128 }, (_, i) => ({ status_seq: i + 1, text: 'x'.repeat(8192) }));

describe('RedisSessionStore: a Redis that stops answering', () => {
  it('a timed-out command drops the connection (releasing what was queued on it) and the store is unhealthy until it reconnects', async () => {
    const { fake, store } = await fakeAndStore();
    expect(store.healthy()).toBe(true);
    fake.hang();
    const appends = Array.from({ length: 5 }, (_, i) => store.append(`tok-${i}`, 1, bigStep()));
    const results = await Promise.allSettled(appends);
    for (const r of results) {
      expect(r.status).toBe('rejected');
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(StoreUnavailableError);
    }
    // Before the fix the connection stayed 'ready': healthy() true, and every queued append kept.
    expect(store.healthy()).toBe(false);
    await expect(store.acknowledge('tok-0', 1, 1)).rejects.toThrow(/is unreachable \(stalled/);
    // The client closed the connection its commands were stuck on: ioredis rejected and dropped them.
    await until(() => fake.closedByClient >= 1, 10_000, 'the client to close the stalled connection');
    expect(fake.unanswered).toBeGreaterThan(1 << 20);

    // While the server still answers nothing (a new connection's handshake neither), it stays unhealthy.
    await until(() => fake.accepted >= 2, 10_000, 'the client to reconnect');
    expect(await store.whenReady(1_000)).toBe(false);
    expect(store.healthy()).toBe(false);

    fake.answer();
    expect(await store.whenReady(15_000)).toBe(true);
    expect(store.healthy()).toBe(true);
    await store.append('tok-0', 1, [entry(1)]);
  });

  it('close() while stalled does not wait on a reply', async () => {
    const { fake, store } = await fakeAndStore();
    fake.hang();
    await expect(store.get('tok')).rejects.toBeInstanceOf(StoreUnavailableError);
    await store.close();
    expect(store.healthy()).toBe(false);
    await expect(store.get('tok')).rejects.toThrow(/is closed/);
  });
});

describe.skipIf(!redisServerAvailable())('RedisSessionStore: a real Redis paused mid-command', () => {
  it('a timed-out command makes the store unhealthy until the connection is ready again; then it works, data intact', async () => {
    const redis = await startRedis();
    cleanups.push(() => redis.dispose());
    const store = new RedisSessionStore({ url: redis.url, commandTimeoutMs: 300 });
    cleanups.push(() => store.close());
    const admin = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    cleanups.push(() => admin.disconnect());
    expect(await store.whenReady(10_000)).toBe(true);
    const r = record();
    const fence = await store.create(r);
    await store.append(r.edge_token, fence, [entry(1)]);

    await admin.connect();
    await admin.call('CLIENT', 'PAUSE', '5000', 'ALL');
    await expect(store.append(r.edge_token, fence, [entry(2)])).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(store.healthy()).toBe(false);

    // The pause lapses; the client reconnects and is ready again.
    expect(await store.whenReady(20_000)).toBe(true);
    expect(store.healthy()).toBe(true);
    await store.append(r.edge_token, fence, [entry(2)]);
    expect((await store.get(r.edge_token))?.journal.map((e) => e.status_seq)).toEqual([1, 2]);
  });
});
