/**
 * The loader's messages: `<source>: <key>: <expected>, got <what>`, one per bad key, in schema order, with no
 * knock-on problem for a key the file never set, and never a credential's value.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EDGE_SCHEMA } from '../../src/config/edge-schema.js';
import { ConfigError, validateConfig } from '../../src/config/load.js';

const R = [{ path: '/', upstream: 'ws://w/' }];
const A = { tokens: ['t'] };

function problems(raw: unknown, env: Record<string, string> = {}): string[] {
  try {
    validateConfig(raw, 'f', env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems.map((p) => p.replace(/^f: /, ''));
    throw err;
  }
  return [];
}

const ROUTES_EXPECTED = 'expected a list of at least one route ({name, path, upstream})';
const PATH_EXPECTED = 'expected an absolute path like /worlds/arm (no trailing slash, query or fragment)';

describe('shape messages', () => {
  it('the document itself: a mapping with routes; nothing else reported when it is not a mapping', () => {
    expect(problems([1])).toEqual(['(top level): expected a mapping, got a list']);
    expect(problems('x')).toEqual(['(top level): expected a mapping, got string "x"']);
    expect(problems(null)).toEqual([`routes: ${ROUTES_EXPECTED}`]);
    expect(problems({ agents: A })).toEqual([`routes: ${ROUTES_EXPECTED}`]);
    expect(problems({ agents: A, routes: [] })).toEqual([`routes: ${ROUTES_EXPECTED}, got an empty list`]);
    expect(problems({ agents: A, routes: {} })).toEqual([`routes: ${ROUTES_EXPECTED}, got a mapping`]);
  });

  it('unknown keys list what is known, before the other problems of their mapping', () => {
    const top = Object.keys(EDGE_SCHEMA.properties);
    expect(top.slice(0, 16)).toEqual(
      'listen, admin, public_url, engine, log_level, agents, routes, timing, transport, store, drain, webtransport, stream_listen, stream_public_url, stream_worker_nice, tls'.split(
        ', ',
      ),
    );
    expect(problems({ agents: A, routes: R, lisen: 1 })).toEqual([
      `lisen: unknown key (expected one of: ${top.join(', ')})`,
    ]);
    expect(problems({ agents: A, routes: [{ upstream: 'ws://w/', uptream: 1, hub_linger_ms: -1 }] })).toEqual(
      [
        'routes[0].uptream: unknown key (expected one of: name, path, upstream, upstream_token, upstream_token_env, upstream_token_file, agents, observers, hub_linger_ms, approvers, allowed_origins, record)',
        'routes[0].hub_linger_ms: expected an integer from 0 to 3600000, got number -1',
      ],
    );
    expect(problems({ agents: A, routes: R, budgets: { max_sessions: 0, x: 1 } })).toEqual([
      'budgets.x: unknown key (expected one of: max_connections, max_sessions, max_messages_per_second, max_bytes_per_second, max_message_bytes)',
      'budgets.max_sessions: expected an integer from 1 to 1099511627776, got number 0',
    ]);
  });

  it('addresses, URLs and enumerations say what they expect and show what they got', () => {
    const p = (extra: Record<string, unknown>) => problems({ agents: A, routes: R, ...extra });
    expect(p({ listen: 8720 })).toEqual([
      'listen: expected HOST:PORT (e.g. 127.0.0.1:8720), got number 8720',
    ]);
    expect(p({ listen: 'a:70000' })).toEqual([
      'listen: expected HOST:PORT (e.g. 127.0.0.1:8720), got string "a:70000"',
    ]);
    expect(p({ admin: 'localhost' })).toEqual([
      'admin: expected HOST:PORT (e.g. 127.0.0.1:8720), got string "localhost"',
    ]);
    expect(p({ public_url: 'wss://a/b' })).toEqual([
      'public_url: expected ws(s)://HOST[:PORT] without a path, got string "wss://a/b"',
    ]);
    expect(p({ engine: 'x' })).toEqual(['engine: expected one of auto, uws, ws, got string "x"']);
    expect(p({ log_level: 'verbose' })).toEqual([
      'log_level: expected one of fatal, error, warn, info, debug, trace, silent, got string "verbose"',
    ]);
    expect(p({ timing: { hop_ping_interval_ms: -1, upstream_connect_timeout_ms: 5 } })).toEqual([
      'timing.hop_ping_interval_ms: expected an integer from 0 to 600000, got number -1',
      'timing.upstream_connect_timeout_ms: expected an integer from 100 to 120000, got number 5',
    ]);
    expect(p({ transport: null })).toEqual(['transport: expected a mapping, got null']);
    expect(p({ drain: { window_ms: 'x' } })).toEqual([
      'drain.window_ms: expected an integer from 0 to 600000, got string "x"',
    ]);
    expect(p({ store: { kind: 'x' } })).toEqual([
      'store.kind: expected one of memory, redis, got string "x"',
    ]);
  });

  it('routes: upstream, path and name', () => {
    const p = (route: Record<string, unknown>) => problems({ agents: A, routes: [route] });
    expect(p({ path: '/' })).toEqual(["routes[0].upstream: required: the world's ws:// or wss:// URL"]);
    expect(p({ upstream: 'http://w/' })).toEqual([
      'routes[0].upstream: expected a ws:// or wss:// URL, got string "http://w/"',
    ]);
    expect(p({ upstream: 'ws://[' })).toEqual([
      'routes[0].upstream: expected a ws:// or wss:// URL, got string "ws://["',
    ]);
    for (const upstream of ['ws://u:p@w/', 'ws://w/?token=abc'])
      expect(p({ upstream })).toEqual([
        'routes[0].upstream: the URL carries a credential (AWP-SEC-006): give it as upstream_token_env or upstream_token_file',
      ]);
    // The name is derived from a bad path: only the path is reported.
    expect(p({ path: 'x', upstream: 'ws://w/' })).toEqual([
      `routes[0].path: ${PATH_EXPECTED}, got string "x"`,
    ]);
    expect(p({ path: '/a/', upstream: 'ws://w/' })).toEqual([
      `routes[0].path: ${PATH_EXPECTED}, got string "/a/"`,
    ]);
    expect(p({ path: '/a/stream', upstream: 'ws://w/' })).toEqual([
      'routes[0].path: "stream" is reserved for stream endpoints',
    ]);
    expect(p({ name: '1x', upstream: 'ws://w/' })).toEqual([
      'routes[0].name: expected an identifier (letters, digits, _ . : -), got string "1x"',
    ]);
    expect(p({ path: '/a b', upstream: 'ws://w/' })).toEqual([
      'routes[0].name: expected an identifier (letters, digits, _ . : -), got string "a b" (from the path: give a name)',
    ]);
    expect(
      problems({ agents: A, routes: [{ upstream: 'ws://w/' }, { name: 'b', upstream: 'ws://w/' }] }),
    ).toEqual(['routes (b): path "/" is used by more than one route']);
  });

  it('an empty section (`tls:` with nothing under it is null) is a problem of that key only', () => {
    for (const k of ['webtransport', 'tls', 'agents', 'store', 'timing', 'budgets'])
      expect(problems({ agents: A, routes: R, [k]: null }), k).toEqual([
        `${k}: expected a mapping, got null`,
      ]);
    expect(problems({ agents: A, routes: [null] })).toEqual(['routes[0]: expected a mapping, got null']);
  });

  it('mappings that need keys name each missing one', () => {
    const p = (extra: Record<string, unknown>) => problems({ agents: A, routes: R, ...extra });
    expect(p({ webtransport: {} })).toEqual([
      'webtransport.listen: required: HOST:PORT (HTTP/2 on TCP, and HTTP/3 on UDP where available)',
      'webtransport.cert_file: required: a PEM file',
      'webtransport.key_file: required: a PEM file',
    ]);
    expect(p({ tls: { cert: 'x' } })).toEqual([
      'tls.cert: unknown key (expected one of: cert_file, key_file)',
      'tls.cert_file: required: a PEM file',
      'tls.key_file: required: a PEM file',
    ]);
  });
});

describe('semantic messages', () => {
  it('agent credentials: where they come from, with no knock-on for the routes that inherit them', () => {
    expect(problems({ agents: [], routes: R })).toEqual(['agents: expected a mapping, got an empty list']);
    expect(problems({ agents: { tokens_env: 'NOPE' }, routes: R })).toEqual([
      'agents.tokens_env: environment variable NOPE is not set',
    ]);
    expect(problems({ agents: { tokens: ['a'], tokens_env: 'X' }, routes: R }, { X: 'b' })).toEqual([
      'agents.tokens/tokens_env: give a credential one way only',
    ]);
    expect(problems({ agents: { tokens_file: '/nonexistent/tokens' }, routes: R })[0]).toMatch(
      /^agents\.tokens_file: cannot read \/nonexistent\/tokens: ENOENT/,
    );
    expect(problems({ routes: R })).toEqual([
      'routes[0].agents: no agent credentials: set AWP_EDGE_AGENT_TOKENS (comma-separated), or agents.tokens / tokens_env / tokens_file in the config',
    ]);
    expect(
      validateConfig({ routes: R }, 'f', { AWP_EDGE_AGENT_TOKENS: 'a, b' }).routes[0]!.agent_tokens,
    ).toEqual(['a', 'b']);
    expect(
      problems({
        listen: '0.0.0.0:1',
        agents: { allow_anonymous: true },
        routes: [{ upstream: 'ws://w/', allowed_origins: ['http://a.example'] }],
      }),
    ).toEqual([
      'routes[0].agents.allow_anonymous: anonymous agents are only allowed when listening on loopback, not 0.0.0.0 (AWP-SEC-002)',
    ]);
  });

  it('credential files: an empty one is a problem naming the file; every file read is listed for reloads', () => {
    const dir = mkdtempSync(join(tmpdir(), 'awp-edge-config-'));
    try {
      const [empty, agents, world] = ['empty', 'agents', 'world'].map((f) => join(dir, f));
      writeFileSync(empty!, ' ,\n \n');
      writeFileSync(agents!, 'a\nb\n');
      writeFileSync(world!, 'w');
      expect(problems({ agents: { tokens_file: empty }, routes: R })).toEqual([
        `agents.tokens_file: ${empty} holds no credential (it is empty)`,
      ]);
      expect(problems({ agents: A, routes: [{ ...R[0], upstream_token_file: empty }] })).toEqual([
        `routes[0].upstream_token_file: ${empty} holds no credential (it is empty)`,
      ]);
      const c = validateConfig(
        {
          agents: { tokens_file: agents },
          routes: [{ ...R[0], upstream_token_file: world, approvers: { tokens_file: agents } }],
        },
        'f',
        {},
      );
      expect(c.routes[0]).toMatchObject({
        agent_tokens: ['a', 'b'],
        approver_tokens: ['a', 'b'],
        upstream_token: 'w',
      });
      expect(c.secret_files).toEqual([agents, world]);
      expect(c.credential_files).toEqual({ watch: true, debounce_ms: 1000 });
      expect(validateConfig({ agents: A, routes: R }, 'f', {}).secret_files).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a route with a shape problem does not hide the semantic problems of another', () => {
    expect(
      problems({
        agents: A,
        routes: [
          { path: '/a', upstream: 'ws://w/', observers: 'all' },
          { path: '/b', upstream: 'ws://w/', upstream_token_env: 'B_TOKEN' },
        ],
      }),
    ).toEqual([
      'routes[0].observers: expected one of fanout, relay, got string "all"',
      'routes[1].upstream_token_env: environment variable B_TOKEN is not set',
    ]);
  });

  it('never shows a credential', () => {
    const secret = 'very-secret value';
    const all = [
      ...problems({ agents: { tokens: [secret] }, routes: R }),
      ...problems({ agents: { tokens: secret }, routes: R }),
      ...problems({ agents: A, routes: [{ upstream: 'ws://w/', upstream_token: 12345 }] }),
      ...problems({ agents: A, routes: R, store: { kind: 'redis', url: `http://${secret}` } }),
      ...problems({ agents: A, routes: R, store: { kind: 'memory', url: secret } }),
      ...problems({ agents: A, routes: R, public_url: 'wss://me:very-secret@edge/path' }),
      ...problems({ agents: A, routes: [{ upstream: 'http://me:very-secret@w/' }] }),
    ];
    expect(all).toEqual([
      'agents.tokens: a token has characters outside RFC 6455 token characters (it could not travel as awp.bearer.<token>)',
      'agents.tokens: expected a list of non-empty strings, got a string',
      'routes[0].upstream_token: expected a non-empty string, got a number',
      'store.url: expected a redis:// or rediss:// URL',
      'store.url: only for kind: redis',
      'public_url: expected ws(s)://HOST[:PORT] without a path, got string "wss://<credential>@edge/path"',
      'routes[0].upstream: expected a ws:// or wss:// URL, got string "http://<credential>@w/"',
    ]);
    for (const p of all) expect(p).not.toMatch(/secret|12345/);
  });

  it('store: redis needs a URL, given like a credential', () => {
    const p = (store: Record<string, unknown>, env: Record<string, string> = {}) =>
      problems({ agents: A, routes: R, store }, env);
    expect(p({ kind: 'redis' })).toEqual([
      'store.url_env: kind redis needs url_env (e.g. AWP_EDGE_REDIS_URL), url_file or url',
    ]);
    expect(p({ kind: 'redis', url_env: 'R' })).toEqual(['store.url_env: environment variable R is not set']);
    expect(p({ kind: 'redis', url: 'redis://x', key_prefix: '' })).toEqual([
      'store.key_prefix: expected a non-empty string, got string ""',
    ]);
    expect(
      validateConfig({ agents: A, routes: R, store: { kind: 'redis', url_env: 'R' } }, 'f', {
        R: 'redis://r:1',
      }).store,
    ).toEqual({ kind: 'redis', url: 'redis://r:1', key_prefix: 'awp-edge:' });
  });
});

describe('defaults', () => {
  it('a minimal file gets every default the schema declares', () => {
    const c = validateConfig({ agents: A, routes: [{ upstream: 'ws://w/' }] }, 'f', {});
    expect(c).toMatchObject({
      listen: { host: '127.0.0.1', port: 8720 },
      admin: { host: '127.0.0.1', port: 9464 },
      engine: 'auto',
      log_level: 'info',
      timing: { hop_ping_interval_ms: 5000, upstream_connect_timeout_ms: 5000 },
      transport: { max_message_bytes: 33554432, high_water_bytes: 262144, max_queued_bytes: 16777216 },
      store: { kind: 'memory' },
      drain: { window_ms: 20000 },
      budgets: {
        max_connections: 2048,
        max_sessions: 1024,
        max_messages_per_second: 2000,
        max_bytes_per_second: 67108864,
        max_message_bytes: 33554432,
      },
    });
    expect(c.routes).toEqual([
      {
        name: 'default',
        path: '/',
        upstream: 'ws://w/',
        upstream_token: undefined,
        agent_tokens: ['t'],
        allow_anonymous: false,
        observers: 'fanout',
        hub_linger_ms: 5000,
        approver_tokens: [],
        allowed_origins: [],
      },
    ]);
    expect(c.tls).toBeUndefined();
    expect(c.webtransport).toBeUndefined();
  });

  it('does not change the object it was given', () => {
    const raw = { agents: A, routes: [{ upstream: 'ws://w/' }] };
    const copy = structuredClone(raw);
    validateConfig(raw, 'f', {});
    expect(raw).toEqual(copy);
  });
});
