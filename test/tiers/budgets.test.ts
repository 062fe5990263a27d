/**
 * Issue 13: a tier carries every session of the edge above it on that edge's one credential, so the
 * budgets per credential at the tier below bound the whole upper edge: all its relay agents and its
 * observer hub together. Here the leaf relays observers (each its own session below) and the tier below
 * keeps a budget of 2 sessions per credential (the default, 1,024, is the same limit for a larger
 * fleet): two sessions at the leaf fit, a third, from an agent whose own budget at the leaf is far from
 * spent, is refused by the tier below with AWP_EDGE_BUDGET_EXCEEDED (retryable), relayed as is. With
 * TIER_BUDGETS (what README "Edges in front of edges" tells an operator to set) they fit.
 *
 * Every connection of the leaf comes from one address, and the tier below closes handshakes beyond
 * `transport.max_pending_handshakes_per_address` (64) from one address: a burst of agents at the leaf
 * is served because the leaf opens at most 32 handshakes toward one upstream at once
 * (src/transport/dial-gate.ts); the rest wait their turn.
 */
import { describe, expect, it } from 'vitest';
import { metric } from '../hostile/support.js';
import { AwpClient, initializeParams } from '../support/awp-client.js';
import { EDGE_AGENT_TOKEN, startArmWorld, startArmWorldProcess, useCleanups } from '../scale/rig.js';
import { census, startTiers, type Tier } from './rig.js';

const OPEN = { mode: 'streaming', subscribe: [{ channel: 'state' }] };

describe('edges in front of edges: budgets of the upper tier’s credential (issue 13)', () => {
  const cleanup = useCleanups();

  /** `n` agents connected to the leaf (40 at a time: the leaf's own per-address limit is 64). */
  async function connected(leaf: Tier, n: number): Promise<AwpClient[]> {
    const out: AwpClient[] = [];
    while (out.length < n) {
      const batch = Math.min(40, n - out.length);
      out.push(
        ...(await Promise.all(
          Array.from({ length: batch }, async () => {
            const a = await AwpClient.connect(leaf.url(), { credential: EDGE_AGENT_TOKEN }, 10_000);
            cleanup(() => a.close());
            return a;
          }),
        )),
      );
    }
    return out;
  }

  async function agents(leaf: Tier, n: number): Promise<AwpClient[]> {
    const all = await connected(leaf, n);
    await Promise.all(all.map((a) => a.ok('initialize', initializeParams(['text/event+json']), 10_000)));
    return all;
  }

  it('the tier below counts every session of the leaf against the leaf’s one credential', async () => {
    const world = await startArmWorld(cleanup);
    const rig = await startTiers(cleanup, world.url, {
      count: 2,
      budgets: { max_sessions: 2 },
      routeOf: (i) => (i === 1 ? { observers: 'relay' } : {}),
    });
    const [below, leaf] = rig.tiers as [Tier, Tier];
    const [a, b, c] = await agents(leaf, 3);
    await a!.ok('session.open', OPEN, 10_000);
    await b!.ok('session.open', OPEN, 10_000);
    expect((await census(below)).observerSessions).toBe(2);
    const refused = await c!.call('session.open', OPEN, 10_000);
    expect(refused.error).toMatchObject({ code: -32004, message: 'AWP_EDGE_BUDGET_EXCEEDED' });
    expect((refused.error as { data: { retryable: boolean } }).data.retryable).toBe(true);
    await below.edge.waitLog((l) => l.event === 'budget_exceeded', 3000, 'budget_exceeded at the tier below');
    // The leaf itself refused nothing: its agent's budget holds 1,024 sessions.
    expect(leaf.edge.logs.some((l) => l.event === 'budget_exceeded')).toBe(false);
  });

  it('with TIER_BUDGETS the tier below carries them', async () => {
    const world = await startArmWorld(cleanup);
    const rig = await startTiers(cleanup, world.url, {
      count: 2,
      routeOf: (i) => (i === 1 ? { observers: 'relay' } : {}),
    });
    const [below, leaf] = rig.tiers as [Tier, Tier];
    const all = await agents(leaf, 5);
    await Promise.all(all.map((x) => x.ok('session.open', OPEN, 10_000)));
    expect((await census(below)).observerSessions).toBe(5);
  });

  it('a burst of 200 agents at the leaf is served: its handshakes toward the tier below wait their turn', async () => {
    // The world runs in its own process: 200 initializes would stall this one (and its agents' pongs).
    const world = await startArmWorldProcess(cleanup);
    const rig = await startTiers(cleanup, world.url, {
      count: 2,
      routeOf: (i) => (i === 1 ? { observers: 'relay' } : {}),
    });
    const [below, leaf] = rig.tiers as [Tier, Tier];
    const all = await connected(leaf, 200);
    // All at once: each initialize makes the leaf dial the tier below (one upstream connection per agent).
    const outcomes = await Promise.all(
      all.map((a) =>
        a.call('initialize', initializeParams(['text/event+json']), 30_000).then(
          (r) => (r.error === undefined ? 'ok' : JSON.stringify(r.error)),
          (err: unknown) => String(err),
        ),
      ),
    );
    const tally: Record<string, number> = {};
    for (const o of outcomes) tally[o] = (tally[o] ?? 0) + 1;
    expect(tally).toEqual({ ok: 200 });
    expect(metric(await below.metrics(), 'awp_edge_handshakes_closed_total')).toBe(0);
    await Promise.all(all.slice(0, 100).map((a) => a.ok('session.open', OPEN, 30_000)));
    expect((await census(below)).observerSessions).toBe(100);
  });
});
