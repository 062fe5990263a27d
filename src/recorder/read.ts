/** Reading a recording back (sans-IO): its records, for the timeline and for replay. */
import { isRecord } from '../protocol/json-object.js';

export interface StoredRecord {
  readonly class?: string;
  readonly ts_mono_ns: number;
  readonly direction: string;
  readonly kind: string;
  readonly body: Readonly<Record<string, unknown>>;
}

/** The records of a file's text; lines that are not records in the AWP-AUD-002 shape are skipped. */
export function parseRecords(text: string): StoredRecord[] {
  const out: StoredRecord[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    let r: unknown;
    try {
      r = JSON.parse(line);
    } catch {
      continue;
    }
    if (
      isRecord(r) &&
      typeof r.ts_mono_ns === 'number' &&
      typeof r.direction === 'string' &&
      typeof r.kind === 'string' &&
      isRecord(r.body)
    )
      out.push(r as unknown as StoredRecord);
  }
  return out;
}

/** A recorded value as text: strings as they are, anything else as JSON (`?` when absent). */
export function shown(v: unknown): string {
  if (typeof v === 'string') return v;
  return v === undefined ? '?' : JSON.stringify(v);
}
