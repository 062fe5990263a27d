/**
 * The config loader on arbitrary JSON-ish documents (issue 12 item 8): `validateConfig` returns a config or
 * throws ConfigError naming the problems, never any other exception. Written against the exported API
 * only (`validateConfig(raw, source, env)`, `ConfigError`), so it holds across rewrites of the loader.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConfigError, validateConfig } from '../../src/config/load.js';
import { hostileJson, hostileObject, params } from './arbitraries.js';

const BASE = {
  routes: [{ name: 'arm', path: '/worlds/arm', upstream: 'ws://127.0.0.1:1/' }],
  agents: { tokens: ['agent-token-1'] },
};

/** Where a hostile value may land: every key the README documents, at its place in the document. */
const PATHS: readonly (readonly (string | number)[])[] = [
  [],
  ['listen'],
  ['admin'],
  ['public_url'],
  ['engine'],
  ['log_level'],
  ['agents'],
  ['agents', 'tokens'],
  ['agents', 'tokens', 0],
  ['agents', 'tokens_env'],
  ['agents', 'allow_anonymous'],
  ['routes'],
  ['routes', 0],
  ['routes', 1],
  ['routes', 0, 'name'],
  ['routes', 0, 'path'],
  ['routes', 0, 'upstream'],
  ['routes', 0, 'upstream_token'],
  ['routes', 0, 'upstream_token_env'],
  ['routes', 0, 'observers'],
  ['routes', 0, 'hub_linger_ms'],
  ['routes', 0, 'agents'],
  ['routes', 0, 'approvers'],
  ['routes', 0, 'allowed_origins'],
  ['routes', 0, 'allowed_origins', 0],
  ['store'],
  ['store', 'kind'],
  ['store', 'url'],
  ['store', 'url_env'],
  ['store', 'key_prefix'],
  ['webtransport'],
  ['webtransport', 'listen'],
  ['tls'],
  ['budgets'],
  ['budgets', 'max_connections'],
  ['budgets', 'max_sessions'],
  ['budgets', 'max_messages_per_second'],
  ['budgets', 'max_message_bytes'],
  ['drain', 'window_ms'],
  ['timing', 'hop_ping_interval_ms'],
  ['timing', 'upstream_connect_timeout_ms'],
  ['transport', 'max_message_bytes'],
  ['transport', 'high_water_bytes'],
  ['transport', 'max_queued_bytes'],
  ['transport', 'max_json_depth'],
  ['transport', 'handshake_timeout_ms'],
  ['transport', 'max_pending_handshakes'],
  ['transport', 'max_pending_handshakes_per_address'],
];

/** A deep copy of `doc` with `value` at `path` (intermediate containers created as needed). */
function setAt(doc: unknown, path: readonly (string | number)[], value: unknown): unknown {
  const [head, ...rest] = path;
  if (head === undefined) return value;
  if (typeof head === 'number') {
    const list = Array.isArray(doc) ? [...(doc as unknown[])] : [];
    list[head] = setAt(list[head], rest, value);
    return list;
  }
  const obj =
    typeof doc === 'object' && doc !== null && !Array.isArray(doc)
      ? { ...(doc as Record<string, unknown>) }
      : {};
  obj[head] = setAt(obj[head], rest, value);
  return obj;
}

/** Values a config file could hold at a key: hostile JSON, strings the loader parses, numbers at the edges. */
const configValue: fc.Arbitrary<unknown> = fc.oneof(
  hostileJson,
  fc.constantFrom(
    '',
    '*',
    'ws://',
    'ws://[::1',
    'wss://edge.example.com/x?y',
    'http://a b',
    '127.0.0.1:99999',
    ':0',
    '0.0.0.0:8720',
    'redis',
    'memory',
    'relay',
    'fanout',
    'NOPE_ENV',
    'uws',
    '/worlds/arm',
    '/;token=agent-token-1',
  ),
);

const env = fc.dictionary(
  fc.constantFrom('AWP_EDGE_AGENT_TOKENS', 'AWP_EDGE_UPSTREAM_TOKEN', 'NOPE_ENV', 'AWP_EDGE_REDIS_URL'),
  fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('', ',', 'a,,b', 'redis://127.0.0.1:1')),
  { maxKeys: 3 },
);

/** validateConfig's outcome; anything but a ConfigError escaping fails the property. */
function validate(raw: unknown, e: Record<string, string>): 'config' | 'refused' {
  // As a parser gives it: own `__proto__` members, Object.prototype (fast-check may build null-prototype objects).
  const doc = JSON.parse(JSON.stringify(raw)) as unknown;
  try {
    const config = validateConfig(doc, 'property.yaml', e);
    expect(config.routes.length).toBeGreaterThan(0);
    return 'config';
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    expect(err.problems.length).toBeGreaterThan(0);
    for (const p of err.problems) expect(typeof p).toBe('string');
    return 'refused';
  }
}

describe('validateConfig properties', () => {
  it('the base document is a config (the mutations below start from something valid)', () => {
    expect(validate(BASE, {})).toBe('config');
  });

  it('arbitrary JSON documents: a config or a ConfigError, nothing else', () => {
    fc.assert(
      fc.property(fc.oneof(hostileJson, hostileObject), env, (raw, e) => void validate(raw, e)),
      params(300),
    );
  });

  it('the valid document with hostile values at documented keys: a config or a ConfigError', () => {
    const edits = fc.array(fc.tuple(fc.constantFrom(...PATHS), configValue), { minLength: 1, maxLength: 3 });
    fc.assert(
      fc.property(edits, env, (es, e) => {
        let doc: unknown = BASE;
        for (const [path, value] of es) doc = setAt(doc, path, value);
        validate(doc, e);
      }),
      {
        ...params(500),
        // Shrunk counterexamples found by this property (TypeError out of the loader), checked first.
        examples: [
          [[[['webtransport'], null]], {}],
          [[[['webtransport', 'listen'], JSON.parse('{"toString":false}')]], {}],
        ],
      },
    );
  });
});
