/**
 * Shared fast-check generators for the property tests of the sans-IO cores: hostile JSON values (keys that
 * shadow Object.prototype members, out-of-range integers), deep nesting, and hostile texts.
 */
import fc from 'fast-check';

/** Runs per property; FC_NUM_RUNS raises it for long runs (the default keeps a busy 2-core machine fast). */
export function numRuns(fallback: number): number {
  const env = Number(process.env.FC_NUM_RUNS);
  return Number.isSafeInteger(env) && env > 0 ? env : fallback;
}

/** fast-check parameters every property uses: bounded runs, a seed from FC_SEED when reproducing. */
export function params(fallback: number): fc.Parameters<unknown> {
  const seed = Number(process.env.FC_SEED);
  return {
    numRuns: numRuns(fallback),
    ...(Number.isSafeInteger(seed) ? { seed } : {}),
  };
}

/** Keys a peer controls that have tripped JavaScript code before (prototype members) or that the edge reads. */
const HOSTILE_KEYS = [
  '__proto__',
  'toString',
  'valueOf',
  'constructor',
  'hasOwnProperty',
  'status_seq',
  'session_token',
  'last_status_seq',
  'channel_id',
  'channels',
  'granted',
  'state',
  'id',
  'method',
  'params',
  'result',
  'error',
  'code',
  'message',
  'data',
];

export const hostileKey: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...HOSTILE_KEYS) },
  { weight: 1, arbitrary: fc.string({ maxLength: 6 }) },
);

/** Numbers at the edges of what the edge checks: negatives, fractions, 2^53 and beyond, huge. */
export const hostileNumber: fc.Arbitrary<number> = fc.oneof(
  fc.integer({ min: -3, max: 12 }),
  fc.constantFrom(-5, 0.5, 2 ** 53 - 1, 2 ** 53, 2 ** 64, -(2 ** 53), 1e308, -0),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

export const jsonLeaf: fc.Arbitrary<unknown> = fc.oneof(
  hostileNumber,
  fc.constant(null),
  fc.boolean(),
  fc.string({ maxLength: 8 }),
);

/** A JSON value (as JSON.parse would produce) with hostile keys and numbers, a few levels deep. */
export const hostileJson: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    jsonLeaf,
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(hostileKey, tie('value'), { maxKeys: 4 }),
  ),
})).value;

/** A JSON object (params / result shaped) with hostile members. */
export const hostileObject: fc.Arbitrary<Record<string, unknown>> = fc.dictionary(hostileKey, hostileJson, {
  maxKeys: 5,
});

/** JSON text of a JSON value (never undefined here: every generator yields JSON values). */
export function jsonText(value: unknown): string {
  return JSON.stringify(value);
}

/** A nesting depth: small ones are legal AWP, the big one is what crashed `JSON.stringify` (issue 12). */
export const nestingDepth: fc.Arbitrary<number> = fc.constantFrom(3, 70, 5000);

/** JSON text of an array or object nested `depth` levels (built as text: nothing recursive builds it). */
export function nestedText(depth: number, kind: 'array' | 'object' = 'array'): string {
  return kind === 'array'
    ? '['.repeat(depth) + ']'.repeat(depth)
    : '{"a":'.repeat(depth) + '0' + '}'.repeat(depth);
}

/** Texts that are not JSON-RPC: broken JSON, batches, bare values, lone surrogates, control characters. */
export const garbageText: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.constantFrom(
    '',
    '{',
    '{not json',
    '[]',
    '[{"jsonrpc":"2.0","id":1,"method":"ping"}]',
    'null',
    '42',
    '"x"',
    '{"jsonrpc":"2.0"}',
    '{"jsonrpc":"2.0","id":{},"method":"ping"}',
    '{"jsonrpc":"2.0","id":null,"method":"ping"}',
    '{"jsonrpc":"2.0","method":5}',
    '{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}',
    '{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}}',
    '{"jsonrpc":"2.0","id":1,"method":"ping","params":7}',
    '\ud800',
    '{"jsonrpc":"2.0","id":"\ud800","method":"ping"}',
  ),
  hostileJson.map(jsonText),
);
