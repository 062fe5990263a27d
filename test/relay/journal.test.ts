import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sequencedNotification } from '../../src/protocol/jsonrpc.js';
import {
  entryText,
  type JournalEntry,
  MAX_SKIPPED_STATUS_SEQ,
  MAX_STATUS_SEQ_GAP,
  MAX_WRITE_CHARS,
  MAX_WRITE_ENTRIES,
  ReplayJournal,
} from '../../src/session/journal.js';
import { CorruptRecordError } from '../../src/session/session-store.js';
import { checkJournal } from '../../src/store/codec.js';

const note = (seq: number) => `{"jsonrpc":"2.0","method":"action.status","params":{"status_seq":${seq}}}`;

/** Counts reads of the journal's entries by index from here on. */
function countReads(j: ReplayJournal): { n: number } {
  const reads = { n: 0 };
  const internal = j as unknown as { entries: JournalEntry[] };
  internal.entries = new Proxy(internal.entries, {
    get(target, key, receiver) {
      if (typeof key === 'string' && /^\d+$/.test(key)) reads.n++;
      return Reflect.get(target, key, receiver) as unknown;
    },
  });
  return reads;
}

describe('ReplayJournal', () => {
  it('AWP-CTL-008 replays every status_seq above last_status_seq, in order', () => {
    const j = new ReplayJournal();
    for (let s = 1; s <= 5; s++) j.append(s, note(s));
    j.markDurable(5);
    expect(j.replay(2, 5)).toEqual([note(3), note(4), note(5)]);
    expect(j.replay(0, 3)).toEqual([note(1), note(2), note(3)]);
  });

  it('AWP-LIF-009 a redelivered status_seq is not recorded twice', () => {
    const j = new ReplayJournal();
    expect(j.append(1, note(1))).toHaveLength(1);
    expect(j.append(1, note(1))).toBeNull();
    expect(j.size).toBe(1);
  });

  it('AWP-CTL-010 drops what the agent acknowledged and keeps the rest', () => {
    const j = new ReplayJournal();
    for (let s = 1; s <= 4; s++) j.append(s, note(s));
    j.markDurable(4);
    expect(j.acknowledge(2)).toBe(true);
    expect(j.held().map((e) => e.status_seq)).toEqual([3, 4]);
    expect(j.acknowledge(1)).toBe(false);
  });

  it('acknowledges upstream only what it holds durably', () => {
    const j = new ReplayJournal();
    for (let s = 1; s <= 4; s++) j.append(s, note(s));
    expect(j.safeAcknowledgement()).toBe(0);
    j.markDurable(3);
    expect(j.safeAcknowledgement()).toBe(3);
  });

  it('AWP-CTL-008 never acknowledges past a result-reported transition the agent has not seen', () => {
    // seq 3 was first reported in an action.submit result: only the world can replay it faithfully.
    const j = new ReplayJournal();
    j.append(1, note(1));
    j.append(2, note(2));
    j.append(3, null);
    j.append(4, note(4));
    j.markDurable(4);
    expect(j.safeAcknowledgement()).toBe(2);
    expect(j.replay(0, 2)).toEqual([note(1), note(2)]);
    j.acknowledge(3); // the agent processed the result
    expect(j.safeAcknowledgement()).toBe(4);
  });

  it('fills a gap with partial entries so the world replays it', () => {
    const j = new ReplayJournal();
    j.append(1, note(1));
    const added = j.append(4, note(4));
    expect(added?.map((e) => [e.status_seq, e.text === null])).toEqual([
      [2, true],
      [3, true],
      [4, false],
    ]);
    j.markDurable(4);
    expect(j.safeAcknowledgement()).toBe(1);
  });

  it('holds at most MAX_SKIPPED_STATUS_SEQ skipped seqs over a session, however the world spreads its jumps', () => {
    // A world jumping MAX_STATUS_SEQ_GAP per message would grow the journal by thousands of entries each.
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: MAX_STATUS_SEQ_GAP }), { maxLength: 40 }), (steps) => {
        const j = new ReplayJournal();
        let seq = 0;
        for (const step of steps) {
          if (j.tooFarAhead(seq + step)) {
            expect(() => j.append(seq + step, null)).toThrow(RangeError);
            break;
          }
          j.append((seq += step), null);
        }
        // Every entry is an appended seq or a skipped one.
        expect(j.size).toBeLessThanOrEqual(MAX_SKIPPED_STATUS_SEQ + steps.length);
      }),
    );
    const j = new ReplayJournal();
    j.append(MAX_SKIPPED_STATUS_SEQ, null); // skips MAX_SKIPPED_STATUS_SEQ - 1
    j.append(MAX_SKIPPED_STATUS_SEQ + 2, null); // and one more: the budget is spent
    expect(j.size).toBe(MAX_SKIPPED_STATUS_SEQ + 2);
    expect(j.tooFarAhead(MAX_SKIPPED_STATUS_SEQ + 3)).toBe(false); // +1 skips nothing
    expect(j.tooFarAhead(MAX_SKIPPED_STATUS_SEQ + 4)).toBe(true);
  });

  it('refuses a stored journal that skips more than the journal fills', () => {
    const spread = [1, 2, 3].map((k) => ({ status_seq: k * MAX_STATUS_SEQ_GAP, text: null }));
    expect(() => checkJournal(0, spread)).toThrow(CorruptRecordError);
    expect(checkJournal(0, spread.slice(0, 1))).toHaveLength(1);
  });

  it('restores from a stored acknowledgement and entries', () => {
    const j = new ReplayJournal(3, [
      { status_seq: 4, text: note(4) },
      { status_seq: 5, text: note(5) },
    ]);
    expect(j.highWaterMark).toBe(5);
    expect(j.safeAcknowledgement()).toBe(5);
    expect(j.replay(3, 5)).toEqual([note(4), note(5)]);
  });

  it('notDurable and safeAcknowledgement match their definitions, whatever the order of appends, writes and acks', () => {
    const op = fc.oneof(
      fc.record({
        k: fc.constant('append' as const),
        step: fc.integer({ min: 0, max: 3 }),
        partial: fc.boolean(),
      }),
      fc.record({ k: fc.constant('durable' as const), back: fc.integer({ min: 0, max: 5 }) }),
      fc.record({ k: fc.constant('ack' as const), back: fc.integer({ min: 0, max: 5 }) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const j = new ReplayJournal();
        let durable = 0;
        for (const o of ops) {
          if (o.k === 'append')
            j.append(j.highWaterMark + o.step, o.partial ? null : note(j.highWaterMark + o.step));
          else if (o.k === 'durable') {
            const s = Math.max(0, j.highWaterMark - o.back);
            j.markDurable(s);
            durable = Math.max(durable, Math.min(s, j.highWaterMark));
          } else {
            const s = Math.max(0, j.highWaterMark - o.back);
            if (j.acknowledge(s)) durable = Math.max(durable, s);
          }
          const pending = j.held().filter((e) => e.status_seq > durable);
          expect(j.notDurable()).toEqual(pending);
          expect(j.notDurable(2)).toEqual(pending.slice(0, 2));
          // The reference for safeAcknowledgement: the complete, durable prefix above the agent's ack.
          let safe = j.acknowledged;
          for (const e of j.held()) {
            if (e.status_seq > durable || e.text === null) break;
            safe = e.status_seq;
          }
          expect(j.safeAcknowledgement()).toBe(safe);
        }
      }),
    );
  });

  it('notDurable reads only the entries that are new, not the whole journal', () => {
    // A status-bearing message asks for it every time; an agent that never acknowledges grows the journal.
    const j = new ReplayJournal();
    for (let s = 1; s <= 10_000; s++) j.append(s, note(s));
    j.markDurable(10_000);
    j.append(10_001, note(10_001));
    j.append(10_002, null);
    const reads = countReads(j);
    expect(j.notDurable().map((e) => e.status_seq)).toEqual([10_001, 10_002]);
    expect(reads.n).toBeLessThanOrEqual(6); // the two new entries, the durable one before them, and the copy
  });

  it('notDurable carries at most MAX_WRITE_ENTRIES, and MAX_WRITE_CHARS of text unless one entry is longer', () => {
    const j = new ReplayJournal();
    for (let s = 1; s <= MAX_WRITE_ENTRIES + 10; s++) j.append(s, note(s));
    const first = j.notDurable();
    expect(first.map((e) => e.status_seq)).toEqual(
      Array.from({ length: MAX_WRITE_ENTRIES }, (_, i) => i + 1),
    );
    j.markDurable(first.at(-1)!.status_seq);
    expect(j.notDurable().map((e) => e.status_seq)).toEqual(
      Array.from({ length: 10 }, (_, i) => MAX_WRITE_ENTRIES + 1 + i),
    );
    const big = new ReplayJournal();
    big.append(1, 'x'.repeat(MAX_WRITE_CHARS + 1));
    big.append(2, 'y');
    big.append(3, 'x'.repeat(MAX_WRITE_CHARS - 1));
    big.append(4, 'x'.repeat(2));
    expect(big.notDurable().map((e) => e.status_seq)).toEqual([1]); // one entry, however long
    big.markDurable(1);
    expect(big.notDurable().map((e) => e.status_seq)).toEqual([2, 3]);
  });

  it('safeAcknowledgement reads on from where it stopped, not the whole journal', () => {
    // Every ping of an agent asks for it; an agent that never acknowledges grows the journal.
    const j = new ReplayJournal();
    for (let s = 1; s <= 10_000; s++) j.append(s, note(s));
    j.markDurable(10_000);
    expect(j.safeAcknowledgement()).toBe(10_000);
    j.append(10_001, note(10_001));
    j.append(10_002, null);
    j.markDurable(10_002);
    const reads = countReads(j);
    expect(j.safeAcknowledgement()).toBe(10_001); // stops below the partial entry
    expect(j.safeAcknowledgement()).toBe(10_001);
    expect(reads.n).toBeLessThanOrEqual(5);
  });

  it('a shared entry (a hub event) is written out and replayed as its own text, made afresh each time', () => {
    const event = sequencedNotification('world.event', { event: 'e', detail: 'x'.repeat(64) });
    const j = new ReplayJournal();
    j.append(1, event(1), event);
    j.append(2, 'plain');
    const [shared, plain] = j.held();
    expect(shared!.share).toBe(event);
    expect(entryText(shared!)).toBe(event(1));
    expect(JSON.parse(entryText(shared!)!)).toMatchObject({
      method: 'world.event',
      params: { status_seq: 1 },
    });
    expect(entryText(plain!)).toBe('plain');
    expect(j.replay(0, 2)).toEqual([event(1), 'plain']);
  });
});
