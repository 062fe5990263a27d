/**
 * Redaction before a message is recorded (AWP-AUD-006), sans-IO. Replaced by
 * `[redacted:sha256:<first 8 hex of the SHA-256 of the value>]`:
 * - the values of `session_token`, `transfer_token` and `snapshot_token`, wherever they sit;
 * - the value of any `Authorization` (or `Proxy-Authorization`) key, and of keys that name a bearer
 *   credential (`token`, `*_token`, `secret`, `password`, `api_key`, `credential`, `bearer`) when a string;
 * - any string that carries a bearer credential: `Bearer <x>`, or an `awp.bearer.<x>` subprotocol;
 * - any string that is a credential the edge knows (agent, approver and upstream credentials, the session
 *   tokens it minted), wherever it appears; inside a longer string (an error's detail, free text), just the
 *   credential: a configured one wherever it occurs, a minted one as a run of base64url characters;
 * - every value a `redact_paths` JSON pointer addresses, relative to `params` or `result`.
 * A string's hash is over its UTF-8 characters (as the edge's logs redact); any other value's over its
 * JSON with keys sorted. Redaction applies to records only, never to what is relayed.
 */
import { sha256Hex } from './record.js';

const CREDENTIAL_KEYS = new Set(['session_token', 'transfer_token', 'snapshot_token']);
const HEADER_KEYS = /^(proxy-)?authorization$/i;
const CREDENTIAL_NAMED = /^(.*[_-])?(token|secret|password|api_?key|credential|bearer)$/i;
const BEARER = /\bbearer\s+\S|awp\.bearer\./i;

/** Bounds on pointers learned from a world's manifest (a hostile manifest cannot make redaction costly). */
export const MAX_REDACT_PATHS = 64;
const MAX_POINTER_SEGMENTS = 32;

export interface RedactionRules {
  /** Whether a string is a credential the edge knows (its minted session tokens too). */
  readonly isCredential: (value: string) => boolean;
  /** The credentials the edge was configured with, to find inside longer strings. */
  readonly credentials?: () => Iterable<string>;
  /** Told each string found under a credential key (a session log then finds it inside strings too). */
  readonly found?: (value: string) => void;
  /** JSON pointers (RFC 6901) relative to `params` or `result`. */
  readonly paths: readonly string[];
}

export function redactedValue(value: unknown): string {
  const text = typeof value === 'string' ? value : canonicalJson(value);
  return `[redacted:sha256:${sha256Hex(text).slice(0, 8)}]`;
}

/** JSON with object keys sorted, so equal values hash alike. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const o = value as Record<string, unknown>;
    const keys = Object.keys(o).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(',')}}`;
  }
  return value === undefined ? 'null' : JSON.stringify(value);
}

/** A parsed message with credentials replaced; the input is not modified (unchanged parts are shared). */
export function redactMessage(msg: unknown, rules: RedactionRules): unknown {
  const walked = walk(msg, rules);
  if (rules.paths.length === 0 || !isRecord(walked)) return walked;
  let out: Record<string, unknown> = walked;
  for (const root of ['params', 'result'] as const) {
    if (out[root] === undefined) continue;
    let part: unknown = out[root];
    for (const pointer of rules.paths) part = redactAt(part, pointerSegments(pointer), 0);
    if (part !== out[root]) out = { ...out, [root]: part };
  }
  return out;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** An own property, also for a key like `__proto__` (which assignment would not create). */
export function setOwn(o: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(o, key, { value, writable: true, enumerable: true, configurable: true });
}

/** Runs of base64url (and hex) characters long enough to be a token. */
const TOKEN_RUN = /[A-Za-z0-9_-]{16,}/g;

function redactString(s: string, rules: RedactionRules): string {
  if (BEARER.test(s) || rules.isCredential(s)) return redactedValue(s);
  if (s.length < 8) return s;
  let out = s;
  for (const c of rules.credentials?.() ?? [])
    if (c.length >= 8 && out.includes(c)) out = out.split(c).join(redactedValue(c));
  return out.replace(TOKEN_RUN, (run) => (rules.isCredential(run) ? redactedValue(run) : run));
}

/** `payload_b64` of an inline frame is data, not a place for credentials (and may be megabytes). */
const DATA_KEYS = new Set(['payload_b64']);

function walk(node: unknown, rules: RedactionRules): unknown {
  if (typeof node === 'string') return redactString(node, rules);
  if (Array.isArray(node)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < node.length; i++) {
      const v: unknown = node[i];
      const w = walk(v, rules);
      if (w !== v) (copy ??= node.slice())[i] = w;
    }
    return copy ?? node;
  }
  if (!isRecord(node)) return node;
  let copy: Record<string, unknown> | undefined;
  for (const key of Object.keys(node)) {
    if (DATA_KEYS.has(key)) continue;
    const v = node[key];
    if (CREDENTIAL_KEYS.has(key) && typeof v === 'string') rules.found?.(v);
    const w =
      CREDENTIAL_KEYS.has(key) ||
      HEADER_KEYS.test(key) ||
      (typeof v === 'string' && CREDENTIAL_NAMED.test(key))
        ? redactedValue(v)
        : walk(v, rules);
    if (w !== v) setOwn((copy ??= { ...node }), key, w);
  }
  return copy ?? node;
}

/** RFC 6901 segments of a pointer; none for one that is not a pointer. */
export function pointerSegments(pointer: string): string[] {
  if (!pointer.startsWith('/')) return [];
  const parts = pointer.slice(1).split('/');
  if (parts.length > MAX_POINTER_SEGMENTS) return [];
  return parts.map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'));
}

/** `node` with the value at `parts[i..]` redacted, copied along the path; `node` itself when absent. */
function redactAt(node: unknown, parts: readonly string[], i: number): unknown {
  if (parts.length === 0) return node;
  const part = parts[i]!;
  const last = i === parts.length - 1;
  if (Array.isArray(node)) {
    if (!/^(0|[1-9][0-9]*)$/.test(part)) return node;
    const idx = Number(part);
    if (idx >= node.length) return node;
    const v: unknown = node[idx];
    const w = last ? redactedValue(v) : redactAt(v, parts, i + 1);
    if (w === v) return node;
    const copy = node.slice();
    copy[idx] = w;
    return copy;
  }
  if (!isRecord(node) || !Object.hasOwn(node, part)) return node;
  const v = node[part];
  const w = last ? redactedValue(v) : redactAt(v, parts, i + 1);
  return w === v ? node : { ...node, [part]: w };
}

/** The `safety_policy.audit.redact_paths` of a world manifest (an `initialize` result), bounded. */
export function manifestRedactPaths(manifest: unknown): string[] {
  if (!isRecord(manifest)) return [];
  const policy = manifest.safety_policy;
  const audit = isRecord(policy) ? policy.audit : undefined;
  const paths = isRecord(audit) ? audit.redact_paths : undefined;
  if (!Array.isArray(paths)) return [];
  return paths
    .filter((p): p is string => typeof p === 'string' && p.startsWith('/'))
    .slice(0, MAX_REDACT_PATHS);
}
