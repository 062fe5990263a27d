/**
 * Compact encodings of what a distributed store keeps per relay session (msgpack tuples, not maps,
 * so field names are not repeated in every record and journal entry).
 */
import { Packr } from 'msgpackr';
import type { JournalEntry } from '../relay/journal.js';
import type { RelaySessionRecord } from './session-store.js';

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

/** Rebuilds a record from its static part and the mutable fields stored beside it. */
export function decodeRecord(
  edge_token: string,
  encoded: Buffer,
  agent_ack: number,
  suspended_at_ms: number | null,
): RelaySessionRecord {
  const t = packr.unpack(encoded) as unknown;
  if (!Array.isArray(t) || t[0] !== RECORD_VERSION || t.length !== 7) {
    throw new Error('session record has an unknown encoding');
  }
  const [, route, upstream_token, session_id, mode, reconnect_window_ms, heartbeat_interval_ms] =
    t as StaticTuple;
  return {
    edge_token,
    route,
    upstream_token,
    session_id,
    mode,
    reconnect_window_ms,
    heartbeat_interval_ms,
    agent_ack,
    suspended_at_ms,
  };
}

/** A journal entry as a sorted-set member: it carries its seq, so equal texts stay distinct members. */
export function encodeEntry(entry: JournalEntry): Buffer {
  return packr.pack([entry.status_seq, entry.text]);
}

export function decodeEntry(encoded: Buffer): JournalEntry {
  const t = packr.unpack(encoded) as unknown;
  if (!Array.isArray(t) || typeof t[0] !== 'number' || (t[1] !== null && typeof t[1] !== 'string')) {
    throw new Error('journal entry has an unknown encoding');
  }
  return { status_seq: t[0], text: t[1] as string | null };
}
