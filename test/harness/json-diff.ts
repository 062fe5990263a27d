/** Structural comparison of JSON values with path-named differences, for precise failure messages. */
import type { Json } from './trace-types.js';
import { isJsonObject } from './trace-types.js';

const MAX_DIFFS = 20;

/** Lists where `actual` differs from `expected` (`$.params.status_seq: expected 5, got 6`); empty when equal.
 * Object key order is irrelevant; array order matters. */
export function diffJson(expected: Json, actual: Json, path = '$'): string[] {
  const out: string[] = [];
  walk(expected, actual, path, out);
  return out;
}

export function jsonEqual(a: Json, b: Json): boolean {
  return diffJson(a, b).length === 0;
}

function walk(expected: Json, actual: Json, path: string, out: string[]): void {
  if (out.length >= MAX_DIFFS) return;
  if (Array.isArray(expected) && Array.isArray(actual)) {
    if (expected.length !== actual.length) {
      out.push(`${path}: expected an array of ${expected.length}, got ${actual.length}`);
    }
    const n = Math.min(expected.length, actual.length);
    for (let i = 0; i < n; i++) walk(expected[i]!, actual[i]!, `${path}[${i}]`, out);
    return;
  }
  if (isJsonObject(expected) && isJsonObject(actual)) {
    for (const key of Object.keys(expected)) {
      const child = `${path}.${key}`;
      if (!(key in actual)) out.push(`${child}: missing (expected ${show(expected[key]!)})`);
      else walk(expected[key]!, actual[key]!, child, out);
    }
    for (const key of Object.keys(actual)) {
      if (!(key in expected)) out.push(`${path}.${key}: unexpected (got ${show(actual[key]!)})`);
    }
    return;
  }
  if (expected !== actual) out.push(`${path}: expected ${show(expected)}, got ${show(actual)}`);
}

function show(value: Json): string {
  const text = JSON.stringify(value);
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}
