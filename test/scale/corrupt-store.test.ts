/**
 * Issue 12, "every byte from a store is hostile": a session record or journal entry in Redis that the
 * edge did not write (damaged, written by another program, tampered with) is refused at resume with
 * AWP_SESSION_UNKNOWN and counted; the store is not reported down, and the process keeps serving.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { redisServerAvailable, startRedis } from '../support/redis.js';
import { AwpClient, initializeParams } from '../support/awp-client.js';
import { EDGE_AGENT_TOKEN, LaggingAgent, startArmWorld, startReplica, until, useCleanups } from './rig.js';

const PREFIX = 'corrupt-test:';

/** Each way of damaging a stored session, applied to its record (`rec`) and journal (`jnl`) keys. */
const CORRUPTIONS: [string, (raw: Redis, rec: string, jnl: string) => Promise<unknown>][] = [
  ['static record bytes that are not msgpack', (raw, rec) => raw.hset(rec, 'r', Buffer.from([0xc1, 0xff]))],
  [
    'a static record of the wrong shape (route a number, mode unknown)',
    // msgpack fixarray(7): [1, 5, "t", "s", "flying", 1000, 1000]
    (raw, rec) => raw.hset(rec, 'r', Buffer.from('9701059174917396a6666c79696e67cd03e8cd03e8', 'hex')),
  ],
  ['an agent acknowledgement that is not a count', (raw, rec) => raw.hset(rec, 'a', '-3')],
  ['a missing field', (raw, rec) => raw.hdel(rec, 's')],
  [
    'a journal member that is not msgpack',
    (raw, _rec, jnl) => raw.zadd(jnl, 99, Buffer.from([0xc1, 0x00, 0x01])),
  ],
  [
    'a journal entry a million status_seq ahead',
    // msgpack [1000000, "x"]
    (raw, _rec, jnl) => raw.zadd(jnl, 1_000_000, Buffer.from('92ce000f4240a178', 'hex')),
  ],
];

/** The same for an observer session's part of the record (field `o`, issue 13). */
const OBSERVER_CORRUPTIONS: [string, (raw: Redis, rec: string) => Promise<unknown>][] = [
  ['an observer part that is not msgpack', (raw, rec) => raw.hset(rec, 'o', Buffer.from([0xc1]))],
  // msgpack [1, [], null, [], [["state", -1]]]
  [
    'a channel position that is not a count',
    (raw, rec) => raw.hset(rec, 'o', Buffer.from('950190c0909192a57374617465ff', 'hex')),
  ],
  // msgpack [1, [], 0, [], []]: a rate of 0
  ['a rate that is not positive', (raw, rec) => raw.hset(rec, 'o', Buffer.from('950190009090', 'hex'))],
  ['an observer record without its observer part', (raw, rec) => raw.hdel(rec, 'o')],
];

describe.skipIf(!redisServerAvailable())('hostile store contents (issue 12)', () => {
  const cleanup = useCleanups();

  it('a corrupted session record or journal entry is refused at resume (AWP_SESSION_UNKNOWN), counted, and nothing else is affected', async () => {
    const redis = await startRedis();
    cleanup(() => redis.dispose());
    const raw = new Redis(redis.url);
    cleanup(() => raw.disconnect());
    const world = await startArmWorld(cleanup, { watchdogMs: 5000, reconnectWindowMs: 30_000 });
    const routes = [{ name: 'arm', path: '/arm', upstream: world.url, observers: 'relay' as const }];
    const edge = await startReplica(cleanup, { routes, redisUrl: redis.url, keyPrefix: PREFIX });

    // A bystander session that must keep working throughout.
    const bystander = await LaggingAgent.connect(edge.url('/arm'));
    cleanup(() => bystander.close());
    await bystander.ok('session.open', { mode: 'streaming' });

    for (const [label, corrupt] of CORRUPTIONS) {
      const first = await LaggingAgent.connect(edge.url('/arm'));
      cleanup(() => first.close());
      const ready = await first.ok('session.open', { mode: 'streaming' });
      const token = ready.session_token as string;
      const rec = `${PREFIX}{${token}}:rec`;
      const jnl = `${PREFIX}{${token}}:jnl`;
      const suspendedBefore = edge.logs.filter((l) => l.event === 'session_suspended').length;
      first.drop();
      await edge.waitLog(
        (l) => l.event === 'session_suspended' && edge.logs.indexOf(l) >= suspendedBefore,
        5000,
        'the edge to suspend the session',
      );
      // The edge records the suspension in the store after logging it: corrupt only what it wrote.
      await until(async () => ((await raw.hget(rec, 's')) ?? '') !== '', 5000, 'the suspension stored');
      await corrupt(raw, rec, jnl);

      const second = await LaggingAgent.connect(edge.url('/arm'));
      cleanup(() => second.close());
      const answer = await second.call('session.resume', { session_token: token, last_status_seq: 0 });
      expect(answer.error, label).toMatchObject({ code: 2005, message: 'AWP_SESSION_UNKNOWN' });
      expect(JSON.stringify(answer.error), label).toMatch(/cannot read this session's stored record/);
      // The connection is still usable: the agent opens a new session on it.
      const fresh = await second.ok('session.open', { mode: 'streaming' });
      expect(fresh.session_token, label).not.toBe(token);
      await bystander.ok('ping', { origin_ns: 1 });
    }

    const logged = edge.logs.filter((l) => l.msg === 'stored session record unreadable');
    expect(logged).toHaveLength(CORRUPTIONS.length);
    // The log names the defect, never the token.
    for (const l of logged) expect(JSON.stringify(l)).toMatch(/unreadable: /);
    const metrics = await (await fetch(`${edge.adminUrl}/metrics`)).text();
    const line = metrics
      .split('\n')
      .find((l) => l.startsWith('awp_edge_resumes_total{') && l.includes('outcome="record_unreadable"'));
    expect(Number(line?.split(' ').at(-1))).toBe(CORRUPTIONS.length);
    expect(metrics).not.toMatch(/awp_edge_resumes_total\{[^}]*outcome="store_unavailable"[^}]*\} [1-9]/);
    expect(edge.running).toBe(true);
  }, 90_000);

  it("a corrupted observer session's record is refused at resume (AWP_SESSION_UNKNOWN); other observers keep their frames", async () => {
    const redis = await startRedis();
    cleanup(() => redis.dispose());
    const raw = new Redis(redis.url);
    cleanup(() => raw.disconnect());
    const world = await startArmWorld(cleanup);
    const routes = [{ name: 'arm', path: '/arm', upstream: world.url, observers: 'fanout' as const }];
    // Opened at A, resumed at B: B has only the store's copy to go by.
    const replica = () => startReplica(cleanup, { routes, redisUrl: redis.url, keyPrefix: PREFIX });
    const [a, edge] = await Promise.all([replica(), replica()]);
    const observe = async (at = edge): Promise<AwpClient> => {
      const c = await AwpClient.connect(at.url('/arm'), { credential: EDGE_AGENT_TOKEN });
      cleanup(() => c.close());
      await c.ok('initialize', initializeParams(['proprio/json', 'text/event+json']));
      return c;
    };
    const open = { mode: 'streaming', subscribe: [{ channel: 'state', rate_hz: 10 }] };
    const bystander = await observe();
    await bystander.ok('session.open', open);

    for (const [label, corrupt] of OBSERVER_CORRUPTIONS) {
      const first = await observe(a);
      const ready = await first.ok('session.open', open);
      const token = ready.session_token as string;
      const rec = `${PREFIX}{${token}}:rec`;
      await first.waitNotification('obs.frame', () => true, 5000);
      first.drop();
      await until(async () => ((await raw.hget(rec, 's')) ?? '') !== '', 5000, 'the suspension stored');
      await corrupt(raw, rec);

      const second = await observe();
      const answer = await second.call('session.resume', { session_token: token, last_status_seq: 0 });
      expect(answer.error, label).toMatchObject({ code: 2005, message: 'AWP_SESSION_UNKNOWN' });
      const seen = bystander.received.length;
      await bystander.waitNotification('obs.frame', () => true, 5000, seen);
    }
    expect(edge.running && a.running).toBe(true);
  }, 90_000);
});
