import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { summarise } from '../../src/protocol/latency-stats.js';

describe('latency_stats (AWP-TIM-006)', () => {
  it('takes the sample at floor(q * n) of the sorted samples, clamped to the last', () => {
    const hundred = Array.from({ length: 100 }, (_, i) => 100 - i); // 100..1, unsorted
    expect(summarise(hundred)).toEqual({ count: 100, p50: 51, p95: 96, max: 100 });
    expect(summarise([7])).toEqual({ count: 1, p50: 7, p95: 7, max: 7 });
    expect(summarise([3, 1])).toEqual({ count: 2, p50: 3, p95: 3, max: 3 });
  });

  it('rounds to integers (u53 on the wire) and has nothing to say about no samples', () => {
    expect(summarise([1.4, 2.6])).toEqual({ count: 2, p50: 3, p95: 3, max: 3 });
    expect(summarise([])).toBeUndefined();
  });

  it('orders samples numerically (not as strings) and leaves the caller’s array as it was', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.double({ min: 0, max: 1e12, noNaN: true }).map((x) => x + 0),
          { minLength: 1 },
        ),
        (v) => {
          const before = [...v];
          const sorted = [...v].sort((a, b) => a - b);
          const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
          expect(summarise(v)).toEqual({
            count: v.length,
            p50: Math.round(at(0.5)),
            p95: Math.round(at(0.95)),
            max: Math.round(sorted.at(-1)!),
          });
          expect(v).toEqual(before);
        },
      ),
    );
  });
});
