/**
 * The stream worker's batch cost (src/transport/stream-worker-cost.ts), sans-IO: a turn's batch is full at
 * about BATCH_WORKER_US of the worker's time, as the model estimates it scaled by what the worker reported
 * spending; each batch's hand-over-to-done time is reported once.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  BATCH_WORKER_US as BUDGET_US,
  BATCHES_IN_FLIGHT,
  BatchCost,
} from '../../src/transport/stream-worker-cost.js';

/** One write's estimate in the model (3 us + 1 us/KiB): 4 us for 1 KiB. */
const KIB_WRITE_US = 4;

/** Writes 1 KiB messages until the batch is full; returns how many it took. */
function fill(cost: BatchCost, limit = 100_000): number {
  let n = 0;
  while (!cost.full() && n < limit) {
    cost.write(1024);
    n++;
  }
  return n;
}

describe('BatchCost', () => {
  it('a batch is full at the budget of estimated worker time, publishes counted per member', () => {
    const cost = new BatchCost();
    expect(cost.full()).toBe(false);
    expect(fill(cost)).toBe(BUDGET_US / KIB_WRITE_US);
    cost.handedOver(1, 0);
    expect(cost.full()).toBe(false); // the next batch starts empty
    cost.write(1024, BUDGET_US / KIB_WRITE_US - 1); // a publish to that many members
    expect(cost.full()).toBe(false);
    cost.write(1024);
    expect(cost.full()).toBe(true);
    cost.clear();
    expect(cost.full()).toBe(false);
  });

  it('is behind once BATCHES_IN_FLIGHT batches are handed over and not reported; a report or clear catches up', () => {
    expect(BATCHES_IN_FLIGHT).toBe(2); // the worker has the next batch while it reports the last
    const cost = new BatchCost();
    cost.write(1024);
    cost.handedOver(1, 0);
    expect(cost.behind()).toBe(false);
    cost.write(1024);
    cost.handedOver(2, 1);
    expect(cost.behind()).toBe(true);
    cost.carriedOut(1, 10, 2);
    expect(cost.behind()).toBe(false);
    cost.write(1024);
    cost.handedOver(3, 3);
    expect(cost.behind()).toBe(true);
    cost.carriedOut(3, 10, 4); // one report for two batches
    expect(cost.behind()).toBe(false);
    cost.handedOver(4, 5);
    cost.handedOver(5, 5);
    cost.clear(); // the worker ended
    expect(cost.behind()).toBe(false);
  });

  it('reports each batch carried out once, with its time since hand-over; later ones wait', () => {
    const cost = new BatchCost();
    for (const [seq, at] of [
      [1, 10],
      [2, 12],
      [3, 15],
    ] as const) {
      cost.write(100);
      cost.handedOver(seq, at);
    }
    expect(cost.carriedOut(2, 50, 20)).toEqual([10, 8]);
    expect(cost.carriedOut(2, 0, 21)).toEqual([]);
    expect(cost.carriedOut(3, 20, 30)).toEqual([15]);
  });

  it('scales batches by what the worker spent: twice the model, half the writes; a third, three times', () => {
    for (const [spentPerEstimate, writes] of [
      [2, Math.ceil(BUDGET_US / KIB_WRITE_US / 2)],
      [1 / 3, (BUDGET_US / KIB_WRITE_US) * 3],
      [0.01, (BUDGET_US / KIB_WRITE_US) * 10], // bounded: at most 10x the model's batch
      [1, BUDGET_US / KIB_WRITE_US],
    ] as const) {
      const cost = new BatchCost();
      for (let seq = 1; seq <= 20; seq++) {
        const writes = fill(cost); // the worker spends spentPerEstimate x the model's estimate of them
        cost.handedOver(seq, seq);
        cost.carriedOut(seq, writes * KIB_WRITE_US * spentPerEstimate, seq + 1);
      }
      expect(fill(cost), `spent ${spentPerEstimate}x the estimate`).toBe(writes);
    }
  });

  it('keeps the model until the worker has reported a batch worth of work', () => {
    const cost = new BatchCost();
    cost.write(1024);
    cost.handedOver(1, 0);
    cost.carriedOut(1, 1_000_000, 1); // a tiny batch that took a second (a pause): no evidence yet
    expect(cost.scale).toBe(1);
    expect(fill(cost)).toBe(BUDGET_US / KIB_WRITE_US);
  });

  it('follows a change of machine: the scale moves to the new ratio within a few windows', () => {
    const cost = new BatchCost();
    let seq = 0;
    const run = (ratio: number, batches: number) => {
      for (let i = 0; i < batches; i++) {
        const writes = fill(cost);
        cost.handedOver(++seq, seq);
        cost.carriedOut(seq, writes * KIB_WRITE_US * ratio, seq);
      }
    };
    run(3, 50);
    expect(cost.scale).toBeCloseTo(3, 1);
    run(0.5, 50);
    expect(cost.scale).toBeCloseTo(0.5, 1);
  });

  it('property: whatever the worker reports, the scale stays within [0.1, 10] and every batch is reported once', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            writes: fc.array(fc.record({ bytes: fc.nat(1 << 20), sockets: fc.nat(2000) }), { maxLength: 20 }),
            spentUs: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 1e9, noNaN: true })),
            ackLag: fc.nat(3),
          }),
          { maxLength: 60 },
        ),
        (steps) => {
          const cost = new BatchCost();
          let reported = 0;
          steps.forEach((s, i) => {
            for (const w of s.writes) cost.write(w.bytes, w.sockets);
            cost.handedOver(i + 1, i);
            const waits = cost.carriedOut(Math.max(0, i + 1 - s.ackLag), s.spentUs, i + 1);
            for (const w of waits) expect(w).toBeGreaterThanOrEqual(0);
            reported += waits.length;
            expect(cost.scale).toBeGreaterThanOrEqual(0.1);
            expect(cost.scale).toBeLessThanOrEqual(10);
          });
          reported += cost.carriedOut(steps.length, 0, steps.length).length;
          expect(reported).toBe(steps.length);
        },
      ),
    );
  });
});
