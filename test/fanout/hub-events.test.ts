/**
 * A hub's world events on their way to its observers (src/fanout/hub-events.ts), on a real slice loop
 * whose clock advances 1 ms per observer: events are handed out within the turn's budget, in the world's
 * order for every observer, each stamped with the observer's own status_seq; a backlog past its bound is
 * handed out at once; a fault stays with its observer.
 */
import { describe, expect, it } from 'vitest';
import { sequencedNotification } from '../../src/protocol/jsonrpc.js';
import { HubEvents } from '../../src/fanout/hub-events.js';
import { SliceLoop } from '../../src/transport/slice-loop.js';

const BUDGET_MS = 4;

function rig(observerCount: number, maxBacklog?: number) {
  let clock = 0;
  const faults: unknown[] = [];
  const slices = new SliceLoop(() => clock, BUDGET_MS);
  const events = new HubEvents({ fault: (_w, err) => void faults.push(err), slices }, maxBacklog);
  const observers = Array.from({ length: observerCount }, (_, i) => {
    let seq = 0;
    const heard: string[] = [];
    return {
      heard,
      worldEvent(event: (status_seq: number) => string) {
        clock += 1; // each observer's socket write takes a millisecond
        if (faulty.delete(i)) throw new Error(`observer ${i} broke`); // once
        heard.push(event(++seq));
      },
    };
  });
  const faulty = new Set<number>();
  return { events, observers, faults, faulty };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));
const event = (name: string, worldSeq: number) =>
  sequencedNotification('world.event', { event: name, status_seq: worldSeq });
const until = async (done: () => boolean) => {
  for (let i = 0; i < 1000 && !done(); i++) await turn();
};

describe('hub events', () => {
  it("hands events out within the turn's budget, in order, each stamped with the observer's status_seq", async () => {
    const { events, observers } = rig(10);
    events.add(event('a', 100), observers);
    events.add(event('b', 101), observers);
    expect(observers.every((o) => o.heard.length === 0)).toBe(true); // not in the turn that read them
    await turn();
    const first = observers.reduce((n, o) => n + o.heard.length, 0);
    expect(first).toBe(BUDGET_MS);
    await until(() => events.pending === 0);
    for (const o of observers) {
      expect(o.heard.map((t) => JSON.parse(t) as { params: unknown })).toEqual([
        { jsonrpc: '2.0', method: 'world.event', params: { event: 'a', status_seq: 1 } },
        { jsonrpc: '2.0', method: 'world.event', params: { event: 'b', status_seq: 2 } },
      ]);
    }
  });

  it('goes only to the observers the hub had when the event arrived', async () => {
    const { events, observers } = rig(3);
    events.add(event('a', 1), observers.slice(0, 2));
    events.add(event('b', 2), observers);
    await until(() => events.pending === 0);
    expect(observers.map((o) => o.heard.length)).toEqual([2, 2, 1]);
    expect(JSON.parse(observers[2]!.heard[0]!)).toMatchObject({ params: { event: 'b', status_seq: 1 } });
  });

  it('hands the oldest out at once past the backlog bound (the hub stops reading its world meanwhile)', () => {
    const { events, observers } = rig(5, 2);
    for (let i = 0; i < 4; i++) events.add(event(`e${i}`, i + 1), observers);
    expect(events.pending).toBe(2);
    for (const o of observers)
      expect(o.heard.map((t) => (JSON.parse(t) as { params: { event: string } }).params.event)).toEqual([
        'e0',
        'e1',
      ]);
  });

  it('flush hands out everything now; clear drops what waits', () => {
    const { events, observers } = rig(5);
    events.add(event('a', 1), observers);
    events.flush();
    expect(observers.every((o) => o.heard.length === 1)).toBe(true);
    events.add(event('b', 2), observers);
    events.clear();
    expect(events.pending).toBe(0);
    expect(observers.every((o) => o.heard.length === 1)).toBe(true);
  });

  it("keeps one observer's fault its own: the others hear the event, and so does it next time", async () => {
    const { events, observers, faults, faulty } = rig(3);
    faulty.add(1);
    events.add(event('a', 1), observers);
    events.add(event('b', 2), observers);
    await until(() => events.pending === 0);
    expect(faults).toHaveLength(1);
    expect(observers.map((o) => o.heard.length)).toEqual([2, 1, 2]);
  });
});
