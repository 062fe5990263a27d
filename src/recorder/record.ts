/**
 * The AWP audit-log record (spec "Audit log", AWP-AUD-001..007) as the edge writes it, sans-IO.
 *
 * One JSON object per line (JSON Lines, UTF-8), with the keys in this order, as awp-sim writes them:
 * `class` (first record only, AWP-AUD-007), `ts_mono_ns`, `direction`, `kind`, `body` (AWP-AUD-002) and
 * `prev_hash` (AWP-AUD-003): `null` on a file's first line, otherwise the lowercase hex SHA-256 of the UTF-8
 * bytes of the previous line, without its newline.
 */
import { hash } from 'node:crypto';

/** The record classes of AWP-AUD-007, spelled as awp-sim labels its files. */
export const RECORD_CLASSES = ['audit_record', 'replay_bundle', 'dataset_export'] as const;
export type RecordClass = (typeof RECORD_CLASSES)[number];

/**
 * Who sent what the record holds, on which hop. `agent` and `world` are what the edge received from each
 * peer, as the peer sent it (awp-sim's `agent` and `world`); `edge_to_agent` and `edge_to_world` are what the
 * edge sent to each, as that peer received it (the edge's rewrites show as the difference); `edge` is the
 * edge's own: the header, its decisions, drops, rotation and the end.
 */
export const DIRECTIONS = ['agent', 'world', 'edge_to_agent', 'edge_to_world', 'edge'] as const;
export type Direction = (typeof DIRECTIONS)[number];

/**
 * `header`: the first record of a file; `message`: a control message; `frame`: a frame's header and the
 * SHA-256 of its payload (with the payload in a replay bundle); `frames`: frames delivered to an observer
 * session, batched (`frames`: the bodies `frame` records would have); `edge`: a decision of the edge (a message
 * it did not relay, a session detached, a connection lost); `dropped`: how many records the write queue
 * could not take; `rotated`: this file ends, the session continues in the next; `end`: the recording ended;
 * `frame_refs`: frames delivered to an observer session, by reference to the hub log (frame-refs.ts).
 */
export const KINDS = [
  'header',
  'message',
  'frame',
  'frames',
  'frame_refs',
  'edge',
  'dropped',
  'rotated',
  'end',
] as const;
export type Kind = (typeof KINDS)[number];

/** Lowercase hex SHA-256 (of a string's UTF-8 bytes). */
export function sha256Hex(data: string | Uint8Array): string {
  return hash('sha256', data, 'hex');
}

/**
 * One line, given its body already as JSON text (so a body shared by many records is serialised once).
 * `recordClass` only on a file's first line.
 */
export function recordLine(
  ts_mono_ns: number,
  direction: Direction,
  kind: Kind,
  bodyJson: string,
  prevHash: string | null,
  recordClass?: RecordClass,
): string {
  const head = recordClass === undefined ? '{' : `{"class":"${recordClass}",`;
  const prev = prevHash === null ? 'null' : `"${prevHash}"`;
  return `${head}"ts_mono_ns":${ts_mono_ns},"direction":"${direction}","kind":"${kind}","body":${bodyJson},"prev_hash":${prev}}`;
}
