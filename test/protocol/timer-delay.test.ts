import { describe, expect, it } from 'vitest';
import { MAX_TIMER_MS, timerDelay } from '../../src/protocol/timer-delay.js';

describe('timerDelay', () => {
  it('keeps a delay setTimeout honours, cuts a longer one to 2^31 - 1 ms, and makes NaN or a negative one 0', () => {
    expect(MAX_TIMER_MS).toBe(2_147_483_647);
    expect(timerDelay(0)).toBe(0);
    expect(timerDelay(1500.5)).toBe(1500.5);
    expect(timerDelay(MAX_TIMER_MS)).toBe(MAX_TIMER_MS);
    expect(timerDelay(MAX_TIMER_MS + 1)).toBe(MAX_TIMER_MS);
    expect(timerDelay(1e12)).toBe(MAX_TIMER_MS);
    expect(timerDelay(Infinity)).toBe(MAX_TIMER_MS);
    expect(timerDelay(-5)).toBe(0);
    expect(timerDelay(-Infinity)).toBe(0);
    expect(timerDelay(NaN)).toBe(0);
  });
});
