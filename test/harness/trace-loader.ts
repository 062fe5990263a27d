/** Reads the vendored wire traces and turns each JSON line into a typed entry. */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Json, JsonObject, ParsedTrace, TraceEntry, TraceMarker } from './trace-types.js';
import { isJsonObject } from './trace-types.js';

export const TRACES_DIR = fileURLToPath(new URL('../../src/protocol/spec/traces/', import.meta.url));

/** The ten traces vendored from the spec (PROVENANCE.md). */
export const TRACE_NAMES = [
  'core-lockstep',
  'core-streaming',
  'cancel',
  'close-during-motion',
  'disconnect',
  'estop',
  'quiet-agent',
  'retry',
  'approval',
  'lockstep-replace',
] as const;

export function parseTrace(text: string, name: string): ParsedTrace {
  const file = `${name}.jsonl`;
  const entries: TraceEntry[] = [];
  text.split('\n').forEach((raw, index) => {
    const line = index + 1;
    if (raw.trim() === '') return;
    let value: Json;
    try {
      value = JSON.parse(raw) as Json;
    } catch (err) {
      throw new Error(`${file}:${line}: not JSON (${(err as Error).message})`, { cause: err });
    }
    entries.push(parseEntry(value, { file, line }));
  });
  return { name, entries };
}

export function loadTrace(name: string): ParsedTrace {
  return parseTrace(readFileSync(`${TRACES_DIR}${name}.jsonl`, 'utf8'), name);
}

function parseEntry(value: Json, source: { file: string; line: number }): TraceEntry {
  const where = `${source.file}:${source.line}`;
  if (!isJsonObject(value)) throw new Error(`${where}: a trace line must be a JSON object`);
  if (typeof value.marker === 'string') {
    const marker: { -readonly [K in keyof TraceMarker]: TraceMarker[K] } = {
      kind: 'marker',
      marker: value.marker,
      source,
    };
    if (value.given !== undefined) {
      if (!isJsonObject(value.given)) throw new Error(`${where}: marker "given" must be an object`);
      marker.given = value.given;
    }
    if (value.t0_ns !== undefined) {
      if (typeof value.t0_ns !== 'number') throw new Error(`${where}: marker "t0_ns" must be a number`);
      marker.t0_ns = value.t0_ns;
    }
    return marker;
  }
  const { from, step, msg, delivered } = value;
  if (from !== 'agent' && from !== 'world') throw new Error(`${where}: "from" must be "agent" or "world"`);
  if (typeof step !== 'string') throw new Error(`${where}: "step" must be a string`);
  if (!isJsonObject(msg)) throw new Error(`${where}: "msg" must be an object`);
  if (delivered !== undefined && delivered !== false)
    throw new Error(`${where}: "delivered" may only be false`);
  if (delivered === false && from !== 'world')
    throw new Error(`${where}: only world messages can be undelivered`);
  return { kind: 'message', from, step, msg, delivered: delivered !== false, source };
}

/** What a marker asks of the transport. Only a dropped control connection does anything; the others
 * (approval timeouts, e-stop presses, elapsed time) are world-internal events with no transport action. */
export type TransportAction = 'drop-control-connection' | 'none';

export function transportActionOf(marker: TraceMarker): TransportAction {
  return /\bcontrol connection drops\b/i.test(marker.marker) ? 'drop-control-connection' : 'none';
}

/** The `given` of a continuation trace (its first marker), if any. */
export function givenOf(trace: ParsedTrace): JsonObject | undefined {
  const first = trace.entries[0];
  return first?.kind === 'marker' ? first.given : undefined;
}
