/**
 * Properties of the hub's fan-out passes (src/fanout/hub-passes.ts) under arbitrary interleavings of
 * frame arrivals (latest-wins and ordered channels), subscribers changing, and slices of any length:
 * ordered frames reach every subscriber they had, in order, none skipped; latest-wins frames never go
 * backwards, the newest reaches everyone, every frame is either offered or counted superseded for each
 * of its subscribers, and a round serves every subscriber before any twice.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HubPasses } from '../../src/fanout/hub-passes.js';
import type { HubFrame } from '../../src/fanout/keyframe-cache.js';
import type { FrameNote } from '../../src/transport/outbox.js';

const LATEST = [1, 2];
const ORDERED = [7];
const RUNS = 400;
/** More subscribers than a slice's chunk of offers (16): slices end inside passes. */
const SUBSCRIBERS = 40;

type Step =
  { s: 'frame'; channel: number } | { s: 'subscribers'; ids: number[] } | { s: 'slice'; offers: number };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      s: fc.constant('frame' as const),
      channel: fc.constantFrom(...LATEST, ...ORDERED),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      s: fc.constant('subscribers' as const),
      ids: fc.uniqueArray(fc.integer({ min: 0, max: SUBSCRIBERS + 9 }), {
        minLength: 0,
        maxLength: SUBSCRIBERS,
      }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({ s: fc.constant('slice' as const), offers: fc.integer({ min: 1, max: 100 }) }),
  },
);

interface Offer {
  readonly target: number;
  readonly channel: number;
  readonly seq: number;
}

function frame(channel: number, seq: number): HubFrame {
  return { buf: Buffer.alloc(4), channel_id: channel, seq, ts_mono_ns: seq, ts_send_ns: undefined, flags: 0 };
}

function play(steps: readonly Step[]) {
  const offers: Offer[] = [];
  /** Per frame `channel:seq`: subscribers at arrival, and how many were told it was superseded. */
  const added = new Map<string, { targets: readonly number[]; superseded: number }>();
  const passes = new HubPasses<number>({
    offer: (target, f) => offers.push({ target, channel: f.channel_id, seq: f.seq }),
    superseded: (f, _note, n) => (added.get(`${f.channel_id}:${f.seq}`)!.superseded += n),
  });
  let targets: readonly number[] = Array.from({ length: SUBSCRIBERS }, (_, i) => i);
  const seqs = new Map<number, number>();
  const last = new Map<number, { seq: number; targets: readonly number[] }>();
  for (const st of steps) {
    if (st.s === 'subscribers') targets = [...st.ids];
    else if (st.s === 'frame') {
      const seq = (seqs.get(st.channel) ?? 0) + 1;
      seqs.set(st.channel, seq);
      const note: FrameNote = { received_at: 0, channel: String(st.channel) };
      added.set(`${st.channel}:${seq}`, { targets, superseded: 0 });
      if (targets.length > 0) last.set(st.channel, { seq, targets });
      passes.add(frame(st.channel, seq), note, targets, LATEST.includes(st.channel));
    } else {
      const until = offers.length + st.offers;
      passes.run(() => offers.length >= until);
    }
  }
  passes.run(() => false);
  return { offers, added, last, idle: passes.idle };
}

describe('hub fan-out passes', () => {
  it('ordered frames reach every subscriber they had when they arrived, once, in order; latest-wins frames never go back; the newest reaches everyone; every frame is offered or superseded for each of its subscribers', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 120 }), (steps) => {
        const { offers, added, last, idle } = play(steps);
        expect(idle).toBe(true);
        const byTarget = new Map<string, number[]>();
        for (const o of offers) {
          const k = `${o.target}:${o.channel}`;
          byTarget.set(k, [...(byTarget.get(k) ?? []), o.seq]);
        }
        // Never backwards, never twice, on any channel (AWP-DAT-001).
        for (const [k, list] of byTarget)
          for (let i = 1; i < list.length; i++) expect(list[i]!, k).toBeGreaterThan(list[i - 1]!);
        for (const [key, a] of added) {
          const [channel, seq] = key.split(':').map(Number) as [number, number];
          const got = offers.filter((o) => o.channel === channel && o.seq === seq).map((o) => o.target);
          if (ORDERED.includes(channel)) {
            // Exactly the subscribers it had, none skipped (AWP-DAT-002).
            expect(
              [...got].sort((x, y) => x - y),
              key,
            ).toEqual([...a.targets].sort((x, y) => x - y));
          } else {
            expect(got.length + a.superseded, key).toBe(a.targets.length);
            expect(new Set(got).size, key).toBe(got.length);
          }
        }
        // The newest latest-wins frame of each channel reached every subscriber it had.
        for (const channel of LATEST) {
          const l = last.get(channel);
          if (l === undefined) continue;
          const got = offers.filter((o) => o.channel === channel && o.seq === l.seq).map((o) => o.target);
          expect([...got].sort((x, y) => x - y)).toEqual([...l.targets].sort((x, y) => x - y));
        }
      }),
      { numRuns: RUNS },
    );
  });

  it('a round serves every subscriber of a latest-wins channel before any twice, however often newer frames cut passes short', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.constant<Step>({ s: 'frame', channel: 1 }),
            stepArb.filter((s) => s.s === 'slice'),
          ),
          {
            maxLength: 200,
          },
        ),
        (steps) => {
          const { offers } = play(steps);
          const on1 = offers.filter((o) => o.channel === 1).map((o) => o.target);
          // The same subscribers throughout: any SUBSCRIBERS consecutive offers on the channel name
          // SUBSCRIBERS different ones.
          for (let i = 0; i + SUBSCRIBERS <= on1.length; i++)
            expect(new Set(on1.slice(i, i + SUBSCRIBERS)).size).toBe(SUBSCRIBERS);
        },
      ),
      { numRuns: RUNS },
    );
  });
});
