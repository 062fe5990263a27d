/**
 * Schema validation of AWP params, results and error objects against the vendored v0.1 schemas
 * (JSON Schema 2020-12, ajv). Every schema is compiled once, on first use of a form.
 *
 * Two forms:
 * - `received`: what a receiver applies. Unknown fields are ignored (AWP-VER-003), so `x-awp-closed` and
 *   `x-awp-lint` are annotations with no effect.
 * - `sender`: what we apply to messages we send (AWP-VER-004). Objects marked `x-awp-closed` reject properties
 *   other than the declared ones and `x-<vendor>.` keys; `x-awp-lint` subschemas are enforced.
 */
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { RpcMessage } from './jsonrpc.js';
import { ERROR_SCHEMA, methodSpec, schemaFileFor } from './methods.js';
import { loadSchemaFiles, SCHEMA_BASE_URI, type JsonObject } from './spec-data.js';
import { isRecord } from './json-object.js';

// ajv-formats is CommonJS: under NodeNext the default import is module.exports, whose `default` is the plugin.
const addFormats = addFormatsModule.default;

export type ValidationForm = 'received' | 'sender';

export interface ValidationIssue {
  /** JSON pointer of the offending value inside the message, e.g. `/params/status_seq`. */
  readonly pointer: string;
  /** The JSON Schema keyword that failed (`required`, `maximum`, `additionalProperties`, ...). */
  readonly keyword: string;
  /** Human-readable, starts with the pointer: `/params/status_seq must be <= 9007199254740991`. */
  readonly message: string;
  /** Schema file that was applied. */
  readonly schema: string;
}

export type ValidationResult =
  | {
      readonly ok: true;
      /** false when nothing was checked: unknown (vendor) method, or a result whose request is unknown. */
      readonly checked: boolean;
    }
  | { readonly ok: false; readonly issue: ValidationIssue };

export interface AwpValidator {
  readonly form: ValidationForm;
  /**
   * Validates the params of a request or notification. `part` may be omitted for methods with one form; it is
   * required for action.status (pull request vs notification). An absent `params` is validated as `{}`.
   */
  params(method: string, params: unknown, part?: 'request' | 'notification'): ValidationResult;
  /** Validates the result of a request of `method`. */
  result(method: string, result: unknown): ValidationResult;
  /** Validates a JSON-RPC error object (AWP-ERR-001). */
  error(error: unknown): ValidationResult;
  /** Validates a parsed message; a result needs the method of the request it answers. */
  message(msg: RpcMessage, requestMethod?: string): ValidationResult;
  /** Validates any value against a schema file (relative to schemas/v0.1); pointers get `prefix`. */
  schema(file: string, value: unknown, prefix?: string): ValidationResult;
}

const OK: ValidationResult = { ok: true, checked: true };
const UNCHECKED: ValidationResult = { ok: true, checked: false };
const VENDOR_KEY_PATTERN = '^x-[a-z0-9]+\\.';

/** Sender-form copy of a schema: closes `x-awp-closed` objects and enforces `x-awp-lint` subschemas. */
function toSenderForm(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(toSenderForm);
  if (!isRecord(node)) return node;
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(node)) out[k] = toSenderForm(v);
  if (node['x-awp-closed'] === true) {
    out.additionalProperties = false;
    const patterns = isRecord(out.patternProperties) ? out.patternProperties : {};
    out.patternProperties = { [VENDOR_KEY_PATTERN]: {}, ...patterns };
  }
  const lint = node['x-awp-lint'];
  if (isRecord(lint)) {
    const allOf: unknown[] = Array.isArray(out.allOf) ? (out.allOf as unknown[]) : [];
    out.allOf = [...allOf, lint];
  }
  return out;
}

/**
 * ajv checks `uniqueItems` pair by pair unless the items' schema names a scalar `type`, and the spec's
 * arrays of `$ref` items do not: 40,000 `action_types` (350 KB) held a world's event loop 4 s. The keyword
 * is checked here instead, in one pass over canonical JSON keys (same meaning: deep equality).
 */
const UNIQUE_ITEMS = 'x-awp-unique-items';

function withLinearUniqueItems(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withLinearUniqueItems);
  if (!isRecord(node)) return node;
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === 'uniqueItems') out[UNIQUE_ITEMS] = v;
    else out[k] = withLinearUniqueItems(v);
  }
  return out;
}

/** A JSON value's text with object keys sorted: equal texts for deeply equal values. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (isRecord(value)) {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

function itemsUnique(items: readonly unknown[]): boolean {
  const seen = new Set<string>();
  for (const item of items) {
    const key = typeof item === 'string' ? `s${item}` : canonical(item);
    if (seen.has(key)) return false;
    seen.add(key);
  }
  return true;
}

function escapeToken(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** The first error is the most specific; a later anyOf/oneOf error on the same value means alternatives existed. */
function describeFirst(errors: readonly ErrorObject[], prefix: string, file: string): ValidationIssue {
  const first = errors[0]!;
  const issue = describe(first, prefix, file);
  const combinator = errors.find(
    (e) => (e.keyword === 'anyOf' || e.keyword === 'oneOf') && e.instancePath === first.instancePath,
  );
  if (combinator === undefined || combinator === first) return issue;
  return { ...issue, message: `${issue.message} (no ${combinator.keyword} alternative matched)` };
}

function describe(e: ErrorObject, prefix: string, file: string): ValidationIssue {
  const at = prefix + e.instancePath;
  const params = e.params as Record<string, unknown>; // ajv types params per keyword; read defensively
  const base = { keyword: e.keyword, schema: file };
  const shown = (v: unknown): string => JSON.stringify(v);
  if (e.propertyName !== undefined) {
    const pointer = `${at}/${escapeToken(e.propertyName)}`;
    return {
      ...base,
      pointer,
      message: `${pointer} has an invalid property name: ${e.message ?? 'invalid'}`,
    };
  }
  switch (e.keyword) {
    case UNIQUE_ITEMS:
      return { ...base, keyword: 'uniqueItems', pointer: at, message: `${at} must NOT have duplicate items` };
    case 'required':
      return {
        ...base,
        pointer: at,
        message: `${at} missing required property '${String(params.missingProperty)}'`,
      };
    case 'additionalProperties': {
      const name = String(params.additionalProperty);
      const pointer = `${at}/${escapeToken(name)}`;
      return { ...base, pointer, message: `${pointer} is not allowed: the object is closed (x-awp-closed)` };
    }
    case 'enum':
      return { ...base, pointer: at, message: `${at} must be one of ${shown(params.allowedValues)}` };
    case 'const':
      return { ...base, pointer: at, message: `${at} must be ${shown(params.allowedValue)}` };
    case 'not':
      return { ...base, pointer: at, message: `${at} must NOT match the schema at ${e.schemaPath}` };
    default:
      return { ...base, pointer: at, message: `${at} ${e.message ?? `fails ${e.keyword}`}` };
  }
}

class Validator implements AwpValidator {
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(readonly form: ValidationForm) {
    // Strict schema mode stays on (unknown keywords fail), with the AWP annotation keywords declared below.
    // strictRequired/strictTypes are off: the spec's schemas put `required` in if/then branches whose
    // properties (and `type`) are declared in the parent schema, which is valid 2020-12.
    const ajv = new Ajv2020({ strict: true, strictRequired: false, strictTypes: false, allErrors: false });
    addFormats(ajv);
    ajv.addKeyword({ keyword: 'x-awp-closed', schemaType: 'boolean' });
    ajv.addKeyword({ keyword: 'x-awp-lint', schemaType: 'object' });
    ajv.addKeyword({
      keyword: UNIQUE_ITEMS,
      type: 'array',
      schemaType: 'boolean',
      validate: (unique: boolean, data: unknown[]) => !unique || itemsUnique(data),
    });
    const files = loadSchemaFiles();
    for (const f of files) {
      const schema = withLinearUniqueItems(form === 'sender' ? toSenderForm(f.schema) : f.schema);
      ajv.addSchema(schema as JsonObject);
    }
    for (const f of files) {
      const fn = ajv.getSchema(f.id);
      if (fn === undefined) throw new Error(`schema ${f.file} did not compile`);
      this.compiled.set(f.file, fn);
    }
  }

  schema(file: string, value: unknown, prefix = ''): ValidationResult {
    const fn = this.compiled.get(file);
    if (fn === undefined) throw new Error(`unknown schema file ${file} (base ${SCHEMA_BASE_URI})`);
    if (fn(value)) return OK;
    const errors = fn.errors ?? [];
    if (errors.length === 0) throw new Error(`schema ${file} failed without an error`);
    return { ok: false, issue: describeFirst(errors, prefix, file) };
  }

  params(method: string, params: unknown, part?: 'request' | 'notification'): ValidationResult {
    const spec = methodSpec(method);
    if (spec === undefined) return UNCHECKED;
    let which = part;
    if (which === undefined) {
      if (spec.request !== undefined && spec.notification !== undefined) {
        throw new Error(`${method} is both a request and a notification: pass the part`);
      }
      which = spec.request !== undefined ? 'request' : 'notification';
    }
    const file = schemaFileFor(method, which);
    if (file === undefined) {
      return {
        ok: false,
        issue: {
          pointer: '',
          keyword: 'method',
          schema: '',
          message: `${method} is not sent as a ${which}`,
        },
      };
    }
    return this.schema(file, params ?? {}, '/params');
  }

  result(method: string, result: unknown): ValidationResult {
    const file = schemaFileFor(method, 'result');
    return file === undefined ? UNCHECKED : this.schema(file, result, '/result');
  }

  error(error: unknown): ValidationResult {
    return this.schema(ERROR_SCHEMA, error, '/error');
  }

  message(msg: RpcMessage, requestMethod?: string): ValidationResult {
    switch (msg.kind) {
      case 'request':
      case 'notification':
        return this.params(msg.method, msg.params, msg.kind);
      case 'result':
        return requestMethod === undefined ? UNCHECKED : this.result(requestMethod, msg.result);
      case 'error':
        // Validate the error member as sent, not the normalised copy.
        return this.error(msg.raw.error);
    }
  }
}

const validators = new Map<ValidationForm, Validator>();

/** The validator for a form, compiling every schema on first use. */
export function getValidator(form: ValidationForm = 'received'): AwpValidator {
  let v = validators.get(form);
  if (v === undefined) {
    v = new Validator(form);
    validators.set(form, v);
  }
  return v;
}
