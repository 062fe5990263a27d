/**
 * Compact encodings of what a distributed store keeps per relay session (msgpack tuples, not maps,
 * so field names are not repeated in every record and journal entry).
 */
import { Packr } from 'msgpackr';
import { MAX_SKIPPED_STATUS_SEQ, MAX_STATUS_SEQ_GAP, type JournalEntry } from '../session/journal.js';
import {
  MAX_OBSERVER_ITEMS,
  MAX_OBSERVER_NAME_CHARS,
  CorruptRecordError,
  type ObserverRecord,
  type RelaySessionRecord,
} from '../session/session-store.js';

/** Plain msgpack (no record extension): another replica decodes it with no shared state. */
const packr = new Packr({ useRecords: false, moreTypes: false });

const RECORD_VERSION = 1;

/** The fields of a record that never change after `create` (the rest live in their own hash fields). */
type StaticTuple = [
  version: number,
  route: string,
  upstream_token: string,
  session_id: string,
  mode: RelaySessionRecord['mode'],
  reconnect_window_ms: number,
  heartbeat_interval_ms: number,
];

export function encodeStatic(record: RelaySessionRecord): Buffer {
  const tuple: StaticTuple = [
    RECORD_VERSION,
    record.route,
    record.upstream_token,
    record.session_id,
    record.mode,
    record.reconnect_window_ms,
    record.heartbeat_interval_ms,
  ];
  return packr.pack(tuple);
}

/**
 * Rebuilds a record from its static part and the mutable fields stored beside it. What the store
 * returns is checked like any peer's bytes: anything the edge would not have written is a
 * CorruptRecordError.
 */
export function decodeRecord(
  edge_token: string,
  encoded: Buffer,
  agent_ack: string,
  suspended_at_ms: string,
  observer?: ObserverRecord,
): RelaySessionRecord {
  const t = unpack(encoded, 'session record');
  if (!Array.isArray(t) || t[0] !== RECORD_VERSION || t.length !== 7) {
    throw new CorruptRecordError('session record has an unknown encoding');
  }
  const [, route, upstream_token, session_id, mode, reconnect_window_ms, heartbeat_interval_ms] =
    t as unknown[];
  // An observer session has no upstream session of its own; a relay session always has one.
  if (
    typeof route !== 'string' ||
    typeof upstream_token !== 'string' ||
    (upstream_token === '') !== (observer !== undefined)
  )
    throw new CorruptRecordError('session record: route or upstream token is not a string');
  if (typeof session_id !== 'string')
    throw new CorruptRecordError('session record: session_id is not a string');
  if (mode !== 'streaming' && mode !== 'lockstep')
    throw new CorruptRecordError('session record: mode is neither streaming nor lockstep');
  return {
    edge_token,
    route,
    upstream_token,
    session_id,
    mode,
    reconnect_window_ms: count(reconnect_window_ms, 'reconnect_window_ms'),
    heartbeat_interval_ms: count(heartbeat_interval_ms, 'heartbeat_interval_ms'),
    agent_ack: count(decimal(agent_ack), 'agent_ack'),
    suspended_at_ms: suspended_at_ms === '' ? null : count(decimal(suspended_at_ms), 'suspended_at_ms'),
    ...(observer !== undefined && { observer }),
  };
}

export function encodeObserver(o: ObserverRecord): Buffer {
  return packr.pack([
    RECORD_VERSION,
    o.modalities,
    o.max_obs_rate_hz,
    o.wants.map((w) => [w.channel, w.rate_hz]),
    o.positions,
  ]);
}

/** An observer session's part of the record, checked like every byte the store returns. */
export function decodeObserver(encoded: Buffer): ObserverRecord {
  const t = unpack(encoded, 'observer record');
  if (!Array.isArray(t) || t[0] !== RECORD_VERSION || t.length !== 5)
    throw new CorruptRecordError('observer record has an unknown encoding');
  const [, modalities, rate, wants, positions] = t as unknown[];
  const list = (v: unknown, what: string): unknown[] => {
    if (!Array.isArray(v) || v.length > MAX_OBSERVER_ITEMS)
      throw new CorruptRecordError(`observer record: ${what} is not a list`);
    return v;
  };
  const name = (v: unknown): string => {
    if (typeof v !== 'string' || v.length > MAX_OBSERVER_NAME_CHARS)
      throw new CorruptRecordError('observer record: bad channel name');
    return v;
  };
  const hz = (v: unknown): number | null => {
    if (v === null) return null;
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0)
      throw new CorruptRecordError('observer record: a rate is not a positive number');
    return v;
  };
  const pair = (v: unknown): [unknown, unknown] => {
    if (!Array.isArray(v) || v.length !== 2) throw new CorruptRecordError('observer record: bad entry');
    return v as [unknown, unknown];
  };
  return {
    modalities: list(modalities, 'modalities').map(name),
    max_obs_rate_hz: hz(rate),
    wants: list(wants, 'wants').map((w) => {
      const [channel, rate_hz] = pair(w);
      return { channel: name(channel), rate_hz: hz(rate_hz) };
    }),
    positions: list(positions, 'positions').map((p) => {
      const [channel, seq] = pair(p);
      return [name(channel), count(seq, 'a channel position')] as const;
    }),
  };
}

/** A journal entry as a sorted-set member: it carries its seq, so equal texts stay distinct members. */
export function encodeEntry(entry: JournalEntry): Buffer {
  return packr.pack([entry.status_seq, entry.text]);
}

export function decodeEntry(encoded: Buffer): JournalEntry {
  const t = unpack(encoded, 'journal entry');
  if (!Array.isArray(t) || t.length !== 2 || (t[1] !== null && typeof t[1] !== 'string')) {
    throw new CorruptRecordError('journal entry has an unknown encoding');
  }
  const status_seq = count(t[0], 'journal status_seq');
  if (status_seq === 0) throw new CorruptRecordError('journal status_seq 0 (status_seq starts at 1)');
  return { status_seq, text: t[1] as string | null };
}

/**
 * The journal as the store returned it, above the agent's acknowledgement: strictly increasing, and
 * skipping no more than the journal fills (what ReplayJournal would refuse).
 */
export function checkJournal(agent_ack: number, entries: readonly JournalEntry[]): readonly JournalEntry[] {
  let last = agent_ack;
  let skipped = 0;
  for (const e of entries) {
    if (e.status_seq <= last) continue; // acknowledged, or repeated: the journal skips it
    skipped += e.status_seq - last - 1;
    if (e.status_seq - last > MAX_STATUS_SEQ_GAP || skipped > MAX_SKIPPED_STATUS_SEQ)
      throw new CorruptRecordError(`journal jumps from status_seq ${last} to ${e.status_seq}`);
    last = e.status_seq;
  }
  return entries;
}

function unpack(encoded: Buffer, what: string): unknown {
  try {
    return packr.unpack(encoded) as unknown;
  } catch {
    throw new CorruptRecordError(`${what} is not msgpack`);
  }
}

function decimal(text: string): number {
  return /^[0-9]{1,16}$/.test(text) ? Number(text) : Number.NaN;
}

function count(v: unknown, field: string): number {
  if (!Number.isSafeInteger(v) || (v as number) < 0)
    throw new CorruptRecordError(`session record: ${field} is not an integer from 0 to 2^53 - 1`);
  return v as number;
}
