import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DrainScheduler } from '../../src/transport/drain-scheduler.js';

/** A scheduler on a hand-driven clock and turn queue: each drain costs `costMs`. */
function rig(costMs: number, sliceMs = 4) {
  let clock = 0;
  const turns: (() => void)[] = [];
  const drained: number[] = [];
  let fail: number | undefined;
  const s = new DrainScheduler<number>(
    (t) => {
      clock += costMs;
      drained.push(t);
      if (t === fail) throw new Error(`drain ${t} failed`);
    },
    () => clock,
    sliceMs,
    (run) => turns.push(run),
  );
  return {
    s,
    drained,
    turns,
    failOn: (t: number) => (fail = t),
    /** Runs the next deferred turn; returns how many drains it ran. */
    turn(): number {
      const before = drained.length;
      turns.shift()!();
      return drained.length - before;
    },
  };
}

describe('DrainScheduler', () => {
  it('drains nothing in the event that asked; once per target however often it asks, in order', () => {
    const r = rig(0);
    for (const t of [1, 2, 1, 3, 2]) r.s.request(t);
    expect(r.drained).toEqual([]);
    expect(r.turns).toHaveLength(1);
    r.turn();
    expect(r.drained).toEqual([1, 2, 3]);
    expect(r.turns).toHaveLength(0);
  });

  it('a slice stops at its time budget and the rest runs on later turns', () => {
    const r = rig(0.1, 4); // 0.1 ms a drain: 40 fit a 4 ms slice, checked every 16
    for (let t = 0; t < 200; t++) r.s.request(t);
    const slices: number[] = [];
    while (r.turns.length > 0) slices.push(r.turn());
    expect(slices.reduce((a, b) => a + b, 0)).toBe(200);
    expect(Math.max(...slices)).toBeLessThanOrEqual(48);
    expect(r.drained).toEqual([...Array(200).keys()]);
  });

  it('a forgotten target is not drained; a target that asks during its slice waits for the next', () => {
    const r = rig(0);
    r.s.request(1);
    r.s.request(2);
    r.s.forget(1);
    r.turn();
    expect(r.drained).toEqual([2]);
    r.s.request(2);
    expect(r.s.pending).toBe(1);
    r.turn();
    expect(r.drained).toEqual([2, 2]);
  });

  it('a drain that throws ends its slice, and the others still drain on the next turn', () => {
    const r = rig(0);
    r.failOn(2);
    for (const t of [1, 2, 3]) r.s.request(t);
    expect(() => r.turn()).toThrow('drain 2 failed');
    r.turn();
    expect(r.drained).toEqual([1, 2, 3]);
    expect(r.turns).toHaveLength(0);
  });

  it('every request is drained exactly once after it, whatever the interleaving of requests, forgets and turns', () => {
    const op = fc.oneof(
      fc.record({ k: fc.constant('request' as const), t: fc.integer({ min: 0, max: 5 }) }),
      fc.record({ k: fc.constant('forget' as const), t: fc.integer({ min: 0, max: 5 }) }),
      fc.record({ k: fc.constant('turn' as const) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 80 }), fc.integer({ min: 0, max: 3 }), (ops, cost) => {
        const r = rig(cost, 4);
        const waiting = new Set<number>();
        for (const o of ops) {
          if (o.k === 'request') {
            r.s.request(o.t);
            waiting.add(o.t);
          } else if (o.k === 'forget') {
            r.s.forget(o.t);
            waiting.delete(o.t);
          } else if (r.turns.length > 0) {
            const start = r.drained.length;
            r.turn();
            for (const t of r.drained.slice(start)) expect(waiting.delete(t)).toBe(true);
          }
        }
        while (r.turns.length > 0) {
          const start = r.drained.length;
          r.turn();
          for (const t of r.drained.slice(start)) expect(waiting.delete(t)).toBe(true);
        }
        expect([...waiting]).toEqual([]);
        expect(r.s.pending).toBe(0);
      }),
    );
  });
});
