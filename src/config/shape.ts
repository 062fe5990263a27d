/**
 * Checks a config against EDGE_SCHEMA with ajv (compiled once) and turns ajv's errors into the loader's
 * messages: `<source>: <key>: <expected>, got <what>`, one per key, in the order of the schema.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { EDGE_SCHEMA } from './edge-schema.js';
import { describe, describeSecret, type Problems } from './problems.js';

type SchemaNode = Readonly<Record<string, unknown>>;

let compiled: ValidateFunction | undefined;

function validator(): ValidateFunction {
  if (compiled === undefined) {
    // useDefaults fills absent keys in place (on our copy), so the result is the whole configuration.
    const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: true });
    ajv.addVocabulary(['x-expected', 'x-missing', 'x-secret']);
    compiled = ajv.compile(EDGE_SCHEMA);
  }
  return compiled;
}

export interface Shape {
  /** The config with defaults filled in; matches EdgeFile only where `clean` says so. */
  readonly data: unknown;
  /** No shape problem at this key, inside it, or at a key that contains it. */
  clean(key: string): boolean;
  /** A shape problem at exactly this key. */
  failed(key: string): boolean;
}

export function checkShape(raw: unknown, problems: Problems): Shape {
  const data = plain(raw ?? {});
  const validate = validator();
  const found = validate(data) ? [] : (validate.errors ?? []).map((e) => explain(e, data));
  found.sort((a, b) => compareOrder(a.order, b.order));
  const bad: string[] = [];
  for (const f of found) {
    if (bad.includes(f.key)) continue; // one problem per key
    bad.push(f.key);
    problems.fail(f.key, f.message);
  }
  return {
    data,
    failed: (key) => bad.includes(key),
    clean: (key) =>
      !bad.some(
        (b) =>
          b === '(top level)' ||
          b === key ||
          b.startsWith(`${key}.`) ||
          b.startsWith(`${key}[`) ||
          key.startsWith(`${b}.`) ||
          key.startsWith(`${b}[`),
      ),
  };
}

interface Found {
  readonly key: string;
  readonly message: string;
  /** Position in the schema (property index per level; -1 for an unknown key), for a stable report order. */
  readonly order: number[];
}

function explain(e: ErrorObject, data: unknown): Found {
  const segments = e.instancePath
    .split('/')
    .slice(1)
    .map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'));
  const params = e.params as Record<string, unknown>;
  if (e.keyword === 'required' || e.keyword === 'additionalProperties') {
    const parent = schemaAt(segments);
    const name = String(e.keyword === 'required' ? params.missingProperty : params.additionalProperty);
    const props = Object.keys(parent.properties ?? {});
    segments.push(name);
    const message =
      e.keyword === 'required'
        ? (expectation(schemaAt(segments), 'x-missing') ?? 'required')
        : `unknown key (expected one of: ${props.join(', ')})`;
    return { key: keyOf(segments, data), message, order: orderOf(segments) };
  }
  const node = schemaAt(segments);
  const value = valueAt(data, segments);
  const got = isSecret(segments) ? describeSecret(value) : describe(value);
  return {
    key: keyOf(segments, data),
    message: `${expectation(node, 'x-expected') ?? generic(node)}, got ${got}`,
    order: orderOf(segments),
  };
}

function expectation(node: SchemaNode, annotation: 'x-expected' | 'x-missing'): string | undefined {
  const v = node[annotation];
  return typeof v === 'string' ? v : undefined;
}

/** What a node expects, in words, when it has no `x-expected` of its own. */
function generic(node: SchemaNode): string {
  if (Array.isArray(node.enum)) return `expected one of ${node.enum.join(', ')}`;
  switch (node.type) {
    case 'object':
      return 'expected a mapping';
    case 'integer':
      return `expected an integer from ${String(node.minimum)} to ${String(node.maximum)}`;
    case 'boolean':
      return 'expected true or false';
    case 'array':
      return 'expected a list';
    default:
      return 'expected a non-empty string';
  }
}

/** The schema node that describes the value at `segments` (object properties and array items only). */
function schemaAt(segments: readonly string[]): SchemaNode {
  let node: SchemaNode = EDGE_SCHEMA;
  for (const s of segments) node = child(node, s) ?? {};
  return node;
}

function child(node: SchemaNode, segment: string): SchemaNode | undefined {
  if (node.type === 'array') return node.items as SchemaNode | undefined;
  return (node.properties as Record<string, SchemaNode> | undefined)?.[segment];
}

/** A value inside a credential (a token list's entries too) is never shown. */
function isSecret(segments: readonly string[]): boolean {
  let node: SchemaNode = EDGE_SCHEMA;
  for (const s of segments) {
    node = child(node, s) ?? {};
    if (node['x-secret'] === true) return true;
  }
  return false;
}

function orderOf(segments: readonly string[]): number[] {
  const order: number[] = [];
  let node: SchemaNode = EDGE_SCHEMA;
  for (const s of segments) {
    if (node.type === 'array') order.push(Number(s));
    else order.push(Object.keys(node.properties ?? {}).indexOf(s));
    node = child(node, s) ?? {};
  }
  return order;
}

function compareOrder(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/** `routes[0].agents.tokens`: list indices in brackets, the rest dotted; `(top level)` for the document. */
function keyOf(segments: readonly string[], data: unknown): string {
  let key = '';
  let value = data;
  for (const s of segments) {
    key = Array.isArray(value) ? `${key}[${s}]` : key === '' ? s : `${key}.${s}`;
    value = step(value, s);
  }
  return key === '' ? '(top level)' : key;
}

function valueAt(data: unknown, segments: readonly string[]): unknown {
  return segments.reduce(step, data);
}

function step(value: unknown, segment: string): unknown {
  if (typeof value !== 'object' || value === null) return undefined;
  return (value as Record<string, unknown>)[segment];
}

/** A copy the validator may fill with defaults; keys set to undefined count as absent. */
function plain(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(plain);
  const proto: unknown = typeof v === 'object' && v !== null ? Object.getPrototypeOf(v) : undefined;
  if (proto === Object.prototype || proto === null) {
    return Object.fromEntries(
      Object.entries(v as object)
        .filter(([, x]) => x !== undefined)
        .map(([k, x]) => [k, plain(x)]),
    );
  }
  return v;
}
