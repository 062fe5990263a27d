/**
 * Issue 13: observer sessions (served by the edge's hubs) resume at any replica through the shared
 * store. Replica A gets SIGTERM with 100 observers; it stores each session (journal, subscriptions,
 * channel positions) and closes it (1001) spread over the drain window; each observer resumes at
 * replica B, which has never seen it: every missed status_seq is replayed exactly once, in order, and
 * the channel restarts from a resync keyframe whose seq continues above what A delivered.
 */
import { describe, expect, it } from 'vitest';
import { AwpClient, initializeParams, type Json } from '../support/awp-client.js';
import { ObserverClient } from '../fanout/observer-client.js';
import type { EdgeProcess } from '../support/edge-process.js';
import { redisServerAvailable, startRedis } from '../support/redis.js';
import { range, startArmWorldProcess, startReplica, until, useCleanups } from './rig.js';

const OBSERVERS = 100;
const WINDOW_MS = 2000;
const SETUP_CONCURRENCY = 25;
const CREDENTIALS = range(0, OBSERVERS - 1).map((i) => `observer-drain-${i}-credential`);
const FLAG_RESYNC = 8;

interface Observer {
  readonly index: number;
  readonly first: AwpClient;
  readonly ready: Json;
  closeCode?: number;
  second?: AwpClient;
  /** What went wrong at the resume, if anything. */
  failure?: string;
}

function frames(c: AwpClient): { seq: number; flags: number }[] {
  return c.received
    .filter((m) => m.method === 'obs.frame')
    .map((m) => m.params as { seq: number; flags: number });
}

describe.skipIf(!redisServerAvailable())('scale-out: observer sessions through a drain (issue 13)', () => {
  const cleanup = useCleanups();

  /** Redis, the demo arm world in its own process, and two replicas of its route (observers: fanout). */
  async function twoReplicas(drainWindowMs?: number): Promise<[EdgeProcess, EdgeProcess]> {
    const redis = await startRedis();
    cleanup(() => redis.dispose());
    const world = await startArmWorldProcess(cleanup);
    const routes = [{ name: 'arm', path: '/arm', upstream: world.url, observers: 'fanout' as const }];
    const replica = () =>
      startReplica(cleanup, {
        routes,
        redisUrl: redis.url,
        agentTokens: CREDENTIALS,
        ...(drainWindowMs !== undefined && { drainWindowMs }),
      });
    return Promise.all([replica(), replica()]);
  }

  it('AWP-CTL-008 100 observers move to the other replica: no status_seq lost or repeated, every channel resyncs', async () => {
    const [a, b] = await twoReplicas(WINDOW_MS);

    const observers: Observer[] = [];
    for (let start = 0; start < OBSERVERS; start += SETUP_CONCURRENCY) {
      const batch = range(start, Math.min(OBSERVERS, start + SETUP_CONCURRENCY) - 1).map(async (index) => {
        const first = await AwpClient.connect(a.url('/arm'), { credential: CREDENTIALS[index]! });
        cleanup(() => first.close());
        await first.ok('initialize', initializeParams(['proprio/json', 'text/event+json']));
        const ready = await first.ok('session.open', {
          mode: 'streaming',
          subscribe: [{ channel: 'state', rate_hz: 10 }],
        });
        await first.waitNotification('obs.frame', () => true, 10_000);
        return { index, first, ready };
      });
      observers.push(...(await Promise.all(batch)));
    }
    expect(new Set(observers.map((o) => o.ready.session_id)).size).toBe(OBSERVERS);

    const resumeAtB = async (o: Observer): Promise<void> => {
      const before = o.first.statusSeqs();
      const last = before.at(-1) ?? 0;
      const second = await AwpClient.connect(b.url('/arm'), { credential: CREDENTIALS[o.index]! });
      o.second = second;
      cleanup(() => second.close());
      await second.ok('initialize', initializeParams(['proprio/json', 'text/event+json']));
      const result = await second.ok(
        'session.resume',
        { session_token: o.ready.session_token, last_status_seq: last },
        10_000,
      );
      if (result.session_id !== o.ready.session_id) throw new Error(`resumed ${String(result.session_id)}`);
      const granted = (result.granted as { channels: { channel: string }[] }).channels.map((c) => c.channel);
      if (granted.join() !== 'state') throw new Error(`granted at B: ${JSON.stringify(granted)}`);
      await second.waitNotification('session.state', (p) => p.reason === 'resumed', 10_000);
      // Every status_seq once, in order, across both replicas.
      const all = [...before, ...second.statusSeqs()];
      if (JSON.stringify(all) !== JSON.stringify(range(1, all.length)))
        throw new Error(`status_seq across replicas: ${JSON.stringify(all)}`);
      if (!second.statusSeqs().includes(result.replay_to_status_seq as number))
        throw new Error(`replay did not reach ${String(result.replay_to_status_seq)}`);
      // The channel restarts from a resync keyframe, numbered on above what A delivered.
      await second.waitNotification('obs.frame', () => true, 10_000);
      const [restart] = frames(second);
      const lastAtA = frames(o.first).at(-1)!.seq;
      if ((restart!.flags & FLAG_RESYNC) === 0)
        throw new Error('the first frame at B is not a resync keyframe');
      if (restart!.seq <= lastAtA) throw new Error(`seq ${restart!.seq} at B after ${lastAtA} at A`);
      const seqs = frames(second).map((f) => f.seq);
      if (seqs.some((s, i) => i > 0 && s <= seqs[i - 1]!))
        throw new Error(`seq not increasing: ${seqs.join()}`);
    };
    const moved = observers.map(
      (o) =>
        new Promise<void>((done) => {
          o.first.ws.once('close', (code: number) => {
            o.closeCode = code;
            resumeAtB(o).then(
              () => done(),
              (err: unknown) => {
                o.failure = String(err);
                done();
              },
            );
          });
        }),
    );

    a.kill('SIGTERM');
    await a.exited;
    await Promise.race([
      Promise.all(moved),
      new Promise((_, reject) =>
        setTimeout(() => reject(new Error('observers still resuming 20 s after SIGTERM')), 20_000),
      ),
    ]);
    expect(observers.filter((o) => o.closeCode !== 1001).map((o) => o.closeCode)).toEqual([]);
    expect(observers.filter((o) => o.failure !== undefined).map((o) => `${o.index}: ${o.failure}`)).toEqual(
      [],
    );
    // B serves them all from one upstream session (its hub), and they stay live there.
    await until(
      () => b.logs.filter((l) => l.event === 'hub_ready').length === 1,
      5000,
      'B to open one hub session',
    );
    for (const o of observers.slice(0, 5)) {
      const seen = o.second!.received.length;
      await o.second!.waitNotification('obs.frame', () => true, 5000, seen);
      expect((await o.second!.ok('ping', { origin_ns: 7 })).origin_ns).toBe(7);
    }
  }, 120_000);

  it('AWP-TRN-008 AWP-TRN-012 observers on ws stream connections move too: the stream at the other replica starts from a resync keyframe', async () => {
    const [a, b] = await twoReplicas(500);
    const options = { kind: 'ws' as const, credential: CREDENTIALS[0]!, subscribe: [{ channel: 'state' }] };
    const first = await Promise.all(range(1, 5).map(() => ObserverClient.open(a.url('/arm'), options)));
    for (const o of first) cleanup(() => o.terminate());
    const state = (o: ObserverClient) => o.channels.get(o.ids.get('state')!);
    await until(
      () => first.every((o) => (state(o)?.streamed.filter(Boolean).length ?? 0) > 0),
      10_000,
      'streamed frames at A',
    );
    a.kill('SIGTERM');
    await Promise.all(first.map((o) => o.waitClosed(5000)));
    for (const o of first) expect(o.closed?.code).toBe(1001);
    const second = await Promise.all(
      first.map((o) =>
        ObserverClient.resume(
          b.url('/arm'),
          options,
          o.ready!.session_token as string,
          o.statusSeqs().at(-1) ?? 0,
        ),
      ),
    );
    for (const o of second) cleanup(() => o.terminate());
    await until(
      () => second.every((o) => (state(o)?.streamed.filter(Boolean).length ?? 0) > 0),
      10_000,
      'streamed frames at B',
    );
    second.forEach((o, i) => {
      const log = state(o)!;
      const at = log.streamed.indexOf(true);
      expect(log.flags[at]! & FLAG_RESYNC).toBe(FLAG_RESYNC);
      expect(log.seq[at]).toBeGreaterThan(state(first[i]!)!.lastSeq());
      expect(log.orderViolations).toEqual([]);
    });
  }, 60_000);

  it('AWP-SES-010 a resume at another replica takes the session over: the first replica lets go of it', async () => {
    const [a, b] = await twoReplicas();
    const open = async (url: string): Promise<AwpClient> => {
      const c = await AwpClient.connect(url, { credential: CREDENTIALS[0]! });
      cleanup(() => c.close());
      await c.ok('initialize', initializeParams(['proprio/json', 'text/event+json']));
      return c;
    };
    const first = await open(a.url('/arm'));
    const ready = await first.ok('session.open', { mode: 'streaming', subscribe: [{ channel: 'state' }] });
    await first.waitNotification('obs.frame', () => true, 10_000);
    // The observer's first connection is still up at A when it resumes at B (its loss went unseen).
    const second = await open(b.url('/arm'));
    const last = first.statusSeqs().at(-1) ?? 0;
    await second.ok('session.resume', { session_token: ready.session_token, last_status_seq: last });
    await second.waitNotification('obs.frame', () => true, 10_000);
    // A's next write to the store is fenced: it closes its connection, and leaves the stored session be.
    expect(await first.waitClosed(10_000)).toEqual({
      code: 1001,
      reason: 'session resumed at another replica',
    });
    await until(
      () => a.logs.some((l) => l.event === 'observer_resumed_elsewhere'),
      5000,
      'A to log that it let go',
    );
    const seen = second.received.length;
    await second.waitNotification('obs.frame', () => true, 5000, seen);
    second.drop();
    // The session is still in the store: it resumes at A now.
    const third = await open(a.url('/arm'));
    const resumed = await third.ok('session.resume', {
      session_token: ready.session_token,
      last_status_seq: second.statusSeqs().at(-1) ?? last,
    });
    expect(resumed.session_id).toBe(ready.session_id);
    await third.waitNotification('obs.frame', () => true, 10_000);
  }, 60_000);
});
