/** Shapes of the spec's wire traces (src/protocol/spec/traces/*.jsonl) as the harness uses them. */

export type Json = null | boolean | number | string | Json[] | JsonObject;
export interface JsonObject {
  [key: string]: Json;
}

export type Side = 'agent' | 'world';

/** Where an entry came from, for error messages: file name, 1-based line, and whether the harness changed it. */
export interface TraceSource {
  readonly file: string;
  readonly line: number;
  /** Set when the harness extended the line (e.g. the approval trace's manifest); says what was added. */
  readonly extended?: string;
}

/** A message line: `{from, step, msg, delivered?}`. */
export interface TraceMessage {
  readonly kind: 'message';
  readonly from: Side;
  readonly step: string;
  readonly msg: JsonObject;
  /** False only for `delivered: false` lines: the world sends it, the agent never receives it. */
  readonly delivered: boolean;
  readonly source: TraceSource;
}

/** A transport line: `{marker, given?, t0_ns?}`. */
export interface TraceMarker {
  readonly kind: 'marker';
  readonly marker: string;
  readonly given?: JsonObject;
  readonly t0_ns?: number;
  readonly source: TraceSource;
}

export type TraceEntry = TraceMessage | TraceMarker;

export interface ParsedTrace {
  /** File name without `.jsonl`, e.g. `core-streaming`. */
  readonly name: string;
  readonly entries: readonly TraceEntry[];
}

/** A trace made playable: the prefix that establishes its session (empty for the core traces), then the trace. */
export interface PlayScript {
  readonly name: string;
  /** The core trace the prefix was taken from, if any. */
  readonly basedOn?: string;
  readonly prefix: readonly TraceEntry[];
  readonly body: readonly TraceEntry[];
  /** `prefix` followed by `body`: what is played. */
  readonly entries: readonly TraceEntry[];
}

export function isJsonObject(value: Json | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Deep copy through JSON (all trace values are plain JSON). */
export function cloneJson<T extends Json>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

export function describeEntry(entry: TraceEntry): string {
  const where = `${entry.source.file}:${entry.source.line}${entry.source.extended !== undefined ? ' (extended)' : ''}`;
  if (entry.kind === 'marker') return `marker [${where}] "${entry.marker}"`;
  const arrow = entry.from === 'agent' ? 'agent → world' : 'world → agent';
  return `step "${entry.step}" (${arrow}) [${where}]`;
}
