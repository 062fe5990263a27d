import { describe, expect, it } from 'vitest';
import type { RelayRoute } from '../../src/relay/relay-effects.js';
import { recordFromReady } from '../../src/relay/session-ready.js';

const route = { name: 'w', mintToken: () => 'edge-token' } as unknown as RelayRoute;

function windowOf(reconnect_window_ms: unknown): number | undefined {
  const ready = { session_id: 's', session_token: 't', reconnect_window_ms };
  return recordFromReady(ready, route, 'streaming')?.reconnect_window_ms;
}

describe('recordFromReady', () => {
  it("AWP-CTL-005 keeps a world's reconnect_window_ms that is a count, and takes any other as none given (0)", () => {
    expect(windowOf(30_000)).toBe(30_000);
    expect(windowOf(1e12)).toBe(1e12); // longer than a timer can wait: the timers cut it (timer-delay.ts)
    for (const bad of [-5, 1.5, Infinity, NaN, '30000', undefined]) expect(windowOf(bad)).toBe(0);
  });
});
