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
});
