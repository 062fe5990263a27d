/** The admitted action ids a session keeps (AWP-ACT-001, AWP-ACT-006) in bounded memory. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AdmittedActions, MAX_ADMITTED_ACTIONS } from '../../src/policy/admitted-actions.js';
import { params } from '../property/arbitraries.js';

const WINDOW = 30_000;

describe('admitted action ids', () => {
  it('AWP-ACT-006 an ended id is kept for the world retention, then forgotten', () => {
    const a = new AdmittedActions(WINDOW);
    a.add('a', 0);
    a.end('a', 1_000);
    expect(a.has('a', 1_000 + WINDOW - 1)).toBe(true);
    expect(a.has('a', 1_000 + WINDOW)).toBe(false);
    expect(a.uncertain(1_000 + WINDOW)).toBe(false); // forgotten when the world may forget it too
  });

  it('AWP-ACT-006 a live action keeps its id however long it runs', () => {
    const a = new AdmittedActions(WINDOW);
    a.add('long', 0);
    for (let i = 0; i < 100; i++) {
      a.add(`short-${i}`, i * WINDOW);
      a.end(`short-${i}`, i * WINDOW);
    }
    expect(a.has('long', 100 * WINDOW)).toBe(true);
    expect(a.size).toBeLessThan(5);
  });

  it('holds at most MAX_ADMITTED_ACTIONS ids; an id dropped early makes unknown ids uncertain until it expires', () => {
    const a = new AdmittedActions(WINDOW);
    // 100 actions a millisecond, each ending at once: far more ids within one window than the cap.
    for (let i = 0; i < 100_000; i++) {
      const t = Math.floor(i / 100);
      a.add(`id-${i}`, t);
      a.end(`id-${i}`, t);
    }
    expect(a.size).toBe(MAX_ADMITTED_ACTIONS);
    expect(a.has('id-99999', 999)).toBe(true);
    expect(a.has('id-0', 999)).toBe(false);
    // The last id dropped ended at 959 ms (id 95903): the world may hold it until 959 + WINDOW.
    expect(a.uncertain(959 + WINDOW - 1)).toBe(true);
    expect(a.uncertain(959 + WINDOW)).toBe(false);
  });

  it('past the cap with no ended action, the oldest live id goes and the edge stays uncertain', () => {
    const a = new AdmittedActions(WINDOW);
    for (let i = 0; i <= MAX_ADMITTED_ACTIONS; i++) a.add(`live-${i}`, i);
    expect(a.size).toBe(MAX_ADMITTED_ACTIONS);
    expect(a.has('live-0', 1e12)).toBe(false);
    expect(a.uncertain(1e12)).toBe(true);
  });

  it('an id longer than the schema allows (128) is not remembered', () => {
    const a = new AdmittedActions(WINDOW);
    a.add('x'.repeat(129), 0);
    a.add('y'.repeat(128), 0);
    expect(a.has('x'.repeat(129), 0)).toBe(false);
    expect(a.has('y'.repeat(128), 0)).toBe(true);
  });

  it('AWP-ACT-001 never takes an id the world may still hold for a new one, unless it says it is uncertain', () => {
    const CAPACITY = 16; // small, so that runs go past it
    type Op = { kind: 'add' | 'end'; id: number; dt: number };
    const op = fc.record({
      kind: fc.constantFrom<Op['kind']>('add', 'end'),
      id: fc.nat({ max: 40 }),
      dt: fc.oneof(
        { arbitrary: fc.constant(0), weight: 20 },
        { arbitrary: fc.nat({ max: 50 }), weight: 10 },
        { arbitrary: fc.nat({ max: 2 * WINDOW }), weight: 2 },
      ),
    });
    fc.assert(
      fc.property(fc.array(op, { minLength: 50, maxLength: 300 }), (ops) => {
        const a = new AdmittedActions(WINDOW, CAPACITY);
        // What the world holds: every admitted id, with when it ended (null: live).
        const world = new Map<string, number | null>();
        let now = 0;
        for (const o of ops) {
          now += o.dt;
          const id = `a${o.id}`;
          if (o.kind === 'add') {
            const ended = world.get(id);
            // A new id, or one the world has let go of (admitted anew): live.
            if (ended === undefined || (ended !== null && now >= ended + WINDOW)) world.set(id, null);
            a.add(id, now);
          } else if (world.get(id) === null) {
            world.set(id, now);
            a.end(id, now);
          }
          expect(a.size).toBeLessThanOrEqual(CAPACITY);
          for (const [known, ended] of world) {
            const held = ended === null || now < ended + WINDOW;
            if (held && !a.has(known, now)) expect(a.uncertain(now)).toBe(true);
          }
        }
      }),
      params(300),
    );
  });
});
