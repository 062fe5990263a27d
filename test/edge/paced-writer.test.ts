import { afterEach, describe, expect, it, vi } from 'vitest';
import { PacedWriter } from '../../src/relay/io/paced-writer.js';

afterEach(() => vi.useRealTimers());

describe('PacedWriter', () => {
  it('AWP-DAT-003 writes the newest waiting command frame when its slot comes, and nothing after stop', () => {
    vi.useFakeTimers();
    const written: string[] = [];
    const w = new PacedWriter<string>(
      () => Date.now(),
      (f) => (written.push(f), true),
    );
    expect(w.offer(1, 10, 'f1')).toBe('send'); // the caller writes it
    expect(w.offer(1, 10, 'f2')).toBe('held');
    expect(w.offer(1, 10, 'f3')).toBe('replaced'); // f2 dropped: the newest waits
    vi.advanceTimersByTime(49);
    expect(written).toEqual([]);
    vi.advanceTimersByTime(60);
    expect(written).toEqual(['f3']);
    expect(w.offer(1, 10, 'f4')).toBe('held');
    w.stop();
    vi.advanceTimersByTime(1000);
    expect(written).toEqual(['f3']);
  });

  it('a channel granted 1e-7 Hz holds its frame on one timer until its slot, 500 s away: no timer firing every ms', () => {
    vi.useFakeTimers(); // they turn a delay over 2^31 - 1 ms into 1 ms, as Node does
    const written: string[] = [];
    let looks = 0; // each timer firing reads the clock
    const w = new PacedWriter<string>(
      () => (looks++, Date.now()),
      (f) => (written.push(f), true),
    );
    expect(w.offer(1, 1e-7, 'f1')).toBe('send');
    expect(w.offer(1, 1e-7, 'f2')).toBe('held');
    const armed = looks;
    vi.advanceTimersByTime(10_000);
    expect(looks - armed).toBe(0); // a slot months away overflowed to a 1 ms timer that re-armed itself
    expect(vi.getTimerCount()).toBe(1);
    expect(w.offer(1, 1e-7, 'f3')).toBe('replaced');
    vi.advanceTimersByTime(500_000 - 10_000 - 1);
    expect(written).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(written).toEqual(['f3']);
    expect(vi.getTimerCount()).toBe(0);
  });
});
