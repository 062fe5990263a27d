/**
 * parseMessage on arbitrary texts (issue 12 item 8): it never throws, including on deep nesting; what it
 * accepts is safe to walk and re-serialise; the depth pre-check agrees with the real nesting of the JSON.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as jsonrpc from '../../src/protocol/jsonrpc.js';
import { garbageText, hostileJson, jsonText, nestedText, params } from './arbitraries.js';

const { parseMessage } = jsonrpc;
/** The depth pre-check and its default, when this revision of jsonrpc.ts has them (issue 12). */
const nestsDeeperThan = (jsonrpc as Record<string, unknown>).nestsDeeperThan as
  ((text: string, limit: number) => boolean) | undefined;
const DEFAULT_DEPTH =
  ((jsonrpc as Record<string, unknown>).DEFAULT_MAX_JSON_DEPTH as number | undefined) ?? 64;

/** Nesting depth of a parsed JSON value, without recursion (so it measures what would crash a walk). */
function depthOf(value: unknown): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    max = Math.max(max, d + 1);
    for (const child of Object.values(v)) stack.push([child, d + 1]);
  }
  return max;
}

/** Texts: noise, hostile JSON, JSON-RPC envelopes around hostile members, deep nesting of any shape. */
const texts: fc.Arbitrary<string> = fc.oneof(
  garbageText,
  fc.string({ unit: 'binary', maxLength: 40 }),
  hostileJson.map(jsonText),
  fc
    .tuple(fc.constantFrom('id', 'method', 'params', 'result', 'error'), hostileJson, hostileJson)
    .map(([k, v, id]) => jsonText({ jsonrpc: '2.0', id, method: 'ping', [k]: v })),
  fc
    .tuple(
      fc.integer({ min: 1, max: 20_000 }),
      fc.constantFrom('array' as const, 'object' as const),
      fc.boolean(),
    )
    .map(([d, kind, envelope]) =>
      envelope
        ? `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":${nestedText(d, kind)}}}`
        : nestedText(d, kind),
    ),
  // Brackets inside strings and escapes do not nest.
  fc
    .integer({ min: 1, max: 300 })
    .map((d) => jsonText({ jsonrpc: '2.0', id: '['.repeat(d), method: '\\"{'.repeat(d) })),
  // Unbalanced: closers first, then openers.
  fc.integer({ min: 1, max: 300 }).map((d) => ']'.repeat(d) + '['.repeat(d * 2)),
);

describe('parseMessage properties', () => {
  it('never throws; what it accepts re-serialises and nests no deeper than the limit', () => {
    fc.assert(
      fc.property(texts, fc.integer({ min: 8, max: 1024 }), (text, limit) => {
        for (const outcome of [parseMessage(text), parseMessage(text, limit)]) {
          expect(outcome.text).toBe(text);
          if (outcome.kind === 'invalid') {
            expect([-32700, -32600]).toContain(outcome.error.code);
            continue;
          }
          // Whatever the edge accepts, it may stringify (a rewrite) without a RangeError.
          expect(() => JSON.stringify(outcome.raw)).not.toThrow();
          if (outcome.kind === 'request' || outcome.kind === 'result')
            expect(['string', 'number']).toContain(typeof outcome.id);
        }
        expect(depthOf(jsonValueOrNull(text, limit))).toBeLessThanOrEqual(Math.max(limit, 1));
      }),
      params(400),
    );
  });

  it('a request nesting deeper than the limit is refused -32600 with id null; at the limit it is a request', () => {
    fc.assert(
      fc.property(fc.integer({ min: 8, max: 300 }), fc.integer({ min: -3, max: 3 }), (limit, delta) => {
        // The envelope and params add 2 levels around the nested value.
        const inner = Math.max(1, limit - 2 + delta);
        const text = `{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":${nestedText(inner)}}}`;
        const outcome = parseMessage(text, limit);
        if (inner + 2 > limit) {
          expect(outcome).toMatchObject({ kind: 'invalid', id: null, error: { code: -32600 } });
        } else {
          expect(outcome).toMatchObject({ kind: 'request', id: 5, method: 'ping' });
        }
      }),
      params(300),
    );
  });

  it.runIf(nestsDeeperThan !== undefined)(
    'the depth pre-check agrees with the nesting of the parsed value',
    () => {
      const valid = fc.oneof(
        hostileJson.map(jsonText),
        fc
          .tuple(fc.integer({ min: 1, max: 200 }), fc.constantFrom('array' as const, 'object' as const))
          .map(([d, k]) => nestedText(d, k)),
        fc.string({ maxLength: 10 }).map((s) => jsonText(['[{"', s, ['\\', [s]]])),
      );
      fc.assert(
        fc.property(valid, fc.integer({ min: 0, max: 200 }), (text, limit) => {
          expect(nestsDeeperThan!(text, limit)).toBe(depthOf(JSON.parse(text)) > limit);
        }),
        params(400),
      );
    },
  );

  it(`the default limit (${DEFAULT_DEPTH}) refuses the 5,000-level message of issue 12`, () => {
    const text = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":${nestedText(5000)}}}`;
    expect(parseMessage(text)).toMatchObject({ kind: 'invalid', id: null, error: { code: -32600 } });
  });
});

/** The parsed value if parseMessage accepted the text (else null): what a caller would walk. */
function jsonValueOrNull(text: string, limit: number): unknown {
  const outcome = parseMessage(text, limit);
  return outcome.kind === 'invalid' ? null : outcome.raw;
}
