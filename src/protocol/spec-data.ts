/**
 * Loaders for the vendored AWP spec data in ./spec (schemas, frame vectors, wire traces, action lifecycle,
 * requirement matrix, examples). The only module in src/protocol that touches the file system: it reads the
 * vendored files synchronously, once, the first time each loader is called, and caches the parsed result.
 *
 * The folder is resolved relative to this module, so the same code works from src/protocol/ (tsx, vitest)
 * and from dist/protocol/ (the build copies src/protocol/spec to dist/protocol/spec).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';

/** `$id` prefix of every v0.1 schema. */
export const SCHEMA_BASE_URI = 'https://agentworldprotocol.com/schemas/v0.1/';

export type JsonObject = Record<string, unknown>;

export interface SchemaFile {
  /** Path relative to schemas/v0.1, with `/` separators, e.g. `ping.schema.json`, `profiles/gui-actions.schema.json`. */
  readonly file: string;
  /** The schema's `$id`. */
  readonly id: string;
  readonly schema: JsonObject;
}

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

export interface LifecycleTransitionData {
  readonly from: string;
  readonly to: string;
  readonly label: string;
  /** `error`: reported as a JSON-RPC error, never as an action.status. */
  readonly wire?: string;
  readonly reasons?: readonly string[];
}

export interface LifecycleData {
  readonly states: Readonly<Record<string, string>>;
  readonly pre_execution_cancel: readonly string[];
  readonly transitions: readonly LifecycleTransitionData[];
}

export interface RequirementRow {
  readonly id: string;
  readonly side: string;
  readonly applies: string;
  readonly gate: string;
  readonly test: string;
}

export interface ExampleDoc {
  /** File name inside examples/. */
  readonly file: string;
  /** The document's own `$schema` (a schema `$id`), if any. */
  readonly schemaId?: string;
  readonly doc: JsonObject;
}

export interface SpecSource {
  readonly spec_revision: string;
  readonly ref: string;
  readonly commit: string;
}

/** Absolute path of the vendored spec folder. */
export function specDir(): string {
  return fileURLToPath(new URL('./spec/', import.meta.url));
}

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isStringArray(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}

function readJson(path: string): unknown {
  return JSON.parse(readFileSync(path, 'utf8')) as unknown;
}

function fail(path: string, what: string): never {
  throw new Error(`vendored spec data ${path}: ${what}`);
}

function str(obj: JsonObject, key: string, path: string): string {
  const v = obj[key];
  if (typeof v !== 'string') fail(path, `field '${key}' must be a string`);
  return v;
}

function memo<T>(load: () => T): () => T {
  let cached: { value: T } | undefined;
  return () => {
    cached ??= { value: load() };
    return cached.value;
  };
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

/** Every schema under schemas/v0.1 (recursively), sorted by file. */
export const loadSchemaFiles = memo((): readonly SchemaFile[] => {
  const dir = join(specDir(), 'schemas', 'v0.1');
  return listFiles(dir)
    .filter((f) => f.endsWith('.schema.json'))
    .map((file) => {
      const path = join(dir, file);
      const schema = readJson(path);
      if (!isObject(schema)) fail(path, 'not a JSON object');
      const id = str(schema, '$id', path);
      if (id !== SCHEMA_BASE_URI + file) fail(path, `$id ${id} does not match its file name`);
      return { file, id, schema };
    });
});

/** The binary frame test vectors (AWP-DAT-008). */
export const loadFrameVectors = memo((): readonly FrameVector[] => {
  const path = join(specDir(), 'schemas', 'test-vectors', 'frames.json');
  const doc = readJson(path);
  if (!isObject(doc) || !Array.isArray(doc.vectors)) fail(path, 'missing vectors array');
  return doc.vectors.map((v: unknown, i): FrameVector => {
    if (!isObject(v)) fail(path, `vector ${i} is not an object`);
    const expect = v.expect;
    const expectError = v.expect_error;
    if (expect !== undefined && !isObject(expect)) fail(path, `vector ${i}: expect must be an object`);
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
  if (!isObject(raw)) fail(path, `line ${line} is not an object`);
  const { from, step, msg, marker, given, delivered } = raw;
  if (from !== undefined && from !== 'agent' && from !== 'world') fail(path, `line ${line}: bad 'from'`);
  if (msg !== undefined && !isObject(msg)) fail(path, `line ${line}: 'msg' must be an object`);
  if (given !== undefined && !isObject(given)) fail(path, `line ${line}: 'given' must be an object`);
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

/** The action state machine (generated from the spec's action-lifecycle.yaml). */
export const loadLifecycleData = memo((): LifecycleData => {
  const path = join(specDir(), 'action-lifecycle.json');
  const doc = readJson(path);
  if (!isObject(doc)) fail(path, 'not a JSON object');
  const { states, pre_execution_cancel: preCancel, transitions } = doc;
  if (!isObject(states) || !Object.values(states).every((c) => typeof c === 'string')) {
    fail(path, "'states' must map state names to classes");
  }
  if (!isStringArray(preCancel)) fail(path, "'pre_execution_cancel' must be a string array");
  if (!Array.isArray(transitions)) fail(path, "'transitions' must be an array");
  return {
    states: states as Record<string, string>, // checked just above: every value is a string
    pre_execution_cancel: preCancel,
    transitions: transitions.map((t: unknown, i): LifecycleTransitionData => {
      if (!isObject(t)) fail(path, `transition ${i} is not an object`);
      const { wire, reasons } = t;
      if (reasons !== undefined && !isStringArray(reasons)) fail(path, `transition ${i}: bad reasons`);
      return {
        from: str(t, 'from', path),
        to: str(t, 'to', path),
        label: str(t, 'label', path),
        ...(typeof wire === 'string' && { wire }),
        ...(reasons !== undefined && { reasons }),
      };
    }),
  };
});

/** Rows of the requirement matrix (requirements.yaml). */
export const loadRequirements = memo((): readonly RequirementRow[] => {
  const path = join(specDir(), 'requirements.yaml');
  const doc = parseYaml(readFileSync(path, 'utf8')) as unknown;
  if (!isObject(doc) || !Array.isArray(doc.requirements)) fail(path, "missing 'requirements' list");
  return doc.requirements.map((r: unknown, i): RequirementRow => {
    if (!isObject(r)) fail(path, `row ${i} is not a mapping`);
    return {
      id: str(r, 'id', path),
      side: str(r, 'side', path),
      applies: str(r, 'applies', path),
      gate: str(r, 'gate', path),
      test: str(r, 'test', path),
    };
  });
});

/** The requirement ids of the matrix, e.g. `AWP-CTL-009`. */
export const loadRequirementIds = memo(
  (): ReadonlySet<string> => new Set(loadRequirements().map((r) => r.id)),
);

/** The example documents in examples/. */
export const loadExamples = memo((): readonly ExampleDoc[] => {
  const dir = join(specDir(), 'examples');
  return listFiles(dir)
    .filter((f) => f.endsWith('.json'))
    .map((file) => {
      const path = join(dir, file);
      const doc = readJson(path);
      if (!isObject(doc)) fail(path, 'not a JSON object');
      const schemaId = doc.$schema;
      return { file, doc, ...(typeof schemaId === 'string' && { schemaId }) };
    });
});

/** The spec revision the vendored data pins (source.json). */
export const loadSpecSource = memo((): SpecSource => {
  const path = join(specDir(), 'source.json');
  const doc = readJson(path);
  if (!isObject(doc)) fail(path, 'not a JSON object');
  return {
    spec_revision: str(doc, 'spec_revision', path),
    ref: str(doc, 'ref', path),
    commit: str(doc, 'commit', path),
  };
});
