/**
 * Issue 13 item 2 (b): observers through three tiers of edges (world <- C <- B <- A) see what an
 * observer of the world itself sees: every channel in seq order, starting on a resync keyframe, the
 * reliable channel without a silent gap, and the same frames (seq and world timestamps) as a direct
 * observer. Each tier serves its observers from one upstream observer session, so the world and each
 * tier's upstream hold one per hub however many observers are at each tier.
 */
import { describe, expect, it } from 'vitest';
import type { RunningDemoWorld } from '../../src/demo/index.js';
import { isResyncKeyframe, ObserverClient, type ChannelLog } from '../fanout/observer-client.js';
import {
  LaggingAgent,
  SLOW_MOVE,
  sleep,
  startArmWorld,
  until,
  useCleanups,
  type WorldSessionView,
} from '../scale/rig.js';
import { census, startTiers, tierCredential, type Tier } from './rig.js';

const SUBSCRIBE = [{ channel: 'state' }, { channel: 'proprio', rate_hz: 20 }];
const LEAF_OBSERVERS = 8;
const MID_OBSERVERS = 3;

function liveWorldObservers(world: RunningDemoWorld, except: string): WorldSessionView[] {
  return [...world.world.sessions.entries()]
    .filter(([id, s]) => id !== except && s.embodiment === null && s.state !== 'closed')
    .map(([, s]) => s);
}

/** Seq gaps not explained by a restart (the frame after the gap is a resync keyframe). */
function silentGaps(log: ChannelLog): { after: number; next: number }[] {
  const out: { after: number; next: number }[] = [];
  for (let i = 1; i < log.count; i++)
    if (log.seq[i]! !== log.seq[i - 1]! + 1 && !isResyncKeyframe(log.flags[i]!))
      out.push({ after: log.seq[i - 1]!, next: log.seq[i]! });
  return out;
}

describe('edges in front of edges: observers at the leaves (issue 13)', () => {
  const cleanup = useCleanups();

  async function observe(tier: Tier | string, i: number, credential: string): Promise<ObserverClient> {
    const url = typeof tier === 'string' ? tier : tier.url();
    const o = await ObserverClient.open(url, {
      kind: i % 2 === 0 ? 'inline' : 'ws',
      credential,
      subscribe: SUBSCRIBE,
      timeoutMs: 10_000,
    });
    cleanup(() => o.close());
    return o;
  }

  it('AWP-EMB-004 AWP-OBS-004 AWP-DAT-001 observers at every tier see the direct frames; one upstream observer session per hub', async () => {
    const world = await startArmWorld(cleanup);
    const rig = await startTiers(cleanup, world.url, { route: { hub_linger_ms: 300 } });
    const [c, b, a] = rig.tiers as [Tier, Tier, Tier];

    // The arm moves, so the reliable state channel carries deltas between keyframes.
    const actor = await LaggingAgent.connect(a.url());
    cleanup(() => actor.close());
    await actor.ok('session.open', { embodiment: 'arm_01', mode: 'streaming' });
    const direct = await observe(world.url, 0, 'none');
    await actor.ok('action.submit', { action_id: 'm-1', type: 'move_to_pose', params: SLOW_MOVE });

    const leaf: ObserverClient[] = [];
    for (let i = 0; i < LEAF_OBSERVERS / 2; i++) leaf.push(await observe(a, i, tierCredential(2, 3)));
    leaf.push(
      ...(await Promise.all(
        Array.from({ length: LEAF_OBSERVERS / 2 }, (_, i) => observe(a, i, tierCredential(2, 3))),
      )),
    );
    // Observers of the middle and central tiers too: they share those tiers' hubs with the tier above.
    const mid = await Promise.all(
      Array.from({ length: MID_OBSERVERS }, (_, i) => observe(b, i, tierCredential(1, 3))),
    );
    const central = await Promise.all(
      Array.from({ length: MID_OBSERVERS }, (_, i) => observe(c, i, tierCredential(0, 3))),
    );
    const everyone = [...leaf, ...mid, ...central];

    await until(
      () => everyone.every((o) => o.log('state').count >= 15 && o.log('proprio').count >= 10),
      15_000,
      'frames of both channels at every observer',
    );

    // The world holds one observer session for all three tiers (plus the direct observer's own).
    expect(liveWorldObservers(world, direct.ready!.session_id as string)).toHaveLength(1);
    const counts = await Promise.all(rig.tiers.map(census));
    expect(counts.map((x) => x.hubConnections)).toEqual([1, 1, 1]);
    // Each tier serves its own observers and one session for the hub of the tier above it.
    expect(counts.map((x) => x.observerSessions)).toEqual([
      MID_OBSERVERS + 1,
      MID_OBSERVERS + 1,
      LEAF_OBSERVERS,
    ]);
    // The actor's relay session passes every tier: one upstream control connection at each.
    expect(counts.map((x) => x.relaySessions)).toEqual([1, 1, 1]);
    console.log(JSON.stringify({ test: 'tiers-observers', census: counts }));

    // The world's frames to the central hub's session are what every tier forwards: an observer of the
    // central tier sees them as the world sent them (seq, timestamps, sizes), and so must every other.
    const reference = new Map<string, Map<number, string>>();
    for (const ch of ['state', 'proprio']) {
      const log = central[0]!.log(ch);
      reference.set(ch, new Map(log.seq.map((s, i) => [s, `${log.ts[i]!}/${log.bytes[i]!}`])));
    }
    for (const [k, o] of [direct, ...everyone].entries()) {
      const who = k === 0 ? 'the direct observer' : `observer ${k - 1}`;
      for (const ch of ['state', 'proprio']) {
        const log = o.log(ch);
        expect(log.orderViolations, `${who} ${ch}: seq order`).toEqual([]);
        if (k === 0) continue; // the world's own first frame: a keyframe, with or without resync
        expect(isResyncKeyframe(log.flags[0]!), `${who} ${ch}: starts on a resync keyframe`).toBe(true);
        const ref = reference.get(ch)!;
        const common = log.seq.filter((s) => ref.has(s));
        expect(common.length, `${who} ${ch}: frames in common with the central tier`).toBeGreaterThan(5);
        for (const [i, s] of log.seq.entries())
          if (ref.has(s)) expect(`${log.ts[i]!}/${log.bytes[i]!}`, `${who} ${ch} seq ${s}`).toBe(ref.get(s));
      }
      expect(silentGaps(o.log('state')), `${who} state: no silent gap`).toEqual([]);
    }

    // Observers leave every tier: each hub closes its upstream session a linger later, tier by tier.
    for (const o of everyone) await o.ok('session.close', {});
    await until(
      () => liveWorldObservers(world, direct.ready!.session_id as string).length === 0,
      10_000,
      "the central tier's hub to close the world's observer session",
    );
    await until(
      async () => (await Promise.all(rig.tiers.map(census))).every((x) => x.hubConnections === 0),
      10_000,
      'every tier to close its hub',
    );
  });

  it('AWP-CTL-008 AWP-EVT-001 an observer dropped at the leaf resumes there: the world events of the gap replayed once, in order, channels restart from resync keyframes', async () => {
    const world = await startArmWorld(cleanup);
    const rig = await startTiers(cleanup, world.url, { route: { hub_linger_ms: 300 } });
    const a = await observe(rig.leaf, 1, tierCredential(2, 3));
    await until(() => a.log('state').count > 5 && a.log('proprio').count > 5, 8000, 'frames at the leaf');
    const token = a.ready!.session_token as string;
    const last = Math.max(...a.statusSeqs());
    const lastSeq = new Map(SUBSCRIBE.map(({ channel }) => [channel, a.log(channel).lastSeq()]));
    a.terminate();
    await rig.leaf.edge.waitLog((l) => l.event === 'observer_suspended', 5000, 'observer_suspended');
    // World events while the observer is away: they cross the three hubs and wait in the leaf's journal.
    world.engageEstop('test');
    await sleep(200);
    world.releaseEstop();
    await sleep(300);

    const b = await ObserverClient.resume(
      rig.leaf.url(),
      { kind: 'inline', credential: tierCredential(2, 3), subscribe: [], timeoutMs: 10_000 },
      token,
      last,
    );
    cleanup(() => b.close());
    expect(b.ready!.session_id).toBe(a.ready!.session_id);
    await b.waitNotification('session.state', (p) => p.reason === 'resumed', 5000);
    const notes = b.received.filter(
      (m) =>
        m.id === undefined &&
        typeof (m.params as Record<string, unknown> | undefined)?.status_seq === 'number',
    );
    const seqs = notes.map((m) => (m.params as { status_seq: number }).status_seq);
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => last + 1 + i));
    const kinds = notes.map((m) => {
      const p = m.params as Record<string, unknown>;
      return `${m.method as string}:${String(p.state ?? p.event)}`;
    });
    expect(kinds).toEqual([
      'session.state:suspended',
      'world.event:e_stop_engaged',
      'world.event:e_stop_released',
      'session.state:active',
    ]);
    await until(
      () => SUBSCRIBE.every(({ channel }) => b.log(channel).count > 0),
      5000,
      'frames after the resume',
    );
    for (const [channel, before] of lastSeq) {
      const log = b.log(channel);
      expect(isResyncKeyframe(log.flags[0]!), `${channel} restarts on a resync keyframe`).toBe(true);
      expect(log.seq[0]!, channel).toBeGreaterThan(before);
      expect(log.orderViolations).toEqual([]);
    }
  });
});
