/**
 * Checks a recording (sans-IO): the AWP-AUD-002 shape of every record, the `class` label of the first
 * (AWP-AUD-007) and the hash chain (AWP-AUD-003). Any file in the format verifies (awp-sim's audit logs
 * too); a file the edge wrote must also use the edge's directions and kinds, keep `ts_mono_ns` from going
 * backwards, and end with a closing record (`end`, or `rotated` when the session continues in another
 * file). The chain proves every line but the last was not edited, removed or reordered; the last line is
 * proven by its hash logged when the edge closed the file (`finalHash`), or by the next file's
 * `continues.last_hash`.
 */
import { DIRECTIONS, KINDS, RECORD_CLASSES, sha256Hex } from './record.js';
import { isRecord } from '../protocol/json-object.js';

export interface FileSummary {
  readonly records: number;
  readonly recordClass: string;
  /** The header's body (the first record's). */
  readonly header: Readonly<Record<string, unknown>>;
  /** Whether the edge wrote it (`body.recorder: "awp-edge"` in the header). */
  readonly edge: boolean;
  readonly lastKind: string;
  /** The hash of the last line. */
  readonly lastHash: string;
}

export type Verdict =
  | { readonly ok: true; readonly summary: FileSummary }
  | { readonly ok: false; readonly line: number; readonly problem: string };

export interface VerifyOptions {
  /** Accept a file without its closing record (the edge may still be writing it). */
  readonly allowOpen?: boolean;
  /** The hash of the file's last line, from the edge's log (`recording_closed`, `final_hash`). */
  readonly finalHash?: string;
}

const HEX64 = /^[0-9a-f]{64}$/;

/** A value for a message (`none` when absent). */
function shown(v: unknown): string {
  return v === undefined ? 'none' : JSON.stringify(v);
}

const fail = (line: number, problem: string): Verdict => ({ ok: false, line, problem });

export function verifyText(text: string, options: VerifyOptions = {}): Verdict {
  if (text === '') return fail(1, 'the file is empty (no header record)');
  const lines = text.split('\n');
  const partial = lines.pop();
  if (partial !== '') return fail(lines.length + 1, 'the last line has no newline (a write was cut short)');
  let prev: string | null = null;
  let header: Record<string, unknown> = {};
  let edge = false;
  let lastTs = 0;
  let lastKind = '';
  let recordClass = '';
  for (const [i, line] of lines.entries()) {
    const n = i + 1;
    let r: unknown;
    try {
      r = JSON.parse(line);
    } catch {
      return fail(n, line === '' ? 'an empty line' : 'not JSON');
    }
    if (!isRecord(r)) return fail(n, 'not a JSON object');
    const shape = shapeProblem(r, n);
    if (shape !== undefined) return fail(n, shape);
    if (r.prev_hash !== prev)
      return fail(
        n,
        prev === null
          ? 'prev_hash must be null on the first line'
          : `prev_hash does not match the previous line (expected ${prev.slice(0, 12)}..., got ${String(r.prev_hash).slice(0, 12)}...): line ${n - 1} was edited, or a line was removed or moved here`,
      );
    const kind = r.kind as string;
    if (n === 1) {
      if (!RECORD_CLASSES.includes(r.class as never))
        return fail(
          1,
          `the first record must label its class (${RECORD_CLASSES.join(', ')}; AWP-AUD-007), got ${shown(r.class)}`,
        );
      recordClass = r.class as string;
      header = r.body as Record<string, unknown>;
      edge = header.recorder === 'awp-edge';
      if (edge && kind !== 'header') return fail(1, `the first record must be a header, got kind ${kind}`);
    } else if (edge) {
      const problem = edgeProblem(r, kind, lastKind, lastTs);
      if (problem !== undefined) return fail(n, problem);
    }
    lastTs = r.ts_mono_ns as number;
    lastKind = kind;
    prev = sha256Hex(line);
  }
  if (edge && !options.allowOpen && lastKind !== 'end' && lastKind !== 'rotated')
    return fail(
      lines.length,
      'the file ends without its closing record (end or rotated): truncated, or the edge did not close it (--open accepts that)',
    );
  if (options.finalHash !== undefined && options.finalHash !== prev)
    return fail(
      lines.length,
      `the last line's hash ${prev!.slice(0, 12)}... is not the final hash given (${options.finalHash.slice(0, 12)}...): the last line was edited, or lines were removed from the end`,
    );
  return {
    ok: true,
    summary: { records: lines.length, recordClass, header, edge, lastKind, lastHash: prev! },
  };
}

/** AWP-AUD-002: `ts_mono_ns`, `direction`, `kind`, `body`; and `prev_hash` (AWP-AUD-003). */
function shapeProblem(r: Record<string, unknown>, n: number): string | undefined {
  const ts = r.ts_mono_ns;
  if (typeof ts !== 'number' || !Number.isSafeInteger(ts) || ts < 0)
    return `ts_mono_ns must be an integer from 0 to 2^53 - 1, got ${shown(ts)}`;
  if (typeof r.direction !== 'string' || r.direction === '') return 'direction must be a non-empty string';
  if (typeof r.kind !== 'string' || r.kind === '') return 'kind must be a non-empty string';
  if (!isRecord(r.body)) return 'body must be a JSON object';
  if (!('prev_hash' in r)) return 'prev_hash is missing (AWP-AUD-003)';
  if (n > 1 && (typeof r.prev_hash !== 'string' || !HEX64.test(r.prev_hash)))
    return 'prev_hash must be 64 lowercase hex digits';
  return undefined;
}

/** What the edge's own files must also satisfy after their header. */
function edgeProblem(
  r: Record<string, unknown>,
  kind: string,
  lastKind: string,
  lastTs: number,
): string | undefined {
  if (!DIRECTIONS.includes(r.direction as never)) return `unknown direction ${JSON.stringify(r.direction)}`;
  if (!KINDS.includes(kind as never)) return `unknown kind ${JSON.stringify(kind)}`;
  if (kind === 'header') return 'a second header record';
  if ('class' in r) return 'class belongs to the first record only';
  if (lastKind === 'end' || lastKind === 'rotated') return `a record after the ${lastKind} record`;
  if ((r.ts_mono_ns as number) < lastTs)
    return `ts_mono_ns goes backwards (${String(r.ts_mono_ns)} after ${lastTs})`;
  return undefined;
}

export interface NamedSummary {
  readonly name: string;
  readonly summary: FileSummary;
}

/**
 * Files of one session in order: each rotated file's next must be the file that follows, and its header
 * must continue from the previous file's last line. Returns the first problem as `[file, problem]`.
 */
export function verifyLinks(files: readonly NamedSummary[]): [string, string] | undefined {
  for (let i = 1; i < files.length; i++) {
    const before = files[i - 1]!;
    const after = files[i]!;
    const continues = after.summary.header.continues;
    if (!isRecord(continues)) continue; // another session's file, or the start of one
    if (continues.file !== baseName(before.name))
      return [
        after.name,
        `continues ${JSON.stringify(continues.file)}, but the file before it is ${baseName(before.name)} (a file of the session is missing)`,
      ];
    if (continues.last_hash !== before.summary.lastHash)
      return [
        after.name,
        `continues.last_hash does not match the last line of ${baseName(before.name)}: that line was edited, or lines were removed from its end`,
      ];
  }
  return undefined;
}

export function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}
