/**
 * The integer-range rule for 64-bit JSON fields (AWP-CTL-009, AWP-CLK-005): every field typed by common.schema's
 * `u53`/`i53` family (`ts_mono_ns`, `ts_sim_ns`, `seq`, `tick`, `status_seq`, latency stats, ...) must stay within
 * ±(2^53 − 1). A larger value answers `AWP_INTEGER_RANGE` and ends the session, which is harsher than a schema
 * error, so this check is separate and exact.
 *
 * The field locations are derived once from the vendored schemas (following `$ref`s, nested objects, arrays
 * and maps keyed by channel id). Free-form places (action `params`, `detail`, vendor fields) hold no 64-bit
 * fields and are not looked at.
 *
 * A violation is an integer whose magnitude exceeds 2^53 − 1; JSON.parse turns any such literal into a number
 * >= 2^53 (or <= −2^53). Non-integers, strings, and in-range negatives in a u53 field are schema errors
 * (`minimum`, `type`), not range errors.
 */
import type { RpcMessage } from './jsonrpc.js';
import { AWP_METHODS, type MessagePart, schemaFileFor } from './methods.js';
import { loadSchemaFiles, SCHEMA_BASE_URI, type JsonObject } from './spec-data.js';
import { isRecord } from './json-object.js';

export const MAX_U53 = Number.MAX_SAFE_INTEGER; // 2^53 − 1

/** A count or sequence number a peer sends (AWP-CTL-009): an integer from 0 to 2^53 - 1. */
export function isCount(v: unknown): v is number {
  return Number.isSafeInteger(v) && (v as number) >= 0;
}

export type IntegerBound = 'u53' | 'i53';

export type PathSegment = { readonly prop: string } | 'items' | 'values';

export interface IntegerField {
  /** Pointer template: `*` stands for any array index or map key, e.g. `/params/channels/*\/staleness_ns/p95`. */
  readonly pointer: string;
  readonly path: readonly PathSegment[];
  readonly bound: IntegerBound;
  /** The common.schema `$defs` name the field is declared with, e.g. `status_seq`, `ts_mono_ns`, `u53`. */
  readonly def: string;
}

interface IntNode {
  bound?: IntegerBound;
  def?: string;
  props?: Map<string, IntNode>;
  items?: IntNode;
  values?: IntNode;
  /** `props` flattened for the per-message walk (set by `finalize`). */
  propKeys?: string[];
  propNodes?: IntNode[];
}

function finalize(node: IntNode): IntNode {
  if (node.props !== undefined) {
    for (const k of node.props.keys()) {
      if (k in Object.prototype) throw new Error(`64-bit field name ${k} shadows an Object.prototype member`);
    }
    node.propKeys = [...node.props.keys()];
    node.propNodes = [...node.props.values()].map(finalize);
  }
  if (node.items !== undefined) finalize(node.items);
  if (node.values !== undefined) finalize(node.values);
  return node;
}

const COMMON_ID = `${SCHEMA_BASE_URI}common.schema.json`;

function unescapeToken(t: string): string {
  return t.replace(/~1/g, '/').replace(/~0/g, '~');
}

function escapeToken(t: string): string {
  return t.replace(/~/g, '~0').replace(/\//g, '~1');
}

class SchemaWalker {
  private readonly docs = new Map<string, JsonObject>();
  private readonly bounds = new Map<unknown, IntegerBound>();
  /** common.schema `$defs` entries by identity, to name the fields. */
  private readonly commonDefs = new Map<unknown, string>();

  constructor() {
    for (const f of loadSchemaFiles()) this.docs.set(f.id, f.schema);
    const common = this.docs.get(COMMON_ID);
    const defs = common?.$defs;
    if (!isRecord(defs) || !isRecord(defs.u53) || !isRecord(defs.i53)) {
      throw new Error('common.schema.json lacks the u53/i53 $defs');
    }
    this.bounds.set(defs.u53, 'u53');
    this.bounds.set(defs.i53, 'i53');
    for (const [name, d] of Object.entries(defs)) this.commonDefs.set(d, name);
  }

  /** Resolves a `$ref` against the document it appears in; undefined for documents outside the vendored set. */
  private resolve(ref: string, baseId: string): { node: unknown; docId: string } | undefined {
    const url = new URL(ref, baseId);
    const fragment = decodeURIComponent(url.hash.slice(1));
    url.hash = '';
    const docId = url.href;
    let node: unknown = this.docs.get(docId);
    if (node === undefined) return undefined; // e.g. the JSON Schema meta-schema: no AWP fields inside
    for (const token of fragment.split('/').slice(1)) {
      node = isRecord(node) ? node[unescapeToken(token)] : undefined;
    }
    return { node, docId };
  }

  /** Merges the 64-bit fields of `schema` into `into`; returns whether it found any. */
  walk(schema: unknown, docId: string, into: IntNode, def: string | undefined, stack: Set<unknown>): boolean {
    if (!isRecord(schema) || stack.has(schema)) return false;
    const bound = this.bounds.get(schema);
    if (bound !== undefined) {
      into.bound = bound;
      into.def = def ?? bound;
      return true;
    }
    stack.add(schema);
    let found = false;
    const ref = schema.$ref;
    if (typeof ref === 'string') {
      const target = this.resolve(ref, docId);
      if (target !== undefined) {
        const name = this.commonDefs.get(target.node);
        found = this.walk(target.node, target.docId, into, def ?? name, stack) || found;
      }
    }
    const props = schema.properties;
    if (isRecord(props)) {
      for (const [key, sub] of Object.entries(props)) {
        const child = into.props?.get(key) ?? {};
        if (this.walk(sub, docId, child, undefined, stack)) {
          into.props ??= new Map();
          into.props.set(key, child);
          found = true;
        }
      }
    }
    const childOf = (slot: 'items' | 'values', sub: unknown): void => {
      const child = into[slot] ?? {};
      if (this.walk(sub, docId, child, undefined, stack)) {
        into[slot] = child;
        found = true;
      }
    };
    if (isRecord(schema.items)) childOf('items', schema.items);
    if (isRecord(schema.additionalProperties)) childOf('values', schema.additionalProperties);
    // Alternatives and conditional branches: a field typed 64-bit in any branch is checked (union).
    for (const key of ['allOf', 'anyOf', 'oneOf'] as const) {
      const list = schema[key];
      if (Array.isArray(list))
        for (const sub of list) found = this.walk(sub, docId, into, def, stack) || found;
    }
    for (const key of ['then', 'else'] as const)
      found = this.walk(schema[key], docId, into, def, stack) || found;
    stack.delete(schema);
    return found;
  }

  rootFor(file: string): IntNode | undefined {
    const id = SCHEMA_BASE_URI + file;
    const root: IntNode = {};
    return this.walk(this.docs.get(id), id, root, undefined, new Set()) ? finalize(root) : undefined;
  }
}

type Roots = ReadonlyMap<string, IntNode>;

/** Per message part, the 64-bit field tree of each method that has one. */
let index: Readonly<Record<MessagePart, Roots>> | undefined;

function getIndex(): Readonly<Record<MessagePart, Roots>> {
  if (index !== undefined) return index;
  const walker = new SchemaWalker();
  const byFile = new Map<string, IntNode | undefined>();
  const parts: Record<MessagePart, Map<string, IntNode>> = {
    request: new Map<string, IntNode>(),
    notification: new Map<string, IntNode>(),
    result: new Map<string, IntNode>(),
  };
  for (const spec of AWP_METHODS) {
    for (const part of ['request', 'notification', 'result'] as const) {
      const file = schemaFileFor(spec.method, part);
      if (file === undefined) continue;
      if (!byFile.has(file)) byFile.set(file, walker.rootFor(file));
      const root = byFile.get(file);
      if (root !== undefined) parts[part].set(spec.method, root);
    }
  }
  index = parts;
  return index;
}

/** Whether a JSON value in a 64-bit field breaks the bound (AWP-CTL-009). Non-integers are not range errors. */
export function isOutOfIntegerRange(value: unknown): boolean {
  return typeof value === 'number' && Number.isInteger(value) && (value > MAX_U53 || value < -MAX_U53);
}

/** Pointer suffix of the first violation under `value`, or null; built only on a hit (runs per message). */
function check(node: IntNode, value: unknown): string | null {
  if (node.bound !== undefined && isOutOfIntegerRange(value)) return '';
  if (typeof value !== 'object' || value === null) return null;
  if (Array.isArray(value)) {
    const items = node.items;
    if (items === undefined) return null;
    for (let i = 0; i < value.length; i++) {
      const hit = check(items, value[i]);
      if (hit !== null) return `/${String(i)}${hit}`;
    }
    return null;
  }
  const obj = value as Record<string, unknown>; // non-null, non-array object from JSON.parse
  const keys = node.propKeys;
  if (keys !== undefined) {
    const nodes = node.propNodes!;
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      const v = obj[k]; // no schema key is an Object.prototype member (checked in finalize)
      if (v === undefined) continue;
      const hit = check(nodes[i]!, v);
      if (hit !== null) return `/${escapeToken(k)}${hit}`;
    }
  }
  if (node.values !== undefined) {
    const mapKeys = Object.keys(obj);
    for (let i = 0; i < mapKeys.length; i++) {
      const k = mapKeys[i]!;
      const hit = check(node.values, obj[k]);
      if (hit !== null) return `/${escapeToken(k)}${hit}`;
    }
  }
  return null;
}

/**
 * JSON pointer (from the message root: `/params/...` or `/result/...`) of the first 64-bit field whose value
 * exceeds ±(2^53 − 1), or null. `body` is the params of a request/notification, or the result of a request of
 * `method`. Unknown methods have no known 64-bit fields: null.
 */
export function findIntegerRangeViolation(method: string, part: MessagePart, body: unknown): string | null {
  const root = getIndex()[part].get(method);
  if (root === undefined) return null;
  const hit = check(root, body);
  return hit === null ? null : (part === 'result' ? '/result' : '/params') + hit;
}

/** The same check on a parsed message; a result needs the method of the request it answers. */
export function findMessageIntegerRangeViolation(msg: RpcMessage, requestMethod?: string): string | null {
  switch (msg.kind) {
    case 'request':
    case 'notification':
      return findIntegerRangeViolation(msg.method, msg.kind, msg.params);
    case 'result':
      return requestMethod === undefined
        ? null
        : findIntegerRangeViolation(requestMethod, 'result', msg.result);
    case 'error':
      return null; // error.schema declares no 64-bit fields
  }
}

function collect(node: IntNode, path: PathSegment[], out: IntegerField[], prefix: string): void {
  if (node.bound !== undefined) {
    const pointer =
      prefix + path.map((s) => (typeof s === 'string' ? '/*' : `/${escapeToken(s.prop)}`)).join('');
    out.push({ pointer, path: [...path], bound: node.bound, def: node.def ?? node.bound });
  }
  if (node.props) for (const [k, child] of node.props) collect(child, [...path, { prop: k }], out, prefix);
  if (node.items) collect(node.items, [...path, 'items'], out, prefix);
  if (node.values) collect(node.values, [...path, 'values'], out, prefix);
}

/** Every 64-bit field of a message part, e.g. to find each `status_seq` a relay must rewrite. */
export function integerFields(method: string, part: MessagePart): readonly IntegerField[] {
  const root = getIndex()[part].get(method);
  const out: IntegerField[] = [];
  if (root !== undefined) collect(root, [], out, part === 'result' ? '/result' : '/params');
  return out;
}
