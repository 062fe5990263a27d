/** The issue-12 keys: transport limits and per-route allowed_origins, with their defaults, ranges and messages. */
import { describe, expect, it } from 'vitest';
import { ConfigError, validateConfig } from '../../src/config/load.js';

const base = { routes: [{ path: '/', upstream: 'ws://127.0.0.1:1/' }], agents: { tokens: ['t'] } };

function problems(raw: Record<string, unknown>): string[] {
  try {
    validateConfig(raw, 'test', {});
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  return [];
}

describe('transport limits', () => {
  const keys = [
    ['max_json_depth', 64, 8, 1024],
    ['handshake_timeout_ms', 10_000, 100, 600_000],
    ['max_pending_handshakes', 1024, 1, 1_000_000],
    ['max_pending_handshakes_per_address', 64, 1, 1_000_000],
  ] as const;

  it('default when absent', () => {
    const t = validateConfig(base, 'test', {}).transport;
    for (const [k, def] of keys) expect(t[k], k).toBe(def);
  });

  it('accept the ends of their range', () => {
    for (const [k, , min, max] of keys) {
      expect(validateConfig({ ...base, transport: { [k]: min } }, 'test', {}).transport[k]).toBe(min);
      expect(validateConfig({ ...base, transport: { [k]: max } }, 'test', {}).transport[k]).toBe(max);
    }
  });

  it('refuse values outside the range, fractions and strings, naming the key and the range', () => {
    for (const [k, , min, max] of keys) {
      const want = (got: string) => [
        `test: transport.${k}: expected an integer from ${min} to ${max}, got ${got}`,
      ];
      expect(problems({ ...base, transport: { [k]: min - 1 } })).toEqual(want(`number ${min - 1}`));
      expect(problems({ ...base, transport: { [k]: max + 1 } })).toEqual(want(`number ${max + 1}`));
      expect(problems({ ...base, transport: { [k]: min + 0.5 } })).toEqual(want(`number ${min + 0.5}`));
      expect(problems({ ...base, transport: { [k]: '64' } })).toEqual(want('string "64"'));
    }
  });
});

describe('routes[].allowed_origins', () => {
  const origins = (list: unknown, agents: Record<string, unknown> = { tokens: ['t'] }) =>
    validateConfig(
      { agents, routes: [{ path: '/', upstream: 'ws://127.0.0.1:1/', allowed_origins: list }] },
      'test',
      {},
    ).routes[0]!.allowed_origins;
  const refused = (list: unknown) =>
    problems({
      agents: { tokens: ['t'] },
      routes: [{ path: '/', upstream: 'ws://w/', allowed_origins: list }],
    });

  it('defaults to the empty list (same-origin only)', () => {
    expect(validateConfig(base, 'test', {}).routes[0]!.allowed_origins).toEqual([]);
  });

  it('normalises entries the way a browser serialises Origin: lower case, no trailing slash, no default port', () => {
    expect(
      origins([
        'HTTPS://App.Example.COM/',
        'http://127.0.0.1:8080',
        'https://edge.example.com:443',
        'http://localhost:80/',
        'http://[::1]:3000',
        '*',
      ]),
    ).toEqual([
      'https://app.example.com',
      'http://127.0.0.1:8080',
      'https://edge.example.com',
      'http://localhost',
      'http://[::1]:3000',
      '*',
    ]);
    expect(origins(['https://a.example', 'https://A.example/'])).toEqual(['https://a.example']);
  });

  it('refuses anything but "*" or http(s)://HOST[:PORT], one problem per bad entry', () => {
    const bad = [
      'ws://a.example',
      'https://a.example/app',
      'https://a.example?x=1',
      'https://a.example#f',
      'https://user@a.example',
      'https://a.example:0',
      'https://a.example:65536',
      'https://a example',
      'a.example',
      'https://',
      'https://[zz::1]',
      '',
      'null',
    ];
    for (const entry of bad) {
      // A URL's user information is shown as <credential>, never as given.
      const shown = entry.replace('user@', '<credential>@');
      expect(refused([entry]), entry).toEqual([
        `test: routes[0].allowed_origins[0]: expected "*" or an origin http(s)://HOST[:PORT] without a path, got string ${JSON.stringify(shown)}`,
      ]);
    }
    expect(refused(['https://ok.example', 7])).toEqual([
      'test: routes[0].allowed_origins[1]: expected "*" or an origin http(s)://HOST[:PORT] without a path, got number 7',
    ]);
    expect(refused('https://a.example')).toEqual([
      'test: routes[0].allowed_origins: expected a list of origins (e.g. [https://app.example.com]), got string "https://a.example"',
    ]);
  });

  it('allow_anonymous needs a non-empty list without "*", on the route that inherits or sets it', () => {
    const why =
      'allow_anonymous: true needs a non-empty list of origins without "*": otherwise a cross-site page open in a browser on this machine could open a session (and move the world) without a credential';
    const anon = (route: Record<string, unknown>, top: Record<string, unknown> = {}) =>
      problems({ listen: '127.0.0.1:8720', ...top, routes: [{ path: '/', upstream: 'ws://w/', ...route }] });
    expect(anon({ agents: { allow_anonymous: true } })).toEqual([`test: routes[0].allowed_origins: ${why}`]);
    expect(anon({}, { agents: { allow_anonymous: true } })).toEqual([
      `test: routes[0].allowed_origins: ${why}`,
    ]);
    expect(anon({ agents: { allow_anonymous: true }, allowed_origins: ['*'] })).toEqual([
      `test: routes[0].allowed_origins: ${why}`,
    ]);
    expect(anon({ agents: { allow_anonymous: true }, allowed_origins: ['http://127.0.0.1:8720'] })).toEqual(
      [],
    );
    // A malformed list is reported once, without a second problem about anonymous agents.
    expect(anon({ agents: { allow_anonymous: true }, allowed_origins: ['nope'] })).toHaveLength(1);
  });
});
