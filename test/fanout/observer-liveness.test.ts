/**
 * An observer session's clocks (src/fanout/observer-liveness.ts), sans-IO: the edge's heartbeat pings
 * (AWP-SAF-001), session.telemetry (AWP-TIM-006) and silence (AWP-SAF-002) over arbitrary timer ticks.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ObserverLiveness, TELEMETRY_MS } from '../../src/fanout/observer-liveness.js';
import { params } from '../property/arbitraries.js';

/** Runs the session's timers as observer-session.ts does at each tick; returns when each went out. */
function run(heartbeatMs: number, gaps: readonly number[]) {
  const live = new ObserverLiveness();
  live.heartbeatMs = heartbeatMs;
  live.attached(0);
  const pings: number[] = [];
  const telemetry: number[] = [];
  let now = 0;
  for (const gap of gaps) {
    now += gap;
    if (live.pingDue(now)) pings.push(now);
    if (live.telemetryDue(now) !== null) telemetry.push(now);
  }
  return { pings, telemetry, end: now };
}

const spacing = (at: readonly number[]) => at.map((t, i) => t - (i === 0 ? 0 : at[i - 1]!));

describe('observer liveness', () => {
  it('AWP-SAF-001 AWP-TIM-006 pings every heartbeat interval and telemetry every second, each at the first tick due', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 100, max: 10_000 }),
        fc.array(fc.integer({ min: 1, max: 300 }), { minLength: 50, maxLength: 400 }),
        (heartbeatMs, gaps) => {
          const { pings, telemetry, end } = run(heartbeatMs, gaps);
          const longest = Math.max(...gaps);
          for (const d of spacing(pings)) {
            expect(d).toBeGreaterThanOrEqual(heartbeatMs);
            expect(d).toBeLessThan(heartbeatMs + longest);
          }
          expect(end - (pings.at(-1) ?? 0)).toBeLessThan(heartbeatMs + longest);
          for (const d of spacing(telemetry)) {
            expect(d).toBeGreaterThanOrEqual(TELEMETRY_MS);
            expect(d).toBeLessThan(TELEMETRY_MS + longest);
          }
          expect(end - (telemetry.at(-1) ?? 0)).toBeLessThan(TELEMETRY_MS + longest);
        },
      ),
      params(200),
    );
  });

  it('AWP-SAF-002 three heartbeat intervals without a message from the observer are silence; any message resets it', () => {
    const live = new ObserverLiveness();
    live.heartbeatMs = 2000;
    live.attached(0);
    expect(live.silent(5999)).toBe(false);
    live.lastHeard = 5000;
    expect(live.silent(10_999)).toBe(false);
    expect(live.silent(11_000)).toBe(true);
    // No heartbeat interval yet (before session.ready): never silent, never a ping.
    const opening = new ObserverLiveness();
    expect(opening.silent(1e9)).toBe(false);
    expect(opening.pingDue(1e9)).toBe(false);
  });
});
