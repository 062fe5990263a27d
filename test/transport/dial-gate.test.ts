/** The per-upstream limit of handshakes in flight (src/transport/dial-gate.ts). */
import { describe, expect, it } from 'vitest';
import { DialGate, upstreamKey } from '../../src/transport/dial-gate.js';

describe('DialGate', () => {
  it('lets `limit` handshakes run per upstream; the next waits and starts, in order, as one ends', async () => {
    const gate = new DialGate(2);
    const a = await gate.acquire('ws://w:1', 1000);
    const b = await gate.acquire('ws://w:1', 1000);
    const other = await gate.acquire('ws://w:2', 1000); // another upstream has its own limit
    const started: string[] = [];
    const c = gate.acquire('ws://w:1', 1000).then((r) => (started.push('c'), r));
    const d = gate.acquire('ws://w:1', 1000).then((r) => (started.push('d'), r));
    await new Promise((r) => setTimeout(r, 20));
    expect(started).toEqual([]);
    expect(gate.pending('ws://w:1')).toBe(2);
    a();
    a(); // a second release of the same handshake frees nothing more
    await c;
    expect(started).toEqual(['c']);
    b();
    const releaseD = await d;
    expect(started).toEqual(['c', 'd']);
    expect(gate.pending('ws://w:1')).toBe(2);
    (await c)();
    releaseD();
    other();
    expect(gate.pending('ws://w:1')).toBe(0);
    expect(gate.pending('ws://w:2')).toBe(0);
  });

  it('a dial that waits longer than its timeout is refused and leaves the queue', async () => {
    const gate = new DialGate(1);
    const a = await gate.acquire('k', 1000);
    await expect(gate.acquire('k', 30)).rejects.toThrow(/1 connections to it were being opened for 30 ms/);
    a();
    expect(gate.pending('k')).toBe(0);
    const b = await gate.acquire('k', 30); // the timed-out waiter took no slot
    expect(gate.pending('k')).toBe(1);
    b();
  });

  it('thousands of waiters timing out together all leave the queue; the next dial after a release starts at once', async () => {
    const gate = new DialGate(1);
    const first = await gate.acquire('ws://w:1', 1000);
    const waiting = Array.from({ length: 20_000 }, () => gate.acquire('ws://w:1', 5));
    const outcomes = await Promise.allSettled(waiting);
    expect(outcomes.every((o) => o.status === 'rejected')).toBe(true);
    first();
    expect(gate.pending('ws://w:1')).toBe(0); // no waiter was left to take the slot
    (await gate.acquire('ws://w:1', 5))();
  });

  it('keys an upstream by scheme, host and port', () => {
    expect(upstreamKey('ws://edge-b:8720/worlds/arm')).toBe(
      upstreamKey('ws://edge-b:8720/worlds/arm/stream'),
    );
    expect(upstreamKey('ws://edge-b:8720/a')).not.toBe(upstreamKey('wss://edge-b:8720/a'));
    expect(upstreamKey('ws://edge-b:8720/a')).not.toBe(upstreamKey('ws://edge-b:8721/a'));
  });
});
