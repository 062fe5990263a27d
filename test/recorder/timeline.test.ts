/**
 * The timeline of `awp-edge recordings show` (src/recorder/timeline.ts) on a hostile file: `frame_refs`
 * records claiming huge runs are expanded up to a bound for the whole file, not one per record, so a
 * small file cannot keep the command busy for minutes; the records past it are shown as they are.
 */
import { describe, expect, it } from 'vitest';
import { MAX_REF_NUMBERS } from '../../src/recorder/frame-refs.js';
import type { StoredRecord } from '../../src/recorder/read.js';
import { MAX_TIMELINE_REFS, timeline } from '../../src/recorder/timeline.js';

const refs = (ts: number, direction: string): StoredRecord => ({
  ts_mono_ns: ts,
  direction,
  kind: 'frame_refs',
  body: { hub_file: 'hub.0001.jsonl', binding: 'ws', frames: MAX_REF_NUMBERS, runs: [[0, MAX_REF_NUMBERS]] },
});

describe('recordings show: frames by reference', () => {
  it('expands at most MAX_TIMELINE_REFS over the whole file; later records are shown unexpanded', () => {
    const expanded = Math.floor(MAX_TIMELINE_REFS / MAX_REF_NUMBERS);
    // Directions alternate, so each record is a run of its own (one line each).
    const records = Array.from({ length: expanded + 3 }, (_, i) =>
      refs(i * 1e6, i % 2 === 0 ? 'edge_to_agent' : 'agent'),
    );
    const lines = timeline(records);
    expect(lines).toHaveLength(records.length);
    const counted = lines.filter((l) => l.includes(`frames (hub file not at hand) ×${MAX_REF_NUMBERS}`));
    expect(counted).toHaveLength(expanded);
    expect(lines.slice(expanded).every((l) => l.includes('frame_refs'))).toBe(true);
  });
});
