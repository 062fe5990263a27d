/**
 * A sliced pass (src/transport/sliced-pass.ts: a hub's observer timers, the recorder's tick) on the real
 * event loop: many slow sessions' timers yield to other work between slices, every session is visited once
 * per pass, a tick during a pass starts none, a fault stays with its session, and a retired hub's pass
 * stops.
 */
import { describe, expect, it } from 'vitest';
import { SliceLoop } from '../../src/transport/slice-loop.js';
import { SlicedPass } from '../../src/transport/sliced-pass.js';

function busy(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // one session's telemetry, slowly
  }
}

function context(faults: unknown[] = [], budgetMs?: number) {
  const now = () => performance.now();
  return {
    now,
    fault: (_where: string, err: unknown) => void faults.push(err),
    slices: new SliceLoop(now, budgetMs),
  };
}

const until = (done: () => boolean) =>
  new Promise<void>((resolve) => {
    const check = () => (done() ? resolve() : setTimeout(check, 2));
    check();
  });

const sessions = Array.from({ length: 50 }, (_, i) => i);

/** A pass whose sessions' timers each take half a millisecond, recording the order they ran in. */
function slowPass(visited: number[]): SlicedPass<number> {
  return new SlicedPass<number>(
    'hub_timer',
    (s) => {
      busy(0.5);
      visited.push(s);
    },
    context(),
  );
}

describe('sliced pass', () => {
  it('visits every session once, in slices that let a timer run in between', async () => {
    const visited: number[] = [];
    const pass = slowPass(visited);
    pass.start(sessions);
    expect(visited).toHaveLength(0); // the slices run after the tick, in the turn's shared budget
    await new Promise((resolve) => setImmediate(resolve));
    const first = visited.length;
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThan(sessions.length);
    const atTimer = await new Promise<number>((resolve) => setTimeout(() => resolve(visited.length), 0));
    expect(atTimer).toBeLessThan(sessions.length);
    await until(() => !pass.running);
    expect(visited).toEqual(sessions);
  });

  it('a tick while a pass is under way starts none; the next pass visits everyone again', async () => {
    const visited: number[] = [];
    const pass = slowPass(visited);
    pass.start(sessions);
    pass.start([99]); // ignored: sessions at the end of the list are not skipped
    await until(() => !pass.running);
    expect(visited).toEqual(sessions);
    pass.start([7, 8]);
    await until(() => !pass.running);
    expect(visited.slice(sessions.length)).toEqual([7, 8]);
  });

  it("a session's fault is reported and the other sessions' timers still run", async () => {
    const faults: unknown[] = [];
    const visited: number[] = [];
    const pass = new SlicedPass<number>(
      'hub_timer',
      (s) => {
        if (s === 1) throw new Error('hostile state');
        visited.push(s);
      },
      context(faults, 1_000),
    );
    pass.start([0, 1, 2]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(visited).toEqual([0, 2]);
    expect(faults).toHaveLength(1);
    expect(pass.running).toBe(false);
  });

  it('clear stops the pass (the hub retired)', async () => {
    const visited: number[] = [];
    const pass = slowPass(visited);
    pass.start(sessions);
    await new Promise((resolve) => setImmediate(resolve));
    const before = visited.length;
    expect(before).toBeGreaterThan(0);
    pass.clear();
    expect(pass.running).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(visited).toHaveLength(before);
  });
});
