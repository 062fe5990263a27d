/**
 * A recording as a readable timeline (`awp-edge recordings show`), sans-IO: one line per record, time in
 * milliseconds since the recording's start, who sent what to whom, and what it was. Runs of frames are
 * summed up in one line per run unless every frame is asked for.
 */
import { MAX_REF_NUMBERS, refNumbers } from './frame-refs.js';
import { grantedChannels } from './grants.js';
import { isRecord } from '../protocol/json-object.js';
import { shown, type StoredRecord } from './read.js';

export interface TimelineOptions {
  /** One line per frame (default: one line per run of frames). */
  readonly frames?: boolean;
  /** Longest params or result shown, in characters. */
  readonly width?: number;
  /** A hub log's frame by its file and number (`frame_refs` records), if that file is at hand. */
  readonly resolve?: (hubFile: string, n: number) => Readonly<Record<string, unknown>> | undefined;
}

/**
 * Most frames by reference one timeline expands, over all its records: each record is capped
 * (MAX_REF_NUMBERS), but a file of many small records claiming huge runs would take minutes. Records past
 * it are shown as they are, unexpanded.
 */
export const MAX_TIMELINE_REFS = 8 * 1024 * 1024;

const ARROWS: Readonly<Record<string, string>> = {
  agent: 'agent → edge',
  world: 'world → edge',
  edge_to_agent: 'edge → agent',
  edge_to_world: 'edge → world',
  edge: 'edge',
};

function compact(v: unknown, width: number): string {
  const s = JSON.stringify(v);
  return s.length > width ? `${s.slice(0, width - 1)}…` : s;
}

function shortHash(v: unknown): string {
  return typeof v === 'string' ? v.slice(0, 12) : '?';
}

export function timeline(records: readonly StoredRecord[], o: TimelineOptions = {}): string[] {
  const width = o.width ?? 120;
  const channels = new Map<number, string>();
  const out: string[] = [];
  const refs = { left: MAX_TIMELINE_REFS };
  let run: { first: number; last: number; count: Map<string, number>; direction: string } | undefined;
  const at = (ts: number) => `${(ts / 1e6).toFixed(3).padStart(12)} ms`;
  const line = (ts: number, direction: string, what: string) =>
    out.push(`${at(ts)}  ${(ARROWS[direction] ?? direction).padEnd(13)} ${what}`);
  const flushRun = () => {
    if (run === undefined) return;
    const parts = [...run.count].map(([ch, n]) => `${ch} ×${n}`);
    const until = run.last > run.first ? ` (to ${(run.last / 1e6).toFixed(3)} ms)` : '';
    line(run.first, run.direction, `frames: ${parts.join(', ')}${until}`);
    run = undefined;
  };
  for (const r of records) {
    const b = r.body;
    if (r.kind === 'frame') {
      const id = typeof b.channel_id === 'number' ? b.channel_id : -1;
      const name = channels.get(id) ?? `channel ${id}`;
      if (o.frames === true) {
        line(r.ts_mono_ns, r.direction, frameLine(b, channels));
        continue;
      }
      if (run !== undefined && run.direction !== r.direction) flushRun();
      run ??= { first: r.ts_mono_ns, last: r.ts_mono_ns, count: new Map(), direction: r.direction };
      run.last = r.ts_mono_ns;
      run.count.set(name, (run.count.get(name) ?? 0) + 1);
      continue;
    }
    const batch = batchFrames(r, o.resolve, refs);
    if (batch !== undefined && o.frames === true) {
      for (const f of batch)
        if (typeof f === 'number') line(r.ts_mono_ns, r.direction, `frame #${f} of ${shown(b.hub_file)}`);
        else if (isRecord(f)) line(r.ts_mono_ns, r.direction, frameLine(f, channels));
      continue;
    }
    if (batch !== undefined) {
      if (run !== undefined && run.direction !== r.direction) flushRun();
      run ??= { first: r.ts_mono_ns, last: r.ts_mono_ns, count: new Map(), direction: r.direction };
      run.last = r.ts_mono_ns;
      for (const f of batch) {
        const id = isRecord(f) && typeof f.channel_id === 'number' ? f.channel_id : -1;
        const name =
          typeof f === 'number' ? 'frames (hub file not at hand)' : (channels.get(id) ?? `channel ${id}`);
        run.count.set(name, (run.count.get(name) ?? 0) + 1);
      }
      continue;
    }
    flushRun();
    if (r.kind === 'message') {
      if (isRecord(b.result)) for (const [id, name] of grantedChannels(b.result)) channels.set(id, name);
      line(r.ts_mono_ns, r.direction, message(b, width));
    } else line(r.ts_mono_ns, r.direction, other(r, width));
  }
  flushRun();
  return out;
}

/**
 * The frames of a `frames` record (their bodies), or of a `frame_refs` record (each body the hub file
 * holds, or its number where the file is not at hand); undefined for any other record.
 */
function batchFrames(
  r: StoredRecord,
  resolve: TimelineOptions['resolve'],
  refs: { left: number },
): unknown[] | undefined {
  const b = r.body;
  if (r.kind === 'frames') return Array.isArray(b.frames) ? (b.frames as unknown[]) : undefined;
  if (r.kind !== 'frame_refs') return undefined;
  const numbers = refNumbers(b, Math.min(MAX_REF_NUMBERS, refs.left));
  if (numbers === undefined || typeof b.hub_file !== 'string') return undefined;
  refs.left -= numbers.length;
  const file = b.hub_file;
  return numbers.map((n) => resolve?.(file, n) ?? n);
}

/** One frame: its method, channel, seq, tick, payload hash, and whether the payload was kept. */
function frameLine(b: Readonly<Record<string, unknown>>, channels: ReadonlyMap<number, string>): string {
  const id = typeof b.channel_id === 'number' ? b.channel_id : -1;
  const tick = b.tick !== undefined ? ` tick ${shown(b.tick)}` : '';
  const kept = typeof b.payload_b64 === 'string' ? ', payload kept' : '';
  const name = channels.get(id) ?? `channel ${id}`;
  return `${shown(b.method)} ${name} seq ${shown(b.seq)}${tick} sha256:${shortHash(b.payload_sha256)}${kept}`;
}

function message(b: Readonly<Record<string, unknown>>, width: number): string {
  if (b.unparsed !== undefined)
    return `(not JSON-RPC: ${shown(b.unparsed)}, ${shown(b.bytes)} bytes, sha256:${shortHash(b.sha256)})`;
  const id = b.id !== undefined ? ` #${JSON.stringify(b.id)}` : '';
  if (typeof b.method === 'string') {
    const p = b.params;
    if (b.method === 'action.status' && isRecord(p)) {
      const reason = p.reason !== undefined ? ` (${shown(p.reason)})` : '';
      return `action.status ${shown(p.action_id)} ${shown(p.state)}${reason} status_seq ${shown(p.status_seq)}`;
    }
    return `${b.method}${id}${p === undefined ? '' : `  ${compact(p, width)}`}`;
  }
  if (isRecord(b.error)) return `error${id} ${shown(b.error.code)} ${shown(b.error.message)}`;
  return `result${id}  ${compact(b.result, width)}`;
}

function other(r: StoredRecord, width: number): string {
  const b = r.body;
  switch (r.kind) {
    case 'header': {
      const parts = [`segment ${shown(b.segment ?? 0)}`, r.class ?? ''];
      if (isRecord(b.continues)) parts.push(`continues ${shown(b.continues.file)}`);
      return `header (${parts.filter((p) => p !== '').join(', ')})`;
    }
    case 'dropped':
      return `!! ${shown(b.records)} records dropped here: the write queue was full`;
    case 'rotated':
      return `continues in ${shown(b.next)}`;
    case 'end':
      return `end: ${shown(b.reason)}`;
    default: {
      const { event, ...rest } = b;
      return `${typeof event === 'string' ? event : r.kind}${Object.keys(rest).length > 0 ? `  ${compact(rest, width)}` : ''}`;
    }
  }
}

/** The first line of `show`: what the file is. */
export function describeHeader(records: readonly StoredRecord[]): string {
  const first = records[0];
  if (first === undefined) return 'no records';
  const b = first.body;
  const kind = typeof b.session_kind === 'string' ? `${b.session_kind} session` : 'session';
  const parts = [
    first.class ?? 'unlabelled',
    `${kind} ${shown(b.session_id ?? '?')}`,
    ...(b.route !== undefined ? [`route ${shown(b.route)}`] : []),
    ...(b.started_at !== undefined ? [`started ${shown(b.started_at)}`] : []),
    ...(b.recorder !== undefined
      ? [`recorded by ${shown(b.recorder)} ${shown(b.edge_version ?? '')}`.trim()]
      : []),
  ];
  return `${parts.join(', ')}; ${records.length} records`;
}
