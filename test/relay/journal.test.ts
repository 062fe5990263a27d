import { describe, expect, it } from 'vitest';
import { ReplayJournal } from '../../src/session/journal.js';

const note = (seq: number) => `{"jsonrpc":"2.0","method":"action.status","params":{"status_seq":${seq}}}`;

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

  it('restores from a stored acknowledgement and entries', () => {
    const j = new ReplayJournal(3, [
      { status_seq: 4, text: note(4) },
      { status_seq: 5, text: note(5) },
    ]);
    expect(j.highWaterMark).toBe(5);
    expect(j.safeAcknowledgement()).toBe(5);
    expect(j.replay(3, 5)).toEqual([note(4), note(5)]);
  });
});
