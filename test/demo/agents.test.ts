/**
 * The demo agents (what `npm start` runs to make the worlds move) reach their goals through the edge, as
 * relay sessions: the arm each pose of its loop (the world's proprio shows the pose), the grid each goal cell.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARM_POSES, startArmAgent } from '../../src/demo/agents/arm-agent.js';
import { AgentConnection } from '../../src/demo/agents/connection.js';
import { GRID_GOALS, startGridAgent } from '../../src/demo/agents/grid-agent.js';
import { ARM_DEFAULTS } from '../../src/demo/config.js';
import { startDemoWorld, type RunningDemoWorld } from '../../src/demo/index.js';
import { AGENT_TOKEN, startEdge, type TestEdge } from '../support/edge.js';

async function until(pred: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!pred() && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
}

describe('demo agents through the edge', () => {
  let arm: RunningDemoWorld | undefined;
  let grid: RunningDemoWorld | undefined;
  let edge: TestEdge | undefined;

  beforeAll(async () => {
    arm = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0 });
    grid = await startDemoWorld({ kind: 'grid', host: '127.0.0.1', port: 0 });
    edge = await startEdge([
      { name: 'arm', path: '/worlds/arm', upstream: arm.url },
      { name: 'grid', path: '/worlds/grid', upstream: grid.url },
    ]);
  });

  afterAll(async () => {
    await edge?.close();
    await arm?.close();
    await grid?.close();
  });

  it('an agent connection waited on for every move adds one close listener, not one per wait', async () => {
    const conn = await AgentConnection.open(edge!.url('/worlds/arm'), AGENT_TOKEN, () => undefined);
    const ws = (conn as unknown as { ws: { listenerCount(event: string): number } }).ws;
    const before = ws.listenerCount('close');
    const waits = Array.from({ length: 50 }, () => conn.whenClosed());
    expect(ws.listenerCount('close')).toBe(before);
    conn.close();
    await Promise.all(waits);
    await conn.whenClosed(); // closed: resolves at once
  });

  it('the arm agent moves arm_01 to one reachable pose after another', async () => {
    const log: string[] = [];
    const agent = startArmAgent({
      url: edge!.url('/worlds/arm'),
      token: AGENT_TOKEN,
      dwellMs: 50,
      log: (l) => log.push(l),
    });
    try {
      await until(() => agent.reached.length >= 3, 30_000);
    } finally {
      await agent.stop();
    }
    expect(agent.reached.length, log.join('\n')).toBeGreaterThanOrEqual(3);
    const [lo, hi] = ARM_DEFAULTS.aabbM;
    agent.reached.forEach((r, i) => {
      expect(r.goal, log.join('\n')).toEqual(ARM_POSES[i]);
      r.goal.forEach((v, k) => {
        expect(v).toBeGreaterThanOrEqual(lo[k]!); // reachable: inside the spatial envelope
        expect(v).toBeLessThanOrEqual(hi[k]!);
        expect(r.observed[k]).toBeCloseTo(v, 3); // the world's own proprio shows the pose reached
      });
    });
    expect(log.filter((l) => l.includes('reconnecting'))).toEqual([]);
  }, 40_000);

  it('the grid agent walks avatar_0 to each goal cell, ticking the lockstep world', async () => {
    const log: string[] = [];
    const agent = startGridAgent({
      url: edge!.url('/worlds/grid'),
      token: AGENT_TOKEN,
      stepMs: 5,
      log: (l) => log.push(l),
    });
    try {
      await until(() => agent.reached.length >= GRID_GOALS.length, 30_000);
    } finally {
      await agent.stop();
    }
    expect(agent.reached.length, log.join('\n')).toBeGreaterThanOrEqual(GRID_GOALS.length);
    agent.reached.slice(0, GRID_GOALS.length).forEach((r, i) => {
      expect(r.goal).toEqual(GRID_GOALS[i]);
      expect(r.observed).toEqual(r.goal); // the world's grid_view shows the avatar on the goal
    });
    expect(log.filter((l) => l.includes('reconnecting'))).toEqual([]);
  }, 40_000);

  it('after a dropped connection an agent resumes its session (the world still holds the embodiment) and moves on', async () => {
    const log: string[] = [];
    const agent = startArmAgent({
      url: edge!.url('/worlds/arm'),
      token: AGENT_TOKEN,
      dwellMs: 50,
      log: (l) => log.push(l),
    });
    try {
      await until(() => agent.reached.length >= 1, 30_000);
      for (const c of [...edge!.edge.ctx.connections]) c.terminate(1001, 'test: dropped');
      await until(() => log.some((l) => l.includes('resumed')), 30_000);
      const before = agent.reached.length;
      await until(() => agent.reached.length >= before + 2, 30_000);
    } finally {
      await agent.stop();
    }
    expect(
      log.filter((l) => l.includes('resumed')),
      log.join('\n'),
    ).toHaveLength(1);
    expect(log.filter((l) => l.includes('opening a new session'))).toEqual([]);
    const last = agent.reached.at(-1)!;
    last.goal.forEach((v, k) => expect(last.observed[k]).toBeCloseTo(v, 3));
  }, 60_000);
});
