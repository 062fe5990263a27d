/**
 * Loaders for the vendored AWP spec data only tests use (src/protocol/spec: frame vectors, wire traces,
 * examples). They read the files synchronously, once, the first time each loader is called, and cache the
 * parsed result. The data protocol itself needs (schemas, action lifecycle) is src/protocol/spec-data.ts,
 * which reads no files.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isRecord } from '../../src/protocol/json-object.js';
import { fail, memo, str, type JsonObject } from '../../src/protocol/spec-data.js';

export interface FrameVector {
  readonly name: string;
  readonly description: string;
  readonly hex: string;
  /** Decoded header fields when the vector is valid. */
  readonly expect?: JsonObject;
  /** Error name (`AWP_MALFORMED`, `AWP_INTEGER_RANGE`) when the vector must be refused. */
  readonly expect_error?: string;
}

export type TraceParty = 'agent' | 'world';

export interface TraceLine {
  /** 1-based line number in the .jsonl file. */
  readonly line: number;
  readonly from?: TraceParty;
  readonly step?: string;
  /** The JSON-RPC message, when the line carries one. */
  readonly msg?: JsonObject;
  readonly marker?: string;
  /** Session context a trace that starts mid-session assumes (status_seq, actions, channels, ...). */
  readonly given?: JsonObject;
  /** `false` when the message was sent but never reached its receiver. */
  readonly delivered?: boolean;
  /** The whole line as parsed, for fields not modelled above (e.g. `t0_ns`). */
  readonly raw: JsonObject;
}

export interface Trace {
  /** File name without `.jsonl`, e.g. `core-lockstep`. */
  readonly name: string;
  readonly lines: readonly TraceLine[];
}

export interface ExampleDoc {
  /** File name inside examples/. */
  readonly file: string;
  /** The document's own `$schema` (a schema `$id`), if any. */
  readonly schemaId?: string;
  readonly doc: JsonObject;
}

/** Absolute path of the vendored spec folder. */
export function specDir(): string {
  return fileURLToPath(new URL('../../src/protocol/spec/', import.meta.url));
}

function readJson(path: string): unknown {
  return JSON.parse(readFileSync(path, 'utf8')) as unknown;
}

function listFiles(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const rel = prefix === '' ? entry.name : `${prefix}/${entry.name}`;
    if (entry.isDirectory()) out.push(...listFiles(join(dir, entry.name), rel));
    else out.push(rel);
  }
  return out.sort();
}

/** The binary frame test vectors (AWP-DAT-008). */
export const loadFrameVectors = memo((): readonly FrameVector[] => {
  const path = join(specDir(), 'schemas', 'test-vectors', 'frames.json');
  const doc = readJson(path);
  if (!isRecord(doc) || !Array.isArray(doc.vectors)) fail(path, 'missing vectors array');
  return doc.vectors.map((v: unknown, i): FrameVector => {
    if (!isRecord(v)) fail(path, `vector ${i} is not an object`);
    const expect = v.expect;
    const expectError = v.expect_error;
    if (expect !== undefined && !isRecord(expect)) fail(path, `vector ${i}: expect must be an object`);
    if (expectError !== undefined && typeof expectError !== 'string')
      fail(path, `vector ${i}: bad expect_error`);
    return {
      name: str(v, 'name', path),
      description: str(v, 'description', path),
      hex: str(v, 'hex', path),
      ...(expect !== undefined && { expect }),
      ...(expectError !== undefined && { expect_error: expectError }),
    };
  });
});

function parseTraceLine(raw: unknown, line: number, path: string): TraceLine {
  if (!isRecord(raw)) fail(path, `line ${line} is not an object`);
  const { from, step, msg, marker, given, delivered } = raw;
  if (from !== undefined && from !== 'agent' && from !== 'world') fail(path, `line ${line}: bad 'from'`);
  if (msg !== undefined && !isRecord(msg)) fail(path, `line ${line}: 'msg' must be an object`);
  if (given !== undefined && !isRecord(given)) fail(path, `line ${line}: 'given' must be an object`);
  if (msg !== undefined && from === undefined) fail(path, `line ${line}: a message needs 'from'`);
  return {
    line,
    raw,
    ...(from !== undefined && { from }),
    ...(typeof step === 'string' && { step }),
    ...(msg !== undefined && { msg }),
    ...(typeof marker === 'string' && { marker }),
    ...(given !== undefined && { given }),
    ...(typeof delivered === 'boolean' && { delivered }),
  };
}

/** Every wire trace in traces/, sorted by name, each line parsed. */
export const loadTraces = memo((): readonly Trace[] => {
  const dir = join(specDir(), 'traces');
  return listFiles(dir)
    .filter((f) => f.endsWith('.jsonl'))
    .map((file) => {
      const path = join(dir, file);
      const lines: TraceLine[] = [];
      readFileSync(path, 'utf8')
        .split('\n')
        .forEach((text, i) => {
          if (text.trim() === '') return;
          lines.push(parseTraceLine(JSON.parse(text) as unknown, i + 1, path));
        });
      return { name: file.slice(0, -'.jsonl'.length), lines };
    });
});

/** The example documents in examples/. */
export const loadExamples = memo((): readonly ExampleDoc[] => {
  const dir = join(specDir(), 'examples');
  return listFiles(dir)
    .filter((f) => f.endsWith('.json'))
    .map((file) => {
      const path = join(dir, file);
      const doc = readJson(path);
      if (!isRecord(doc)) fail(path, 'not a JSON object');
      const schemaId = doc.$schema;
      return { file, doc, ...(typeof schemaId === 'string' && { schemaId }) };
    });
});
