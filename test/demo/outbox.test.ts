import { describe, expect, it } from 'vitest';
import { LatestWinsOutbox } from '../../src/demo/outbox.js';

function drain<T>(o: LatestWinsOutbox<T>): T[] {
  const out: T[] = [];
  for (let x = o.shift(); x !== undefined; x = o.shift()) out.push(x);
  return out;
}

describe('latest-wins outbox', () => {
  it('AWP-TRN-009 holds at most one pending frame per latest-wins channel, replacing it in place, never queueing', () => {
    const o = new LatestWinsOutbox<string>();
    o.push({ item: 'ctl-1' });
    for (let i = 1; i <= 50; i++)
      expect(o.push({ item: `cam-${i}`, slot: 2, keyframe: true })).toBe(i === 1 ? 'queued' : 'replaced');
    o.push({ item: 'ctl-2' });
    o.push({ item: 'proprio-1', slot: 1, keyframe: true });
    o.push({ item: 'proprio-2', slot: 1, keyframe: true });
    expect(o.length).toBe(4);
    expect(drain(o)).toEqual(['ctl-1', 'cam-50', 'ctl-2', 'proprio-2']);
    expect(o.dropped).toBe(50);
  });

  it('AWP-DAT-002 reliable frames and control messages are never dropped and keep their order', () => {
    const o = new LatestWinsOutbox<string>();
    const items = Array.from({ length: 100 }, (_, i) => (i % 3 === 0 ? `ctl-${i}` : `state-${i}`));
    for (const item of items) expect(o.push({ item })).toBe('queued');
    expect(drain(o)).toEqual(items);
  });

  it('AWP-DAT-009 a newer frame replacing a pending resync keyframe carries the resync on', () => {
    const o = new LatestWinsOutbox<{ n: number; resync: boolean }>(100, (x) => ({ ...x, resync: true }));
    o.push({ item: { n: 1, resync: true }, slot: 1, keyframe: true, resync: true });
    o.push({ item: { n: 2, resync: false }, slot: 1, keyframe: true });
    expect(drain(o)).toEqual([{ n: 2, resync: true }]);
  });

  it('AWP-DAT-009 a pending keyframe is not replaced by a delta that depends on it', () => {
    const o = new LatestWinsOutbox<string>();
    o.push({ item: 'key', slot: 1, keyframe: true });
    expect(o.push({ item: 'delta', slot: 1, keyframe: false })).toBe('dropped');
    expect(drain(o)).toEqual(['key']);
  });

  it('a slot freed by sending takes the next frame as a new queue entry', () => {
    const o = new LatestWinsOutbox<string>();
    o.push({ item: 'a', slot: 1 });
    expect(o.shift()).toBe('a');
    o.push({ item: 'ctl' });
    expect(o.push({ item: 'b', slot: 1 })).toBe('queued');
    expect(drain(o)).toEqual(['ctl', 'b']);
  });

  it('answers full beyond its limit rather than buffering without bound (latest-wins replacements still fit)', () => {
    const o = new LatestWinsOutbox<number>(3);
    for (let i = 0; i < 3; i++) expect(o.push({ item: i })).toBe('queued');
    expect(o.push({ item: 3 })).toBe('full');
    const lw = new LatestWinsOutbox<number>(1);
    lw.push({ item: 0, slot: 1 });
    expect(lw.push({ item: 1, slot: 1 })).toBe('replaced');
  });
});
