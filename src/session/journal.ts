/**
 * The replay journal of one relay session (AWP-CTL-008, AWP-CTL-010).
 *
 * It holds every `status_seq` the world reported, above what the agent acknowledged, so that a
 * resuming agent is replayed by the edge and the world can be told to drop what the edge holds.
 *
 * Entries are either complete (the notification text, replayed verbatim) or partial: a transition
 * first reported in an `action.submit` / `action.cancel` result. The world replays those as
 * `action.status` with fields the result does not carry (`ts_mono_ns` on cancel results, `tick` in
 * lockstep), so the edge never synthesises them: its acknowledgement upstream stops below the first
 * unacknowledged partial entry, and the world replays that entry and everything after it.
 */
import type { Sequenced } from '../protocol/jsonrpc.js';

export interface JournalEntry {
  readonly status_seq: number;
  /** The notification text, or null for a partial (result-reported) entry. */
  readonly text: string | null;
  /**
   * For a text many sessions share (a hub's world event, protocol/jsonrpc.ts): what makes it. V8 builds
   * `text` as a rope over the shared head, but writing a rope out (a socket, the store) copies it into
   * that rope for good: a 1.9 MB event held once per observer. What goes out is made afresh (entryText),
   * so the journal's rope stays the shared head and a number.
   */
  readonly share?: Sequenced;
}

/** An entry's text to write out (a socket, the store), made afresh for a shared one (JournalEntry.share). */
export function entryText(e: JournalEntry): string | null {
  return e.share !== undefined ? e.share(e.status_seq) : e.text;
}

/**
 * How far a world's `status_seq` may run ahead of the last one: each skipped seq is held as a partial
 * entry the world replays, so a world jumping further (it counts +1 per transition, AWP-CTL-008) would
 * cost the edge memory for nothing.
 */
export const MAX_STATUS_SEQ_GAP = 4096;

/**
 * How many `status_seq` a world may skip over a whole session. A world that follows AWP-CTL-008 skips
 * none (the edge sees all of its messages on one connection, and a resume replays what it missed), but
 * a world jumping MAX_STATUS_SEQ_GAP on every message would otherwise grow the journal (and the store)
 * by thousands of entries per few bytes it sends.
 */
export const MAX_SKIPPED_STATUS_SEQ = 4096;

/**
 * Most entries, and characters of their text, one store write carries (`notDurable`); a longer tail goes
 * in further writes. A journal that grew during a store outage is then written in bounded steps, and a
 * write attempted on each status during the outage costs at most this much, not the whole tail again.
 */
export const MAX_WRITE_ENTRIES = 512;
export const MAX_WRITE_CHARS = 4 * 1024 * 1024;

export class ReplayJournal {
  private readonly entries: JournalEntry[] = [];
  private hwm: number;
  private agentAck: number;
  private durable: number;
  /** Seqs skipped (held as placeholders) since this journal was made: see MAX_SKIPPED_STATUS_SEQ. */
  private skipped = 0;
  /** What safeAcknowledgement last found. */
  private safe = 0;

  /** `acked` is the agent's acknowledgement so far; `entries` what the store holds above it. */
  constructor(acked = 0, entries: readonly JournalEntry[] = []) {
    this.agentAck = acked;
    this.hwm = acked;
    this.durable = acked;
    for (const e of entries) this.append(e.status_seq, e.text);
    this.durable = this.hwm;
  }

  /**
   * Whether `status_seq` is further ahead than the journal will fill: by more than MAX_STATUS_SEQ_GAP,
   * or past what the session may still skip (MAX_SKIPPED_STATUS_SEQ).
   */
  tooFarAhead(status_seq: number): boolean {
    const gap = status_seq - this.hwm;
    return gap > MAX_STATUS_SEQ_GAP || this.skipped + gap - 1 > MAX_SKIPPED_STATUS_SEQ;
  }

  /** Highest `status_seq` the edge has seen. */
  get highWaterMark(): number {
    return this.hwm;
  }

  /** Highest `status_seq` the agent acknowledged. */
  get acknowledged(): number {
    return this.agentAck;
  }

  get size(): number {
    return this.entries.length;
  }

  /**
   * Records `status_seq`; returns the entries to persist (a gap is filled with partial placeholders,
   * so it is replayed by the world rather than skipped), or null when the seq is a redelivery.
   */
  append(status_seq: number, text: string | null, share?: Sequenced): JournalEntry[] | null {
    if (status_seq <= this.hwm) return null;
    if (this.tooFarAhead(status_seq))
      throw new RangeError(`status_seq ${status_seq} is too far past ${this.hwm} (${this.skipped} skipped)`);
    this.skipped += status_seq - this.hwm - 1;
    const added: JournalEntry[] = [];
    for (let s = this.hwm + 1; s < status_seq; s++) added.push({ status_seq: s, text: null });
    added.push(share !== undefined ? { status_seq, text, share } : { status_seq, text });
    for (const e of added) this.entries.push(e);
    this.hwm = status_seq;
    return added;
  }

  /** The store holds every entry up to `status_seq`. */
  markDurable(status_seq: number): void {
    if (status_seq > this.durable) this.durable = Math.min(status_seq, this.hwm);
  }

  /** The agent processed everything up to `status_seq`; entries at or below it are dropped. */
  acknowledge(status_seq: number): boolean {
    if (status_seq <= this.agentAck) return false;
    this.agentAck = status_seq;
    let drop = 0;
    while (drop < this.entries.length && this.entries[drop]!.status_seq <= status_seq) drop++;
    this.entries.splice(0, drop);
    if (this.hwm < status_seq) this.hwm = status_seq;
    if (this.durable < status_seq) this.durable = status_seq;
    return true;
  }

  /**
   * What the edge may acknowledge upstream: the highest seq it holds durably such that every
   * unacknowledged entry up to it is complete (it can replay all of them itself).
   */
  safeAcknowledgement(): number {
    // It only grows (entries never change, durability and acknowledgement only grow), and the entries
    // are contiguous seqs, so each call reads on from where the last stopped: an agent's ping costs what
    // is new, not the whole journal of an agent that never acknowledges.
    if (this.safe < this.agentAck) this.safe = this.agentAck;
    const first = this.entries[0]?.status_seq ?? this.safe + 1;
    for (let i = Math.max(0, this.safe + 1 - first); i < this.entries.length; i++) {
      const e = this.entries[i]!;
      if (e.status_seq > this.durable || e.text === null) break;
      this.safe = e.status_seq;
    }
    return this.safe;
  }

  /** Complete entries in (after, upTo], in order: what the edge replays itself on resume. */
  replay(after: number, upTo: number): string[] {
    const out: string[] = [];
    for (const e of this.entries) {
      if (e.status_seq <= after) continue;
      if (e.status_seq > upTo) break;
      const text = entryText(e);
      if (text !== null) out.push(text);
    }
    return out;
  }

  /**
   * The oldest entries not yet durable, in order, at most MAX_WRITE_ENTRIES of them and MAX_WRITE_CHARS
   * of text (one entry, however long): what the next store write carries. Writing from the oldest (the
   * store ignores what it already holds) closes any gap a failed write left.
   */
  notDurable(maxEntries = MAX_WRITE_ENTRIES, maxChars = MAX_WRITE_CHARS): JournalEntry[] {
    // Entries hold consecutive seqs (append fills gaps), so the first not durable is found by index:
    // this runs on every status, and costs what it returns, not the journal's length.
    const first = this.entries[0]?.status_seq ?? 0;
    const out: JournalEntry[] = [];
    let chars = 0;
    for (let i = Math.max(0, this.durable + 1 - first); i < this.entries.length; i++) {
      const e = this.entries[i]!;
      chars += e.text?.length ?? 0;
      if (out.length === maxEntries || (out.length > 0 && chars > maxChars)) break;
      out.push(e);
    }
    return out;
  }

  /** Every entry held (for persistence and inspection). */
  held(): readonly JournalEntry[] {
    return this.entries;
  }
}
