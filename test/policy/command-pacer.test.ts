import { describe, expect, it } from 'vitest';
import { CommandPacer, MIN_PACED_RATE_HZ } from '../../src/policy/command-pacer.js';

describe('CommandPacer', () => {
  it('AWP-DAT-003 lets frames through at the granted rate and drops the oldest waiting one', () => {
    const p = new CommandPacer<string>();
    expect(p.offer(1, 10, 0, 'f0')).toBe('send');
    expect(p.offer(1, 10, 10, 'f1')).toBe('held');
    expect(p.offer(1, 10, 20, 'f2')).toBe('replaced'); // f1 dropped: the newest waits
    expect(p.due(40)).toEqual({ frames: [], next: 50 });
    expect(p.due(50)).toEqual({ frames: ['f2'], next: undefined });
    expect(p.offer(1, 10, 160, 'f3')).toBe('send');
  });

  it('passes every frame of a channel sent at its rate, despite jitter', () => {
    const p = new CommandPacer<number>();
    let sent = 0;
    let timer: number | undefined; // what the driver's timer would do
    for (let i = 0; i < 100; i++) {
      const t = i * 10 + (i % 2 === 0 ? 3 : -3);
      if (timer !== undefined && timer <= t) {
        const d = p.due(timer);
        sent += d.frames.length;
        timer = d.next;
      }
      if (p.offer(2, 100, t, i) === 'send') sent++;
      else timer ??= p.due(t).next;
    }
    sent += p.due(2000).frames.length;
    expect(sent).toBe(100); // early frames wait for their slot; none is dropped at the granted rate
  });

  it('paces channels independently', () => {
    const p = new CommandPacer<string>();
    expect(p.offer(1, 10, 0, 'a')).toBe('send');
    expect(p.offer(2, 10, 1, 'b')).toBe('send');
    expect(p.offer(1, 10, 2, 'c')).toBe('held');
  });

  it('a grant below MIN_PACED_RATE_HZ (1e-7 Hz, or no rate at all) is paced at it: a held frame waits at most 1000 s, not months', () => {
    for (const rate of [1e-7, Number.MIN_VALUE, 0, -1, NaN]) {
      const p = new CommandPacer<string>();
      expect(p.offer(1, rate, 0, 'f0')).toBe('send');
      expect(p.offer(1, rate, 1, 'f1')).toBe('held');
      const { frames, next } = p.due(1);
      expect(frames).toEqual([]);
      expect(next).toBe(500_000); // half a period of tolerance, as at any rate
      expect(p.offer(1, rate, 2, 'f2')).toBe('replaced');
      expect(p.due(next!)).toEqual({ frames: ['f2'], next: undefined });
    }
    expect(1000 / MIN_PACED_RATE_HZ).toBe(1_000_000);
  });

  it('a grant at MIN_PACED_RATE_HZ or above is paced as granted; an infinite one not at all', () => {
    const p = new CommandPacer<string>();
    expect(p.offer(1, 0.002, 0, 'a')).toBe('send');
    expect(p.offer(1, 0.002, 1, 'b')).toBe('held');
    expect(p.due(1).next).toBe(250_000);
    expect(p.offer(2, Infinity, 0, 'c')).toBe('send');
    expect(p.offer(2, Infinity, 0, 'd')).toBe('send');
  });

  it("AWP-DAT-003 follows a channel's new grant: a subscribe at another rate paces at that rate from then on", () => {
    const p = new CommandPacer<string>();
    for (let t = 0; t < 500; t += 100) expect(p.offer(1, 10, t, `fast${t}`)).toBe('send'); // 10 Hz
    // Granted 1 Hz now: the first frame goes, the next waits for its slot a second later.
    expect(p.offer(1, 1, 500, 'slow0')).toBe('send');
    expect(p.offer(1, 1, 600, 'slow1')).toBe('held');
    expect(p.due(600).next).toBe(1000);
    expect(p.due(1000)).toEqual({ frames: ['slow1'], next: undefined });
    // Back to 10 Hz.
    expect(p.offer(1, 10, 1100, 'fast-again')).toBe('send');
    expect(p.offer(1, 10, 1200, 'fast-again2')).toBe('send');
  });
});
