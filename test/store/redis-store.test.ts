/**
 * RedisSessionStore against a real redis-server on loopback (test/support/redis.ts): the shared
 * contract, then what only a distributed store has to get right: persistence across a Redis restart,
 * failing fast (never hanging) while Redis is down, TTLs, key layout, the shared token epoch, hub
 * membership, and credentials kept out of error messages.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CorruptRecordError, FencedError } from '../../src/session/session-store.js';
import { RedisSessionStore, StoreUnavailableError } from '../../src/store/redis-store.js';
import { redisServerAvailable, REDIS_SERVER, startRedis, type TestRedis } from '../support/redis.js';
import { entry, record, sessionStoreContract } from './contract.js';

if (!redisServerAvailable()) {
  describe.skip(`RedisSessionStore: ${REDIS_SERVER} is not installed (apt-get install redis-server)`, () => {
    it.skip('needs redis-server', () => undefined);
  });
} else {
  sessionStoreContract('RedisSessionStore', async () => {
    const redis = await startRedis();
    const store = new RedisSessionStore({ url: redis.url });
    expect(await store.whenReady(5_000)).toBe(true);
    return {
      store,
      dispose: async () => {
        await store.close();
        await redis.dispose();
      },
    };
  });
  redisSpecific();
}

/** Polls `check` every 20 ms until true; fails after `timeoutMs`. */
async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function timed<T>(p: Promise<T>): Promise<{ ms: number; result: PromiseSettledResult<T> }> {
  const start = performance.now();
  const [result] = await Promise.allSettled([p]);
  return { ms: performance.now() - start, result };
}

function redisSpecific(): void {
  describe('RedisSessionStore with appendonly: Redis restarts and outages', () => {
    const password = 'pw-Zq81-secret';
    let redis: TestRedis;
    let store: RedisSessionStore;
    beforeAll(async () => {
      redis = await startRedis({ appendonly: true, password });
      store = new RedisSessionStore({ url: redis.url, connectTimeoutMs: 500 });
      expect(await store.whenReady(5_000)).toBe(true);
    });
    afterAll(async () => {
      await store.close();
      await redis.dispose();
    });

    it('an idle session survives a Redis restart and can be claimed and resumed', async () => {
      const r = record();
      const fence = await store.create(r);
      await store.append(r.edge_token, fence, [entry(1), entry(2, null), entry(3)]);
      await store.acknowledge(r.edge_token, fence, 1);
      await store.setSuspended(r.edge_token, fence, 1_700_000_000_000);
      const before = await store.get(r.edge_token);

      await redis.restart();
      expect(await store.whenReady(5_000)).toBe(true);

      expect(await store.get(r.edge_token)).toEqual(before);
      // Another replica (a fresh client) sees the same session and takes it over.
      const other = new RedisSessionStore({ url: redis.url });
      try {
        expect(await other.whenReady(5_000)).toBe(true);
        expect(await other.get(r.edge_token)).toEqual(before);
        expect(await other.claim(r.edge_token)).toBe(2);
        await expect(store.append(r.edge_token, fence, [entry(4)])).rejects.toBeInstanceOf(FencedError);
      } finally {
        await other.close();
      }
    });

    it('while Redis is down: healthy() is false and every operation rejects in under 2 s, naming no credential', async () => {
      const r = record();
      const fence = await store.create(r);
      await redis.stop();
      await until(() => !store.healthy(), 2_000, 'healthy() to turn false');

      const ops: [string, Promise<unknown>][] = [
        ['create', store.create(record())],
        ['get', store.get(r.edge_token)],
        ['claim', store.claim(r.edge_token)],
        ['append', store.append(r.edge_token, fence, [entry(1)])],
        ['acknowledge', store.acknowledge(r.edge_token, fence, 1)],
        ['setSuspended', store.setSuspended(r.edge_token, fence, null)],
        ['delete', store.delete(r.edge_token)],
        ['epoch', store.epoch()],
      ];
      for (const [op, p] of ops) {
        const { ms, result } = await timed(p);
        expect(ms, op).toBeLessThan(2_000);
        expect(result.status, op).toBe('rejected');
        const err = (result as PromiseRejectedResult).reason as Error;
        expect(err, op).toBeInstanceOf(StoreUnavailableError);
        expect(err.message, op).toMatch(/session store \(redis:\/\/127\.0\.0\.1:\d+\) is unreachable/);
        expect(err.message, op).not.toContain(password);
      }
      expect(store.target).not.toContain(password);

      await redis.restart();
      expect(await store.whenReady(5_000)).toBe(true);
      expect(store.healthy()).toBe(true);
      expect((await store.get(r.edge_token))?.fence).toBe(1);
      expect(await store.claim(r.edge_token)).toBe(2);
    });

    it('a Redis that stops answering mid-command fails the command within the command timeout', async () => {
      const quick = new RedisSessionStore({ url: redis.url, commandTimeoutMs: 300 });
      const admin = new Redis(redis.url, { lazyConnect: true });
      try {
        expect(await quick.whenReady(5_000)).toBe(true);
        await admin.connect();
        await admin.call('CLIENT', 'PAUSE', '1500', 'ALL');
        const { ms, result } = await timed(quick.get(record().edge_token));
        expect(result.status).toBe('rejected');
        expect((result as PromiseRejectedResult).reason).toBeInstanceOf(StoreUnavailableError);
        expect(ms).toBeLessThan(1_000);
      } finally {
        await quick.close();
        admin.disconnect();
      }
    });
  });

  describe('RedisSessionStore without persistence', () => {
    let redis: TestRedis;
    afterEach(async () => {
      await redis.dispose();
    });

    it('after a Redis restart that lost its data, the session is gone (null) and the epoch is new', async () => {
      redis = await startRedis({ appendonly: false });
      const store = new RedisSessionStore({ url: redis.url });
      try {
        expect(await store.whenReady(5_000)).toBe(true);
        const r = record();
        await store.create(r);
        const epoch = await store.epoch();
        await redis.restart();
        expect(await store.whenReady(5_000)).toBe(true);
        expect(await store.get(r.edge_token)).toBeNull();
        expect(await store.claim(r.edge_token)).toBeNull();
        expect((await store.epoch()).equals(epoch)).toBe(false);
      } finally {
        await store.close();
      }
    });

    it('a store pointed at a port where nothing listens is unhealthy and refuses at once', async () => {
      redis = await startRedis();
      const url = redis.url;
      await redis.stop();
      const store = new RedisSessionStore({ url, connectTimeoutMs: 300 });
      try {
        expect(await store.whenReady(300)).toBe(false);
        expect(store.healthy()).toBe(false);
        const { ms, result } = await timed(store.create(record()));
        expect(ms).toBeLessThan(2_000);
        expect(result.status).toBe('rejected');
        expect((result as PromiseRejectedResult).reason).toBeInstanceOf(StoreUnavailableError);
      } finally {
        await store.close();
      }
    });

    it('a wrong password: unhealthy, and neither the error nor the target carries the password', async () => {
      redis = await startRedis({ password: 'right-password' });
      const wrong = redis.url.replace('right-password', 'Wr0ng-P4ss');
      const store = new RedisSessionStore({ url: wrong, connectTimeoutMs: 300 });
      try {
        expect(await store.whenReady(500)).toBe(false);
        const { result } = await timed(store.get(record().edge_token));
        const err = (result as PromiseRejectedResult).reason as Error;
        expect(err).toBeInstanceOf(StoreUnavailableError);
        expect(err.message).not.toContain('Wr0ng-P4ss');
        expect(store.target).toBe(`redis://127.0.0.1:${redis.port}`);
      } finally {
        await store.close();
      }
    });

    it('an invalid URL is refused without echoing it', () => {
      expect(() => new RedisSessionStore({ url: 'redis://user:s3cr3t@[bad' })).toThrow(StoreUnavailableError);
      expect(() => new RedisSessionStore({ url: 'redis://user:s3cr3t@[bad' })).not.toThrow(/s3cr3t/);
      expect(() => new RedisSessionStore({ url: 'http://127.0.0.1:1' })).toThrow(/redis:\/\/ or rediss:\/\//);
    });
  });

  describe('RedisSessionStore keys, TTLs, epoch and hub membership', () => {
    let redis: TestRedis;
    let store: RedisSessionStore;
    let raw: Redis;
    const prefix = 'test-edge:';
    beforeAll(async () => {
      redis = await startRedis();
      store = new RedisSessionStore({ url: redis.url, keyPrefix: prefix, suspendedTtlMarginMs: 5_000 });
      raw = new Redis(redis.url);
      expect(await store.whenReady(5_000)).toBe(true);
    });
    afterAll(async () => {
      await store.close();
      raw.disconnect();
      await redis.dispose();
    });

    const keysOf = (t: string): [string, string] => [`${prefix}{${t}}:rec`, `${prefix}{${t}}:jnl`];

    it('keeps a session in two keys under the prefix', async () => {
      const r = record();
      const fence = await store.create(r);
      await store.append(r.edge_token, fence, [entry(1)]);
      const [rec, jnl] = keysOf(r.edge_token);
      expect(await raw.type(rec)).toBe('hash');
      expect(await raw.type(jnl)).toBe('zset');
      const all = await raw.keys('*');
      expect(all.every((k) => k.startsWith(prefix))).toBe(true);
    });

    it('every key expires a reconnect window + margin after the last lease renewal, attached or suspended', async () => {
      const r = record({ reconnect_window_ms: 20_000 });
      const fence = await store.create(r);
      await store.append(r.edge_token, fence, [entry(1)]);
      const [rec, jnl] = keysOf(r.edge_token);
      const within = async () => {
        for (const k of [rec, jnl]) {
          const ttl = await raw.pttl(k);
          expect(ttl).toBeGreaterThan(19_000);
          expect(ttl).toBeLessThanOrEqual(25_000);
        }
      };
      await within(); // created attached: a lease the serving replica renews
      await store.setSuspended(r.edge_token, fence, Date.now());
      await within();
      await raw.pexpire(rec, 1_000);
      await store.setSuspended(r.edge_token, fence, null); // attached again: the lease is renewed
      await within();
    });

    it('a journal first written while suspended inherits the TTL; a session created suspended has one', async () => {
      const r = record({ reconnect_window_ms: 10_000, suspended_at_ms: 1 });
      const fence = await store.create(r);
      const [rec, jnl] = keysOf(r.edge_token);
      expect(await raw.pttl(rec)).toBeGreaterThan(10_000);
      await store.append(r.edge_token, fence, [entry(1)]);
      const ttl = await raw.pttl(jnl);
      expect(ttl).toBeGreaterThan(10_000);
      expect(ttl).toBeLessThanOrEqual(15_000);
    });

    it('an append to a record whose agent_ack is not an integer is refused as corrupt, not reported done', async () => {
      for (const bad of ['1e300', '12abc', '-1', '', '99999999999999999', '9007199254740992']) {
        const r = record();
        const fence = await store.create(r);
        const [rec, jnl] = keysOf(r.edge_token);
        await raw.hset(rec, 'a', bad);
        await expect(store.append(r.edge_token, fence, [entry(1)]), bad).rejects.toBeInstanceOf(
          CorruptRecordError,
        );
        expect(await raw.zcard(jnl), bad).toBe(0);
      }
      // The largest agent_ack the edge writes still takes appends above it (none fits: nothing stored).
      const r = record();
      const fence = await store.create(r);
      await raw.hset(keysOf(r.edge_token)[0], 'a', '9007199254740991');
      await store.append(r.edge_token, fence, [entry(1)]);
      await raw.hset(keysOf(r.edge_token)[0], 'a', '0');
      await store.append(r.edge_token, fence, [entry(1)]);
      expect((await store.get(r.edge_token))?.journal.map((e) => e.status_seq)).toEqual([1]);
    });

    it('a suspended session whose TTL lapses is gone', async () => {
      const short = new RedisSessionStore({ url: redis.url, keyPrefix: prefix, suspendedTtlMarginMs: 50 });
      try {
        expect(await short.whenReady(5_000)).toBe(true);
        const r = record({ reconnect_window_ms: 100 });
        const fence = await short.create(r);
        await short.append(r.edge_token, fence, [entry(1)]);
        await short.setSuspended(r.edge_token, fence, Date.now());
        await new Promise((resolve) => setTimeout(resolve, 400));
        expect(await short.get(r.edge_token)).toBeNull();
        expect(await raw.exists(...keysOf(r.edge_token))).toBe(0);
      } finally {
        await short.close();
      }
    });

    it('stores with different prefixes do not see each other', async () => {
      const other = new RedisSessionStore({ url: redis.url, keyPrefix: 'other:' });
      try {
        expect(await other.whenReady(5_000)).toBe(true);
        const r = record();
        await store.create(r);
        expect(await other.get(r.edge_token)).toBeNull();
      } finally {
        await other.close();
      }
    });

    it('epoch() is 6 bytes, stable, and the same for every replica', async () => {
      const a = await store.epoch();
      expect(a.length).toBe(6);
      expect((await store.epoch()).equals(a)).toBe(true);
      const replica = new RedisSessionStore({ url: redis.url, keyPrefix: prefix });
      try {
        expect(await replica.whenReady(5_000)).toBe(true);
        expect((await replica.epoch()).equals(a)).toBe(true);
      } finally {
        await replica.close();
      }
      expect(Buffer.from((await raw.getBuffer(`${prefix}epoch`))!).equals(a)).toBe(true);
    });

    it('a long journal is read whole and in order across its decoding slices', async () => {
      const r = record();
      const fence = await store.create(r);
      const n = 20_000;
      for (let from = 1; from <= n; from += 5_000)
        await store.append(
          r.edge_token,
          fence,
          Array.from({ length: 5_000 }, (_, i) => entry(from + i)),
        );
      const got = await store.get(r.edge_token);
      expect(got!.journal.map((e) => e.status_seq)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
      expect(got!.journal[n - 1]).toEqual(entry(n));
    });

    it('close() makes it unhealthy and later operations reject', async () => {
      const s = new RedisSessionStore({ url: redis.url, keyPrefix: prefix });
      expect(await s.whenReady(5_000)).toBe(true);
      await s.close();
      expect(s.healthy()).toBe(false);
      await expect(s.get('x')).rejects.toBeInstanceOf(StoreUnavailableError);
    });
  });
}
