/** The keyframe cache's bounds: per channel, and for all of a hub's channels together. */
import { describe, expect, it } from 'vitest';
import { FLAG_KEYFRAME } from '../../src/protocol/frame.js';
import { KeyframeCache, type HubFrame } from '../../src/fanout/keyframe-cache.js';

function frame(channel_id: number, seq: number, keyframe: boolean, bytes: number): HubFrame {
  return {
    buf: Buffer.alloc(bytes),
    channel_id,
    seq,
    ts_mono_ns: seq,
    ts_send_ns: undefined,
    flags: keyframe ? FLAG_KEYFRAME : 0,
  };
}

const seqs = (c: KeyframeCache, id: number): number[] => c.startFor(id).map((f) => f.seq);

describe('keyframe cache', () => {
  it('AWP-OBS-004 keeps the newest keyframe and the deltas after it; a new keyframe replaces them', () => {
    const c = new KeyframeCache();
    c.add(frame(1, 1, false, 10)); // no keyframe yet: nothing to start on
    expect(seqs(c, 1)).toEqual([]);
    c.add(frame(1, 2, true, 100));
    c.add(frame(1, 3, false, 10));
    expect(seqs(c, 1)).toEqual([2, 3]);
    expect(c.bytes).toBe(110);
    c.add(frame(1, 4, true, 50));
    expect(seqs(c, 1)).toEqual([4]);
    expect(c.bytes).toBe(50);
  });

  it('past the budget of all channels, the channel that would pass it is served live until a keyframe fits', () => {
    const c = new KeyframeCache(1000);
    c.add(frame(1, 1, true, 600));
    c.add(frame(2, 1, true, 300));
    c.add(frame(3, 1, true, 200)); // 1,100 > 1,000
    expect([seqs(c, 1), seqs(c, 2), seqs(c, 3)]).toEqual([[1], [1], []]);
    c.add(frame(2, 2, false, 200)); // the delta would pass it: channel 2 waits for its next keyframe
    expect(seqs(c, 2)).toEqual([]);
    expect(c.bytes).toBe(600);
    c.add(frame(2, 3, false, 10)); // a delta without its keyframe is no start
    expect(seqs(c, 2)).toEqual([]);
    c.add(frame(3, 2, true, 200));
    expect(seqs(c, 3)).toEqual([2]);
    c.add(frame(1, 2, true, 700)); // replacing its own keyframe frees what it held first
    expect([seqs(c, 1), c.bytes]).toEqual([[2], 900]);
  });

  it('forget, retain and clear give their bytes back', () => {
    const c = new KeyframeCache(1000);
    for (let id = 1; id <= 5; id++) c.add(frame(id, 1, true, 100));
    c.add(frame(1, 2, false, 50));
    c.forget(1);
    expect(c.bytes).toBe(400);
    c.retain((id) => id % 2 === 0);
    expect([c.bytes, seqs(c, 2), seqs(c, 3)]).toEqual([200, [1], []]);
    c.clear();
    expect(c.bytes).toBe(0);
    for (let id = 1; id <= 10; id++) c.add(frame(id, 1, true, 100)); // the whole budget is free again
    expect(c.bytes).toBe(1000);
  });
});
