/**
 * The store codec on hostile bytes (issue 12: every byte from a store is hostile): decoding arbitrary
 * bytes, or msgpack of any shape, either yields a record and journal the relay can hold or throws
 * CorruptRecordError, never anything else; what the edge encodes decodes to itself.
 */
import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { ReplayJournal } from '../../src/session/journal.js';
import { CorruptRecordError, type RelaySessionRecord } from '../../src/session/session-store.js';
import {
  checkJournal,
  decodeEntry,
  decodeObserver,
  decodeRecord,
  encodeEntry,
  encodeObserver,
  encodeStatic,
} from '../../src/store/codec.js';
import type { ObserverRecord } from '../../src/session/session-store.js';
import { hostileJson, params } from './arbitraries.js';

const packr = new Packr({ useRecords: false, moreTypes: false });

/** Throws what `f` throws unless it is a CorruptRecordError. */
function onlyCorrupt<T>(f: () => T): T | null {
  try {
    return f();
  } catch (err) {
    if (err instanceof CorruptRecordError) return null;
    throw err;
  }
}

const storedBytes: fc.Arbitrary<Buffer> = fc.oneof(
  fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)),
  hostileJson.map((v) => packr.pack(v)),
  fc
    .tuple(fc.constant(1), hostileJson, hostileJson, hostileJson, hostileJson, hostileJson, hostileJson)
    .map((t) => packr.pack(t)),
  fc.tuple(hostileJson, hostileJson).map((t) => packr.pack(t)),
);

const fieldText: fc.Arbitrary<string> = fc.oneof(
  fc.constant(''),
  fc.nat().map(String),
  fc.string({ maxLength: 20 }),
  fc.constantFrom('-3', '1e3', '9007199254740993', ' 7', '0x10', 'NaN'),
);

const record: fc.Arbitrary<RelaySessionRecord> = fc.record({
  edge_token: fc.string({ minLength: 1 }),
  route: fc.string(),
  upstream_token: fc.string({ minLength: 1 }),
  session_id: fc.string(),
  mode: fc.constantFrom('streaming' as const, 'lockstep' as const),
  reconnect_window_ms: fc.nat(),
  heartbeat_interval_ms: fc.nat(),
  agent_ack: fc.nat(),
  suspended_at_ms: fc.option(fc.nat(), { nil: null }),
});

describe('store codec on hostile bytes (issue 12)', () => {
  it('decodeRecord, decodeEntry and checkJournal throw nothing but CorruptRecordError, and what they accept the journal can hold', () => {
    fc.assert(
      fc.property(
        storedBytes,
        fieldText,
        fieldText,
        fc.array(storedBytes, { maxLength: 6 }),
        (bytes, ack, suspended, members) => {
          const rec = onlyCorrupt(() => decodeRecord('tok', bytes, ack, suspended));
          if (rec !== null) {
            expect(Number.isSafeInteger(rec.agent_ack) && rec.agent_ack >= 0).toBe(true);
            expect(['streaming', 'lockstep']).toContain(rec.mode);
          }
          const entries = onlyCorrupt(() => members.map(decodeEntry));
          if (entries === null) return;
          const journal = onlyCorrupt(() => checkJournal(rec?.agent_ack ?? 0, entries));
          // Accepted journals never make ReplayJournal throw (its RangeError would escape the lookup).
          if (journal !== null) new ReplayJournal(rec?.agent_ack ?? 0, journal);
        },
      ),
      params(300),
    );
  });

  it("decodeObserver (an observer session's part) throws nothing but CorruptRecordError; what it accepts is well-formed", () => {
    const shaped = fc
      .tuple(fc.constant(1), hostileJson, hostileJson, hostileJson, hostileJson)
      .map((t) => packr.pack(t));
    fc.assert(
      fc.property(fc.oneof(storedBytes, shaped), (bytes) => {
        const o = onlyCorrupt(() => decodeObserver(bytes));
        if (o === null) return;
        for (const m of o.modalities) expect(typeof m).toBe('string');
        for (const w of o.wants) expect(w.rate_hz === null || w.rate_hz > 0).toBe(true);
        for (const [, seq] of o.positions) expect(Number.isSafeInteger(seq) && seq >= 0).toBe(true);
      }),
      params(300),
    );
  });

  it('round trip: an observer record reads back unchanged', () => {
    const name = fc.string({ maxLength: 12 });
    const observer: fc.Arbitrary<ObserverRecord> = fc.record({
      modalities: fc.array(name, { maxLength: 4 }),
      max_obs_rate_hz: fc.option(fc.double({ min: 0.01, max: 1000, noNaN: true }), { nil: null }),
      wants: fc.array(
        fc.record({
          channel: name,
          rate_hz: fc.option(fc.double({ min: 0.01, max: 1000, noNaN: true }), { nil: null }),
        }),
        { maxLength: 4 },
      ),
      positions: fc.array(fc.tuple(name, fc.maxSafeNat()), { maxLength: 4 }),
    });
    fc.assert(
      fc.property(observer, (o) => {
        expect(decodeObserver(encodeObserver(o))).toEqual(o);
      }),
      params(200),
    );
  });

  it('round trip: what the edge writes it reads back unchanged', () => {
    fc.assert(
      fc.property(record, fc.array(fc.option(fc.string(), { nil: null }), { maxLength: 5 }), (r, texts) => {
        const back = decodeRecord(
          r.edge_token,
          encodeStatic(r),
          String(r.agent_ack),
          r.suspended_at_ms === null ? '' : String(r.suspended_at_ms),
        );
        expect(back).toEqual(r);
        const entries = texts.map((text, i) => ({ status_seq: r.agent_ack + 1 + i, text }));
        expect(
          checkJournal(
            r.agent_ack,
            entries.map((e) => decodeEntry(encodeEntry(e))),
          ),
        ).toEqual(entries);
      }),
      params(200),
    );
  });
});
