/**
 * Issue 8: the shared Redis session store restarts or goes away under two edge replicas.
 * - Restarted (appendonly) while sessions are idle: the sessions were persisted and resume at
 *   either replica.
 * - Stopped: a resume or an open gets the edge's retryable JSON-RPC error (-32003
 *   AWP_EDGE_STORE_UNAVAILABLE) at once, /readyz is 503, nothing hangs or crashes; once Redis is
 *   back, readiness returns and opens and resumes work again.
 */
import { describe, expect, it } from 'vitest';
import type { RunningDemoWorld } from '../../src/demo/index.js';
import type { AwpClient, Json } from '../support/awp-client.js';
import { httpStatus, type EdgeProcess } from '../support/edge-process.js';
import { redisServerAvailable, startRedis } from '../support/redis.js';
import {
  LaggingAgent,
  SLOW_MOVE,
  range,
  seqOf,
  replayedOf,
  sequencedOf,
  sleep,
  startArmWorld,
  startReplica,
  until,
  useCleanups,
  worldSession,
} from './rig.js';

/** An error answer must come at once, not after a client-side timeout. */
const PROMPT_MS = 2500;

interface Opened {
  readonly client: AwpClient;
  readonly ready: Json;
}

describe.skipIf(!redisServerAvailable())(
  'scale-out: the shared Redis store restarts or is down (issue 8)',
  () => {
    const cleanup = useCleanups();

    async function open(edge: EdgeProcess, params: Json): Promise<Opened> {
      const client = await LaggingAgent.connect(edge.url('/arm'));
      cleanup(() => client.close());
      const ready = await client.ok('session.open', params);
      return { client, ready };
    }

    /** Resumes `s` at `edge` with what it received; checks the replay and returns the new connection. */
    async function resume(r: { world: RunningDemoWorld }, edge: EdgeProcess, s: Opened): Promise<AwpClient> {
      const last = s.client.statusSeqs().at(-1) ?? 0;
      const client = await LaggingAgent.connect(edge.url('/arm'));
      cleanup(() => client.close());
      const result = await client.ok('session.resume', {
        session_token: s.ready.session_token,
        last_status_seq: last,
      });
      expect(result.session_id).toBe(s.ready.session_id);
      expect(result.session_token).toBe(s.ready.session_token);
      const replayTo = result.replay_to_status_seq as number;
      await client.waitNotification('session.state', (p) => p.reason === 'resumed');
      expect(replayedOf(client).map(seqOf)).toEqual(range(last + 1, replayTo + 1));
      expect(worldSession(r.world, s.ready.session_id as string).state).toBe('active');
      return client;
    }

    async function timedCall(
      client: AwpClient,
      method: string,
      params: Json,
    ): Promise<{ ms: number; answer: Json }> {
      const t0 = performance.now();
      const answer = await client.call(method, params, PROMPT_MS);
      return { ms: performance.now() - t0, answer };
    }

    function expectStoreUnavailable(answer: Json): void {
      expect(answer.error, JSON.stringify(answer)).toMatchObject({
        code: -32003,
        message: 'AWP_EDGE_STORE_UNAVAILABLE',
        data: { retryable: true },
      });
    }

    it('idle sessions survive a Redis restart (appendonly) and resume at either replica; while Redis is down, opens and resumes fail fast with -32003 and /readyz is 503', async () => {
      const redis = await startRedis({ appendonly: true });
      cleanup(() => redis.dispose());
      const world = await startArmWorld(cleanup, { reconnectWindowMs: 30_000 });
      // Observers relayed one to one: each is a real upstream session that can resume anywhere.
      const routes = [{ name: 'arm', path: '/arm', upstream: world.url, observers: 'relay' as const }];
      const [a, b] = await Promise.all([
        startReplica(cleanup, { routes, redisUrl: redis.url }),
        startReplica(cleanup, { routes, redisUrl: redis.url }),
      ]);
      const r = { world };

      // Three sessions through A: one acting (with an action finished), two observers.
      const acting = await open(a, { embodiment: 'arm_01', mode: 'streaming' });
      await acting.client.ok('action.submit', {
        action_id: 'a-1',
        type: 'move_to_pose',
        params: { pose: { frame: 'base', p_m: [0, 0.05, 0.4], q: [0, 0, 0, 1] }, max_velocity_mps: 0.4 },
      });
      await acting.client.waitNotification(
        'action.status',
        (p) => p.action_id === 'a-1' && p.state === 'completed',
        5000,
      );
      const observers = [await open(a, { mode: 'streaming' }), await open(a, { mode: 'streaming' })];
      const sessions = [acting, ...observers];
      for (const s of sessions) s.client.drop();
      await until(
        () => sessions.every((s) => worldSession(world, s.ready.session_id as string).state === 'suspended'),
        3000,
        'the world to suspend every session',
      );
      await a.waitLog(
        (l) => l.event === 'session_suspended' && l.session_id === observers[1]!.ready.session_id,
        2000,
        'A to suspend the sessions',
      );

      // Redis restarts (same port and data dir): the sessions were persisted.
      await redis.restart();
      await until(
        async () => (await a.readyz()) === 200 && (await b.readyz()) === 200,
        8000,
        'both replicas ready again',
      );
      const resumedActing = await resume(r, a, acting);
      const resumedObserver = await resume(r, b, observers[0]!);
      const third = await resume(r, b, observers[1]!);
      // Control works after the restart.
      await resumedActing.ok('action.submit', {
        action_id: 'a-2',
        type: 'move_to_pose',
        params: { pose: { frame: 'base', p_m: [0, 0, 0.4], q: [0, 0, 0, 1] }, max_velocity_mps: 0.4 },
      });
      await resumedActing.waitNotification(
        'action.status',
        (p) => p.action_id === 'a-2' && p.state === 'completed',
        5000,
      );

      // One session suspended again (held in Redis), then Redis goes away.
      third.drop();
      await until(
        () => worldSession(world, observers[1]!.ready.session_id as string).state === 'suspended',
        3000,
        'the world to suspend it',
      );
      await b.waitLog(
        (l) => l.event === 'session_suspended' && l.session_id === observers[1]!.ready.session_id,
        2000,
        'B to suspend it',
      );
      await redis.stop();
      await until(
        async () => (await a.readyz()) === 503 && (await b.readyz()) === 503,
        3000,
        '/readyz to turn 503 on both replicas',
      );

      const timings: Record<string, number> = {};
      for (const [name, edge] of [
        ['a', a],
        ['b', b],
      ] as const) {
        const client = await LaggingAgent.connect(edge.url('/arm'));
        cleanup(() => client.close());
        const opening = await timedCall(client, 'session.open', { mode: 'streaming' });
        expectStoreUnavailable(opening.answer);
        expect(opening.ms).toBeLessThan(PROMPT_MS);
        timings[`open_refused_at_${name}_ms`] = Math.round(opening.ms);
        // The connection stays usable: the agent may retry on it.
        const resuming = await timedCall(client, 'session.resume', {
          session_token: observers[1]!.ready.session_token,
          last_status_seq: 0,
        });
        expectStoreUnavailable(resuming.answer);
        expect(resuming.ms).toBeLessThan(PROMPT_MS);
        timings[`resume_refused_at_${name}_ms`] = Math.round(resuming.ms);
        expect(client.closed).toBeNull();
      }
      // Live sessions go on without the store (they cannot be journalled durably meanwhile).
      await resumedObserver.ok('ping', { origin_ns: 1 });
      expect(a.running && b.running).toBe(true);
      expect(await httpStatus(`${a.adminUrl}/healthz`)).toBe(200);
      expect(await httpStatus(`${b.adminUrl}/healthz`)).toBe(200);

      // Redis is back: readiness returns, the suspended session resumes, opens work.
      await redis.restart();
      const back = performance.now();
      await until(
        async () => (await a.readyz()) === 200 && (await b.readyz()) === 200,
        8000,
        'both replicas ready again',
      );
      timings.ready_again_after_restart_ms = Math.round(performance.now() - back);
      await resume(r, a, { client: third, ready: observers[1]!.ready });
      const fresh = await open(b, { mode: 'streaming' });
      expect(typeof fresh.ready.session_token).toBe('string');
      console.log(JSON.stringify({ test: 'redis-outage', ...timings }));
      expect(a.stderr).not.toMatch(/TypeError|RangeError|Unhandled/);
      expect(b.stderr).not.toMatch(/TypeError|RangeError|Unhandled/);
    });

    it('AWP-CTL-010 statuses that could not be journalled during a Redis outage are never acknowledged upstream: after a failover they are replayed, not lost', async () => {
      const redis = await startRedis({ appendonly: true });
      cleanup(() => redis.dispose());
      const world = await startArmWorld(cleanup);
      const routes = [{ name: 'arm', path: '/arm', upstream: world.url }];
      const [a, b] = await Promise.all([
        startReplica(cleanup, { routes, redisUrl: redis.url }),
        startReplica(cleanup, { routes, redisUrl: redis.url }),
      ]);
      const client = await LaggingAgent.connect(a.url('/arm'));
      cleanup(() => client.close());
      const ready = await client.ok('session.open', { embodiment: 'arm_01', mode: 'streaming' });
      const sessionId = ready.session_id as string;
      const agent = new LaggingAgent(client, 0);
      cleanup(() => agent.stop());
      agent.startPinging(150);
      await client.ok('action.submit', { action_id: 'a-1', type: 'move_to_pose', params: SLOW_MOVE });
      await client.waitNotification(
        'action.status',
        (p) => p.action_id === 'a-1' && p.progress !== undefined && (p.status_seq as number) >= 6,
        3000,
      );
      // The agent gets busy: it keeps pinging but acknowledges nothing further.
      await sleep(200);
      agent.freeze();
      const processed = agent.processed;

      // Redis goes away for a moment while statuses flow: they reach the agent but not the journal.
      const downFrom = client.statusSeqs().at(-1)!;
      await redis.stop();
      await client.waitNotification('action.status', (p) => (p.status_seq as number) >= downFrom + 2, 2000);
      await redis.restart();
      await until(async () => (await a.readyz()) === 200, 8000, 'A ready again');
      // Statuses journalled again after the outage, and the agent's pings carry the edge's
      // acknowledgement upstream.
      const upFrom = client.statusSeqs().at(-1)!;
      await client.waitNotification('action.status', (p) => (p.status_seq as number) >= upFrom + 3, 3000);
      await sleep(400);
      const worldAcked = worldSession(world, sessionId).acked;

      a.kill('SIGKILL');
      await client.waitClosed(3000);
      agent.stop();
      const again = await LaggingAgent.connect(b.url('/arm'));
      cleanup(() => again.close());
      const resumed = await again.ok('session.resume', {
        session_token: ready.session_token,
        last_status_seq: processed,
      });
      const replayTo = resumed.replay_to_status_seq as number;
      await again.waitNotification('session.state', (p) => p.reason === 'resumed', 5000);
      console.log(
        JSON.stringify({
          test: 'journal-gap',
          processed,
          redis_down_after: downFrom,
          redis_up_at: upFrom,
          world_acknowledged: worldAcked,
          replay_to_status_seq: replayTo,
        }),
      );
      // Replayed statuses through replay_to_status_seq, then the live session.state (resumed), then
      // possibly live statuses already (the action is still moving): all without a gap.
      const sequenced = sequencedOf(again);
      const seqs = sequenced.map(seqOf);
      const resumedAt = sequenced.findIndex(
        (m) => m.method === 'session.state' && (m.params as { reason?: string }).reason === 'resumed',
      );
      expect(seqs.slice(0, resumedAt)).toEqual(range(processed + 1, replayTo));
      expect(seqs[resumedAt]).toBe(replayTo + 1);
      expect(seqs).toEqual(range(processed + 1, processed + seqs.length));
    });

    it('AWP-SES-008 a Redis restart that lost its data: a resume is answered AWP_SESSION_UNKNOWN (as after an edge restart), and new sessions open', async () => {
      const redis = await startRedis({ appendonly: false });
      cleanup(() => redis.dispose());
      const world = await startArmWorld(cleanup, { reconnectWindowMs: 30_000 });
      const routes = [{ name: 'arm', path: '/arm', upstream: world.url, observers: 'relay' as const }];
      const [a, b] = await Promise.all([
        startReplica(cleanup, { routes, redisUrl: redis.url }),
        startReplica(cleanup, { routes, redisUrl: redis.url }),
      ]);
      const lost = await open(a, { mode: 'streaming' });
      lost.client.drop();
      await a.waitLog((l) => l.event === 'session_suspended', 2000, 'A to suspend the session');

      await redis.restart(); // no appendonly: every session and the shared token epoch are gone
      await until(
        async () => (await a.readyz()) === 200 && (await b.readyz()) === 200,
        8000,
        'both replicas ready again',
      );
      // Let the replicas notice (they re-read the shared epoch about once a second).
      await sleep(1500);
      for (const edge of [a, b]) {
        const client = await LaggingAgent.connect(edge.url('/arm'));
        cleanup(() => client.close());
        const { ms, answer } = await timedCall(client, 'session.resume', {
          session_token: lost.ready.session_token,
          last_status_seq: 0,
        });
        expect(ms).toBeLessThan(PROMPT_MS);
        expect(answer.error, JSON.stringify(answer)).toMatchObject({
          code: 2005,
          message: 'AWP_SESSION_UNKNOWN',
        });
        // The agent treats the session as closed and opens a new one, on the same connection.
        const fresh = await client.ok('session.open', { mode: 'streaming' });
        expect(fresh.session_token).not.toBe(lost.ready.session_token);
      }
    });
  },
);
