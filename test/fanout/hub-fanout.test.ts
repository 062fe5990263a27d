/**
 * The hub's fan-out scheduler (src/fanout/hub-fanout.ts) on the real event loop: a long pass yields to
 * timers and I/O between slices, a fault in one offer is contained and the pass goes on, ordered frames
 * beyond the backlog bound are fanned out at once; and the channel index (hub-passes.ts) treats a channel
 * as latest-wins only when every subscriber takes it so.
 */
import { describe, expect, it } from 'vitest';
import { FanoutScheduler } from '../../src/fanout/hub-fanout.js';
import { indexChannels } from '../../src/fanout/hub-passes.js';
import type { HubFrame } from '../../src/fanout/keyframe-cache.js';
import { SliceLoop } from '../../src/transport/slice-loop.js';
import type { SubscribedChannel } from '../../src/fanout/subscriber.js';

const note = { received_at: 0, channel: 'camera' };

function frame(channel_id: number, seq: number): HubFrame {
  return { buf: Buffer.alloc(8), channel_id, seq, ts_mono_ns: seq, ts_send_ns: undefined, flags: 0 };
}

function busy(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // a slow socket write
  }
}

function context(faults: unknown[] = [], slices = new SliceLoop(() => performance.now())) {
  const counted: { channel: string; outcome: string; n: number }[] = [];
  return {
    slices,
    fault: (_where: string, err: unknown) => void faults.push(err),
    frames: {
      count: (channel: string, outcome: string, _bytes: number, n = 1) =>
        void counted.push({ channel, outcome, n }),
    },
    counted,
  };
}

const targets = Array.from({ length: 100 }, (_, i) => i);

describe('fan-out scheduler', () => {
  it('a pass over many slow subscribers yields to timers between slices, and completes', async () => {
    const served: number[] = [];
    const s = new FanoutScheduler<number>((t) => {
      busy(1);
      served.push(t);
      return 0;
    }, context());
    s.add(frame(1, 1), note, targets, false);
    expect(served).toHaveLength(0); // nothing in the turn the frame arrived in
    const atTimer = await new Promise<number>((resolve) => setTimeout(() => resolve(served.length), 0));
    expect(atTimer).toBeGreaterThan(0);
    expect(atTimer).toBeLessThan(targets.length);
    await new Promise<void>((resolve) => {
      const check = () => (s.idle ? resolve() : setTimeout(check, 5));
      check();
    });
    expect(served).toEqual(targets);
  });

  it('a newer latest-wins frame takes over the rest of the pass; the older one is counted replaced for those it missed', async () => {
    const ctx = context();
    const got: [number, number][] = [];
    const s = new FanoutScheduler<number>((t, f) => {
      busy(1);
      got.push([t, f.seq]);
      return 0;
    }, ctx);
    s.add(frame(2, 1), note, targets, true);
    await new Promise((resolve) => setTimeout(resolve, 0)); // part of the pass ran
    const before = got.length;
    s.add(frame(2, 2), note, targets, true);
    await new Promise<void>((resolve) => {
      const check = () => (s.idle ? resolve() : setTimeout(check, 5));
      check();
    });
    const first = got.filter(([, seq]) => seq === 1).map(([t]) => t);
    const second = got.filter(([, seq]) => seq === 2).map(([t]) => t);
    expect(first.length).toBeGreaterThanOrEqual(before);
    expect(first.length).toBeLessThan(targets.length);
    // The newer frame reaches everyone, starting where the older pass stopped.
    expect([...second].sort((a, b) => a - b)).toEqual(targets);
    expect(second[0]).toBe(first.length % targets.length);
    expect(ctx.counted).toEqual([
      { channel: 'camera', outcome: 'replaced', n: targets.length - first.length },
    ]);
  });

  it('an offer that throws is reported, and the pass goes on to the others', async () => {
    const faults: unknown[] = [];
    const served: number[] = [];
    const s = new FanoutScheduler<number>((t) => {
      if (t === 3) throw new Error('boom');
      served.push(t);
      return 0;
    }, context(faults));
    s.add(frame(1, 1), note, targets.slice(0, 10), false);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(faults).toHaveLength(1);
    expect(served).toEqual([0, 1, 2, 4, 5, 6, 7, 8, 9]);
    expect(s.idle).toBe(true);
  });

  it('ordered frames beyond the backlog bound are fanned out in the turn that brought them', () => {
    const served: number[] = [];
    const s = new FanoutScheduler<number>(
      (_t, f) => {
        served.push(f.seq);
        return 0;
      },
      context(),
      undefined,
      2,
    );
    for (let seq = 1; seq <= 5; seq++) s.add(frame(7, seq), note, [0], false);
    expect(served).toEqual([1, 2, 3]);
  });

  it('work an offer leaves to the engine after the turn counts against the slice budget; a heavy target ends a chunk', async () => {
    const slices: number[][] = [];
    let inTurn = false;
    const s = new FanoutScheduler<number>(
      (t) => {
        if (!inTurn) {
          // The first offer of a turn: the scheduler's next slice is an immediate queued after this one.
          inTurn = true;
          slices.push([]);
          setImmediate(() => (inTurn = false));
        }
        slices[slices.length - 1]!.push(t);
        return 1.5; // e.g. a shard's queued publish: 1.5 ms of the engine's writes after the turn
      },
      context(),
      () => 16, // each target stands for a chunk of subscribers
    );
    s.add(frame(3, 1), note, targets.slice(0, 12), false);
    await new Promise<void>((resolve) => {
      const check = () => (s.idle ? resolve() : setTimeout(check, 1));
      check();
    });
    // 1.5 ms each against a 4 ms budget: three per slice, never all twelve in one turn.
    expect(slices.flat()).toEqual(targets.slice(0, 12));
    expect(Math.max(...slices.map((x) => x.length))).toBeLessThanOrEqual(3);
  });

  it("two hubs' passes share one budget per turn, taking turns", async () => {
    const loop = new SliceLoop(() => performance.now());
    const turns: string[][] = [];
    let inTurn = false;
    const hub = (name: string) =>
      new FanoutScheduler<number>(
        () => {
          if (!inTurn) {
            inTurn = true;
            turns.push([]);
            setImmediate(() => (inTurn = false));
          }
          busy(1);
          turns[turns.length - 1]!.push(name);
          return 0;
        },
        context([], loop),
        () => 16,
      ); // each target ends a chunk (the budget is asked after each)
    const a = hub('a');
    const b = hub('b');
    a.add(frame(1, 1), note, targets.slice(0, 20), false);
    b.add(frame(1, 1), note, targets.slice(0, 20), false);
    await new Promise<void>((resolve) => {
      const check = () => (a.idle && b.idle ? resolve() : setTimeout(check, 2));
      check();
    });
    expect(turns.flat().filter((x) => x === 'a')).toHaveLength(20);
    expect(turns.flat().filter((x) => x === 'b')).toHaveLength(20);
    // One 4 ms budget for both: about four offers of 1 ms per turn, never two hubs' worth (eight).
    expect(Math.max(...turns.map((t) => t.length))).toBeLessThanOrEqual(6);
    // Round robin: the hub that used up a turn goes second in the next, so both are served early on.
    expect(turns.slice(0, 3).flat()).toContain('a');
    expect(turns.slice(0, 3).flat()).toContain('b');
  });

  it('while the engine is behind (a stream worker), passes wait; a newer latest-wins frame supersedes one; they go on once it caught up', async () => {
    const loop = new SliceLoop(() => performance.now());
    let behind = true;
    const caughtUp: (() => void)[] = [];
    loop.follow({ behind: () => behind, full: () => false, onCaughtUp: (fn) => caughtUp.push(fn) });
    const ctx = context([], loop);
    const served: number[] = [];
    const s = new FanoutScheduler<number>((_t, f) => {
      served.push(f.seq);
      return 0;
    }, ctx);
    s.add(frame(1, 1), note, targets.slice(0, 3), true);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(served).toEqual([]); // held: nothing handed to an engine that is behind
    s.add(frame(1, 2), note, targets.slice(0, 3), true);
    behind = false;
    for (const fn of caughtUp) fn();
    await new Promise<void>((resolve) => {
      const check = () => (s.idle ? resolve() : setTimeout(check, 2));
      check();
    });
    expect(served).toEqual([2, 2, 2]); // the newest frame, to each subscriber
    expect(ctx.counted).toContainEqual({ channel: 'camera', outcome: 'replaced', n: 3 });
  });

  it("a turn ends when the engine on another thread says its batch is full, not at this thread's clock", async () => {
    const loop = new SliceLoop(() => performance.now());
    let handed = 0;
    loop.follow({ behind: () => false, full: () => handed >= 5, onCaughtUp: () => undefined });
    const turns: number[] = [];
    const s = new FanoutScheduler<number>(
      () => {
        handed++;
        return 1000; // deferred work on this thread's clock: not counted for an engine elsewhere
      },
      context([], loop),
      () => 16, // each target ends a chunk (the budget is asked after each)
    );
    s.add(frame(1, 1), note, targets.slice(0, 20), false);
    await new Promise<void>((resolve) => {
      const check = () => {
        if (handed > 0) {
          turns.push(handed);
          handed = 0; // the batch left: a new one starts
        }
        if (s.idle) resolve();
        else setImmediate(check);
      };
      setImmediate(check);
    });
    expect(turns.reduce((a, b) => a + b, 0)).toBe(20);
    expect(Math.max(...turns)).toBe(5);
  });

  it('a channel is latest-wins only if every subscriber takes it latest-wins and not per tick', () => {
    const grant = (channel_id: number, latest_wins: boolean, per_tick = false): SubscribedChannel => ({
      name: `c${channel_id}`,
      channel_id,
      rate_hz: per_tick ? null : 10,
      latest_wins,
      per_tick,
      stale_after_ms: 1000,
    });
    const a = { needs: () => [grant(1, true), grant(2, true), grant(3, false)][Symbol.iterator]() };
    const b = { needs: () => [grant(1, true), grant(2, true, true)][Symbol.iterator]() };
    const index = indexChannels([a, b]);
    expect([...index.latestWins]).toEqual([1]);
    expect(index.targets.get(1)).toEqual([a, b]);
    expect(index.targets.get(3)).toEqual([a]);
    expect([...index.needed].sort()).toEqual(['c1', 'c2', 'c3']);
  });
});
