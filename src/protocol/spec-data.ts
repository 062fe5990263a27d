/**
 * The vendored AWP spec data protocol needs at run time: the schemas and the action lifecycle, imported as
 * JSON modules (protocol is sans-IO: it reads no files itself) and checked once, the first time each loader
 * is called. The build copies src/protocol/spec to dist/protocol/spec, next to the compiled modules.
 * The test-only data (frame vectors, wire traces, examples, requirement matrix) is read by
 * test/harness/spec-data.ts.
 */
import lifecycleDocument from './spec/action-lifecycle.json' with { type: 'json' };
import { SCHEMA_DOCUMENTS } from './spec-schemas.js';
import { isRecord } from './json-object.js';

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

function isStringArray(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}

export function fail(path: string, what: string): never {
  throw new Error(`vendored spec data ${path}: ${what}`);
}

export function str(obj: JsonObject, key: string, path: string): string {
  const v = obj[key];
  if (typeof v !== 'string') fail(path, `field '${key}' must be a string`);
  return v;
}

export function memo<T>(load: () => T): () => T {
  let cached: { value: T } | undefined;
  return () => {
    cached ??= { value: load() };
    return cached.value;
  };
}

/** Every schema under schemas/v0.1 (recursively), sorted by file. */
export const loadSchemaFiles = memo((): readonly SchemaFile[] =>
  SCHEMA_DOCUMENTS.map(([file, schema]) => {
    const path = `schemas/v0.1/${file}`;
    if (!isRecord(schema)) fail(path, 'not a JSON object');
    const id = str(schema, '$id', path);
    if (id !== SCHEMA_BASE_URI + file) fail(path, `$id ${id} does not match its file name`);
    return { file, id, schema };
  }),
);

/** The action state machine (generated from the spec's action-lifecycle.yaml). */
export const loadLifecycleData = memo((): LifecycleData => {
  const path = 'action-lifecycle.json';
  const doc: unknown = lifecycleDocument;
  if (!isRecord(doc)) fail(path, 'not a JSON object');
  const { states, pre_execution_cancel: preCancel, transitions } = doc;
  if (!isRecord(states) || !Object.values(states).every((c) => typeof c === 'string')) {
    fail(path, "'states' must map state names to classes");
  }
  if (!isStringArray(preCancel)) fail(path, "'pre_execution_cancel' must be a string array");
  if (!Array.isArray(transitions)) fail(path, "'transitions' must be an array");
  return {
    states: states as Record<string, string>, // checked just above: every value is a string
    pre_execution_cancel: preCancel,
    transitions: transitions.map((t: unknown, i): LifecycleTransitionData => {
      if (!isRecord(t)) fail(path, `transition ${i} is not an object`);
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
