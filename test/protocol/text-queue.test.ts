import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TextQueue } from '../../src/protocol/text-queue.js';
import { numRuns } from '../property/arbitraries.js';

type Op = { push: string } | 'shift' | 'take';

describe('TextQueue', () => {
  it('is a FIFO bounded in characters (each text one more than its length), full for good past the bound', () => {
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ push: fc.string({ maxLength: 6 }) }),
      fc.constant('shift' as const),
      fc.constant('take' as const),
    );
    fc.assert(
      fc.property(fc.nat(40), fc.array(op, { maxLength: 200 }), (max, ops) => {
        const q = new TextQueue(max);
        let model: string[] = [];
        let full = false;
        const used = () => model.reduce((n, t) => n + t.length + 1, 0);
        for (const o of ops) {
          if (o === 'shift') expect(q.shift()).toBe(model.shift());
          else if (o === 'take') {
            expect(q.take()).toEqual(model);
            model = [];
          } else {
            const fits = !full && used() + o.push.length + 1 <= max;
            if (!fits) full = true;
            else model.push(o.push);
            expect(q.push(o.push)).toBe(fits);
          }
          expect(q.length).toBe(model.length);
          expect(q.overflowed).toBe(full);
        }
      }),
      { numRuns: numRuns(200) },
    );
  });

  it('keeps order, and not the spent slots, when pushed and shifted in turns without ever emptying', () => {
    const q = new TextQueue();
    q.push('first');
    let expected = 'first';
    for (let i = 0; i < 100_000; i++) {
      q.push(String(i));
      expect(q.shift()).toBe(expected);
      expected = String(i);
      // The spent slots are dropped once they are half the array (a private field, read to check memory).
      expect((q as unknown as { items: string[] }).items.length).toBeLessThanOrEqual(2048);
    }
    expect(q.take()).toEqual([expected]);
  });
});
