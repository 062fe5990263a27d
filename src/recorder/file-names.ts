/**
 * Recording file names, sans-IO: `<route>.<kind>.<session id>.<start>.<segment>.jsonl`, e.g.
 * `arm.relay.sess_4f2a.20261130T164800123Z.0000.jsonl`. The start is the recording's UTC start to the
 * millisecond; the segment counts rotations from 0000. Names sort by route, kind, session, start, segment.
 * A route or session id is a peer's string: anything but letters, digits, `_` and `-` becomes `_`, at most
 * 64 characters are kept, and an id changed that way gets the first 8 hex of its SHA-256 appended.
 */
import { sha256Hex } from './record.js';

export interface FileNameParts {
  readonly route: string;
  readonly kind: 'relay' | 'observer' | 'hub';
  readonly session_id: string;
  readonly startedWallMs: number;
}

export const RECORDING_SUFFIX = '.jsonl';

function safe(s: string): string {
  const cleaned = s.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64);
  return cleaned === s && s !== '' ? s : `${cleaned}-${sha256Hex(s).slice(0, 8)}`;
}

/** `20261130T164800123Z` */
export function compactTime(wallMs: number): string {
  return new Date(wallMs).toISOString().replace(/[-:.]/g, '');
}

export function segmentFileName(p: FileNameParts, segment: number): string {
  const seg = String(segment).padStart(4, '0');
  return `${safe(p.route)}.${p.kind}.${safe(p.session_id)}.${compactTime(p.startedWallMs)}.${seg}${RECORDING_SUFFIX}`;
}

/** The prefix every recording file of a route starts with (retention is per route). */
export function routePrefix(route: string): string {
  return `${safe(route)}.`;
}
