/**
 * Loads and validates the edge's configuration. Every refusal names the file, the key and what was
 * expected. Credentials come from the environment, files, or the config file; never from argv.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseDocument } from 'yaml';
import {
  DEFAULT_BUDGETS,
  DEFAULT_TIMING,
  DEFAULT_TRANSPORT,
  type EdgeConfig,
  type ListenAddress,
  type RouteConfig,
  type StoreConfig,
  type TlsConfig,
  type WebTransportConfig,
} from './schema.js';
import { urlCarriesCredential } from '../transport/auth.js';

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }
}

export const DEFAULT_LISTEN: ListenAddress = { host: '127.0.0.1', port: 8720 };
export const DEFAULT_ADMIN: ListenAddress = { host: '127.0.0.1', port: 9464 };
export const AGENT_TOKENS_ENV = 'AWP_EDGE_AGENT_TOKENS';
export const UPSTREAM_TOKEN_ENV = 'AWP_EDGE_UPSTREAM_TOKEN';

type Env = Readonly<Record<string, string | undefined>>;

/** Collects problems with their location, so one run reports all of them. */
class Checker {
  readonly problems: string[] = [];
  constructor(private readonly source: string) {}

  fail(key: string, expected: string): void {
    this.problems.push(`${this.source}: ${key}: ${expected}`);
  }

  obj(v: unknown, key: string): Record<string, unknown> | undefined {
    if (v === undefined) return undefined;
    if (typeof v !== 'object' || v === null || Array.isArray(v)) {
      this.fail(key, `expected a mapping, got ${describe(v)}`);
      return undefined;
    }
    return v as Record<string, unknown>;
  }

  known(o: Record<string, unknown>, prefix: string, keys: readonly string[]): void {
    for (const k of Object.keys(o)) {
      if (!keys.includes(k)) this.fail(join(prefix, k), `unknown key (expected one of: ${keys.join(', ')})`);
    }
  }

  str(v: unknown, key: string): string | undefined {
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v.length === 0) {
      this.fail(key, `expected a non-empty string, got ${describe(v)}`);
      return undefined;
    }
    return v;
  }

  int(v: unknown, key: string, min: number, max: number): number | undefined {
    if (v === undefined) return undefined;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
      this.fail(key, `expected an integer from ${min} to ${max}, got ${describe(v)}`);
      return undefined;
    }
    return v;
  }

  bool(v: unknown, key: string): boolean | undefined {
    if (v === undefined) return undefined;
    if (typeof v !== 'boolean') {
      this.fail(key, `expected true or false, got ${describe(v)}`);
      return undefined;
    }
    return v;
  }

  address(v: unknown, key: string): ListenAddress | undefined {
    if (v === undefined) return undefined;
    const parsed = typeof v === 'string' ? parseAddress(v) : undefined;
    if (parsed === undefined) this.fail(key, `expected HOST:PORT (e.g. 127.0.0.1:8720), got ${describe(v)}`);
    return parsed;
  }

  oneOf<T extends string>(v: unknown, key: string, values: readonly T[]): T | undefined {
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || !values.includes(v as T)) {
      this.fail(key, `expected one of ${values.join(', ')}, got ${describe(v)}`);
      return undefined;
    }
    return v as T;
  }

  /** A credential given literally, by environment variable (`*_env`) or by file (`*_file`). */
  secret(o: Record<string, unknown>, prefix: string, name: string, env: Env): string | undefined {
    const given = [name, `${name}_env`, `${name}_file`].filter((k) => o[k] !== undefined);
    if (given.length > 1) this.fail(join(prefix, given.join('/')), 'give a credential one way only');
    const literal = this.str(o[name], join(prefix, name));
    if (literal !== undefined) return literal;
    const envName = this.str(o[`${name}_env`], join(prefix, `${name}_env`));
    if (envName !== undefined) {
      const value = env[envName];
      if (value === undefined || value === '')
        this.fail(join(prefix, `${name}_env`), `environment variable ${envName} is not set`);
      return value;
    }
    const file = this.str(o[`${name}_file`], join(prefix, `${name}_file`));
    if (file !== undefined) {
      try {
        return readFileSync(file, 'utf8').trim();
      } catch (err) {
        this.fail(join(prefix, `${name}_file`), `cannot read ${file}: ${(err as Error).message}`);
      }
    }
    return undefined;
  }

  upstreamUrl(v: unknown, key: string): string | undefined {
    const s = this.str(v, key);
    if (s === undefined) return undefined;
    let url: URL;
    try {
      url = new URL(s);
    } catch {
      this.fail(key, `expected a ws:// or wss:// URL, got ${JSON.stringify(s)}`);
      return undefined;
    }
    if (url.protocol !== 'ws:' && url.protocol !== 'wss:')
      this.fail(key, `expected a ws:// or wss:// URL, got ${url.protocol}//`);
    if (url.username !== '' || url.password !== '' || urlCarriesCredential(url.search.slice(1))) {
      this.fail(
        key,
        'the URL carries a credential (AWP-SEC-006): give it as upstream_token_env or upstream_token_file',
      );
    }
    return s;
  }
}

export interface CommandLine {
  readonly upstream?: string | undefined;
  readonly listen?: string | undefined;
  readonly admin?: string | undefined;
  readonly engine?: string | undefined;
  readonly log_level?: string | undefined;
}

/** `awp-edge serve --upstream URL`: one world at `/`, credentials from the environment. */
export function configFromCommandLine(cli: CommandLine, env: Env = process.env): EdgeConfig {
  const raw: Record<string, unknown> = {
    listen: cli.listen,
    admin: cli.admin,
    engine: cli.engine,
    log_level: cli.log_level,
    routes: [
      {
        name: 'default',
        path: '/',
        upstream: cli.upstream,
        upstream_token_env: env[UPSTREAM_TOKEN_ENV] !== undefined ? UPSTREAM_TOKEN_ENV : undefined,
      },
    ],
  };
  return validateConfig(raw, 'command line', env);
}

export function loadConfigFile(file: string, env: Env = process.env, cli: CommandLine = {}): EdgeConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError([`${file}: cannot read: ${(err as Error).message}`]);
  }
  const doc = parseDocument(text, { prettyErrors: true });
  if (doc.errors.length > 0) throw new ConfigError(doc.errors.map((e) => `${file}: ${e.message}`));
  const raw = doc.toJS() as unknown;
  const merged =
    typeof raw === 'object' && raw !== null && !Array.isArray(raw)
      ? {
          ...(raw as Record<string, unknown>),
          ...definedOnly({
            listen: cli.listen,
            admin: cli.admin,
            engine: cli.engine,
            log_level: cli.log_level,
          }),
        }
      : raw;
  return validateConfig(merged, file, env);
}

const TOP_KEYS = [
  'listen',
  'admin',
  'public_url',
  'engine',
  'log_level',
  'agents',
  'routes',
  'timing',
  'transport',
  'store',
  'drain',
  'webtransport',
  'tls',
  'budgets',
];
const ROUTE_KEYS = [
  'name',
  'path',
  'upstream',
  'upstream_token',
  'upstream_token_env',
  'upstream_token_file',
  'agents',
  'observers',
  'hub_linger_ms',
  'approvers',
];
const AGENT_KEYS = ['tokens', 'tokens_env', 'tokens_file', 'allow_anonymous'];

export function validateConfig(raw: unknown, source: string, env: Env = process.env): EdgeConfig {
  const c = new Checker(source);
  const top = c.obj(raw ?? {}, '(top level)') ?? {};
  c.known(top, '', TOP_KEYS);
  const listen = c.address(top.listen, 'listen') ?? DEFAULT_LISTEN;
  const admin = c.address(top.admin, 'admin') ?? DEFAULT_ADMIN;
  const publicUrl = c.str(top.public_url, 'public_url');
  if (publicUrl !== undefined && !/^wss?:\/\/[^/?#]+\/?$/.test(publicUrl)) {
    c.fail('public_url', `expected ws(s)://HOST[:PORT] without a path, got ${JSON.stringify(publicUrl)}`);
  }
  const engine = c.oneOf(top.engine, 'engine', ['auto', 'uws', 'ws'] as const) ?? 'auto';
  const logLevel =
    c.oneOf(top.log_level, 'log_level', [
      'fatal',
      'error',
      'warn',
      'info',
      'debug',
      'trace',
      'silent',
    ] as const) ?? 'info';

  const agents = agentCredentials(c, c.obj(top.agents, 'agents') ?? {}, 'agents', env, true);
  const routesRaw = top.routes;
  const routes: RouteConfig[] = [];
  if (!Array.isArray(routesRaw) || routesRaw.length === 0) {
    c.fail('routes', 'expected a list of at least one route ({name, path, upstream})');
  } else {
    routesRaw.forEach((r, i) => {
      const route = routeConfig(c, r, `routes[${i}]`, env, agents, listen);
      if (route !== undefined) routes.push(route);
    });
  }
  const seen = new Map<string, string>();
  for (const r of routes) {
    for (const [what, value] of [
      ['path', r.path],
      ['name', r.name],
    ] as const) {
      const k = `${what}:${value}`;
      if (seen.has(k))
        c.fail(`routes (${r.name})`, `${what} ${JSON.stringify(value)} is used by more than one route`);
      seen.set(k, r.name);
    }
  }

  const timingRaw = c.obj(top.timing, 'timing') ?? {};
  c.known(timingRaw, 'timing', Object.keys(DEFAULT_TIMING));
  const transportRaw = c.obj(top.transport, 'transport') ?? {};
  c.known(transportRaw, 'transport', Object.keys(DEFAULT_TRANSPORT));
  const store = storeConfig(c, c.obj(top.store, 'store') ?? {}, env);
  const budgetsRaw = c.obj(top.budgets, 'budgets') ?? {};
  c.known(budgetsRaw, 'budgets', Object.keys(DEFAULT_BUDGETS));
  const budget = (k: keyof typeof DEFAULT_BUDGETS) =>
    c.int(budgetsRaw[k], `budgets.${k}`, 1, 2 ** 40) ?? DEFAULT_BUDGETS[k];
  const drainRaw = c.obj(top.drain, 'drain') ?? {};
  c.known(drainRaw, 'drain', ['window_ms']);
  const config: EdgeConfig = {
    listen,
    admin,
    public_url: publicUrl,
    engine,
    log_level: logLevel,
    routes,
    timing: {
      hop_ping_interval_ms:
        c.int(timingRaw.hop_ping_interval_ms, 'timing.hop_ping_interval_ms', 0, 600_000) ??
        DEFAULT_TIMING.hop_ping_interval_ms,
      upstream_connect_timeout_ms:
        c.int(timingRaw.upstream_connect_timeout_ms, 'timing.upstream_connect_timeout_ms', 100, 120_000) ??
        DEFAULT_TIMING.upstream_connect_timeout_ms,
    },
    transport: {
      max_message_bytes:
        c.int(transportRaw.max_message_bytes, 'transport.max_message_bytes', 1024, 1 << 30) ??
        DEFAULT_TRANSPORT.max_message_bytes,
      high_water_bytes:
        c.int(transportRaw.high_water_bytes, 'transport.high_water_bytes', 1024, 1 << 30) ??
        DEFAULT_TRANSPORT.high_water_bytes,
      max_queued_bytes:
        c.int(transportRaw.max_queued_bytes, 'transport.max_queued_bytes', 65_536, 2 ** 31) ??
        DEFAULT_TRANSPORT.max_queued_bytes,
    },
    store,
    drain: { window_ms: c.int(drainRaw.window_ms, 'drain.window_ms', 0, 600_000) ?? 20_000 },
    webtransport: webtransportConfig(c, top.webtransport),
    tls: tlsConfig(c, top.tls),
    budgets: {
      max_connections: budget('max_connections'),
      max_sessions: budget('max_sessions'),
      max_messages_per_second: budget('max_messages_per_second'),
      max_bytes_per_second: budget('max_bytes_per_second'),
      max_message_bytes: budget('max_message_bytes'),
    },
  };
  if (c.problems.length > 0) throw new ConfigError(c.problems);
  return config;
}

/** `webtransport: {listen, cert_file, key_file}`: the files are read and checked now, so a bad pair fails at start. */
function webtransportConfig(c: Checker, raw: unknown): WebTransportConfig | undefined {
  const o = c.obj(raw, 'webtransport');
  if (o === undefined) return undefined;
  c.known(o, 'webtransport', ['listen', 'cert_file', 'key_file']);
  const listen = c.address(o.listen, 'webtransport.listen');
  if (o.listen === undefined)
    c.fail('webtransport.listen', 'required: HOST:PORT (HTTP/2 on TCP, and HTTP/3 on UDP where available)');
  const pair = certificatePair(c, o, 'webtransport');
  if (listen === undefined || pair === undefined) return undefined;
  return { listen, ...pair };
}

/** `tls: {cert_file, key_file}`: the agent-facing listener serves wss:// (AWP-SEC-001). */
function tlsConfig(c: Checker, raw: unknown): TlsConfig | undefined {
  const o = c.obj(raw, 'tls');
  if (o === undefined) return undefined;
  c.known(o, 'tls', ['cert_file', 'key_file']);
  return certificatePair(c, o, 'tls');
}

/** A PEM certificate and its private key, read and matched at load time so a bad pair fails at start. */
function certificatePair(c: Checker, o: Record<string, unknown>, prefix: string): TlsConfig | undefined {
  const files: Record<'cert_file' | 'key_file', string | undefined> = {
    cert_file: undefined,
    key_file: undefined,
  };
  for (const k of ['cert_file', 'key_file'] as const) {
    const file = c.str(o[k], `${prefix}.${k}`);
    if (o[k] === undefined) c.fail(`${prefix}.${k}`, 'required: a PEM file');
    if (file === undefined) continue;
    try {
      files[k] = readFileSync(file, 'utf8');
    } catch (err) {
      c.fail(`${prefix}.${k}`, `cannot read ${file}: ${(err as Error).message}`);
    }
  }
  const { cert_file: cert, key_file: key } = files;
  if (cert === undefined || key === undefined) return undefined;
  try {
    if (!new X509Certificate(cert).checkPrivateKey(createPrivateKey(key))) {
      c.fail(`${prefix}.key_file`, 'the private key does not match the certificate');
    }
  } catch (err) {
    c.fail(`${prefix}.cert_file`, `not a PEM certificate and private key: ${(err as Error).message}`);
  }
  return { cert_file: o.cert_file as string, key_file: o.key_file as string, cert, key };
}

function storeConfig(c: Checker, o: Record<string, unknown>, env: Env): StoreConfig {
  c.known(o, 'store', ['kind', 'url', 'url_env', 'url_file', 'key_prefix']);
  const kind = c.oneOf(o.kind, 'store.kind', ['memory', 'redis'] as const) ?? 'memory';
  if (kind === 'memory') {
    for (const k of ['url', 'url_env', 'url_file', 'key_prefix'])
      if (o[k] !== undefined) c.fail(`store.${k}`, 'only for kind: redis');
    return { kind };
  }
  // The URL may carry a password: it is a credential, given like one.
  const url = c.secret(o, 'store', 'url', env);
  if (url === undefined) {
    c.fail('store.url_env', 'kind redis needs url_env (e.g. AWP_EDGE_REDIS_URL), url_file or url');
    return { kind: 'memory' };
  }
  if (!/^rediss?:\/\//.test(url)) c.fail('store.url', 'expected a redis:// or rediss:// URL');
  return { kind, url, key_prefix: c.str(o.key_prefix, 'store.key_prefix') ?? 'awp-edge:' };
}

interface AgentCredentials {
  readonly tokens: readonly string[];
  readonly allow_anonymous: boolean;
}

function agentCredentials(
  c: Checker,
  o: Record<string, unknown>,
  prefix: string,
  env: Env,
  isDefault: boolean,
): AgentCredentials | undefined {
  c.known(o, prefix, AGENT_KEYS);
  const list = o.tokens;
  let tokens: string[] | undefined;
  if (list !== undefined) {
    if (!Array.isArray(list) || list.some((t) => typeof t !== 'string' || t.length === 0)) {
      c.fail(join(prefix, 'tokens'), 'expected a list of non-empty strings');
    } else tokens = list as string[];
  }
  const joined = c.secret({ ...o, tokens: undefined }, prefix, 'tokens', env);
  if (joined !== undefined) tokens = splitTokens(joined);
  if (tokens === undefined && isDefault && env[AGENT_TOKENS_ENV] !== undefined)
    tokens = splitTokens(env[AGENT_TOKENS_ENV]);
  const anonymous = c.bool(o.allow_anonymous, join(prefix, 'allow_anonymous'));
  if (tokens === undefined && anonymous === undefined) return undefined;
  for (const t of tokens ?? []) {
    if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(t)) {
      c.fail(
        join(prefix, 'tokens'),
        'a token has characters outside RFC 6455 token characters (it could not travel as awp.bearer.<token>)',
      );
      break;
    }
  }
  return { tokens: tokens ?? [], allow_anonymous: anonymous ?? false };
}

function routeConfig(
  c: Checker,
  raw: unknown,
  prefix: string,
  env: Env,
  defaults: AgentCredentials | undefined,
  listen: ListenAddress,
): RouteConfig | undefined {
  const o = c.obj(raw, prefix);
  if (o === undefined) return undefined;
  c.known(o, prefix, ROUTE_KEYS);
  const path = c.str(o.path, join(prefix, 'path')) ?? (o.path === undefined ? '/' : undefined);
  if (
    path !== undefined &&
    (!path.startsWith('/') || /[?#]/.test(path) || (path !== '/' && path.endsWith('/')))
  ) {
    c.fail(
      join(prefix, 'path'),
      `expected an absolute path like /worlds/arm (no trailing slash, query or fragment), got ${JSON.stringify(path)}`,
    );
  }
  if (path !== undefined && /\/stream(\/|$)/.test(path))
    c.fail(join(prefix, 'path'), '"stream" is reserved for stream endpoints');
  const upstream = c.upstreamUrl(o.upstream, join(prefix, 'upstream'));
  if (o.upstream === undefined) c.fail(join(prefix, 'upstream'), "required: the world's ws:// or wss:// URL");
  const name =
    c.str(o.name, join(prefix, 'name')) ?? (path === '/' ? 'default' : path?.slice(1).replaceAll('/', '_'));
  if (name !== undefined && !/^[A-Za-z_][A-Za-z0-9_.:-]*$/.test(name)) {
    c.fail(
      join(prefix, 'name'),
      `expected an identifier (letters, digits, _ . : -), got ${JSON.stringify(name)}`,
    );
  }
  const upstreamToken = c.secret(o, prefix, 'upstream_token', env);
  const own =
    o.agents !== undefined
      ? agentCredentials(c, c.obj(o.agents, join(prefix, 'agents')) ?? {}, join(prefix, 'agents'), env, false)
      : undefined;
  const agents = own ?? defaults;
  if (agents === undefined || (agents.tokens.length === 0 && !agents.allow_anonymous)) {
    c.fail(
      join(prefix, 'agents'),
      `no agent credentials: set ${AGENT_TOKENS_ENV} (comma-separated), or agents.tokens / tokens_env / tokens_file in the config`,
    );
  } else if (agents.allow_anonymous && !isLoopback(listen.host)) {
    c.fail(
      join(prefix, 'agents.allow_anonymous'),
      `anonymous agents are only allowed when listening on loopback, not ${listen.host} (AWP-SEC-002)`,
    );
  }
  const observers = c.oneOf(o.observers, join(prefix, 'observers'), ['fanout', 'relay'] as const) ?? 'fanout';
  const approversRaw = c.obj(o.approvers, join(prefix, 'approvers')) ?? {};
  c.known(approversRaw, join(prefix, 'approvers'), ['tokens', 'tokens_env', 'tokens_file']);
  const approverTokens = splitTokens(
    c.secret({ ...approversRaw, tokens: undefined }, join(prefix, 'approvers'), 'tokens', env) ?? '',
  );
  if (Array.isArray(approversRaw.tokens))
    approverTokens.push(
      ...(approversRaw.tokens as unknown[]).filter((t): t is string => typeof t === 'string'),
    );
  const linger = c.int(o.hub_linger_ms, join(prefix, 'hub_linger_ms'), 0, 3_600_000) ?? 5_000;
  if (path === undefined || upstream === undefined || name === undefined || agents === undefined)
    return undefined;
  return {
    name,
    path,
    upstream,
    upstream_token: upstreamToken,
    agent_tokens: agents.tokens,
    allow_anonymous: agents.allow_anonymous,
    observers,
    hub_linger_ms: linger,
    approver_tokens: approverTokens,
  };
}

export function parseAddress(s: string): ListenAddress | undefined {
  const m = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(s);
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port > 65535) return undefined;
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port };
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}

function splitTokens(s: string): string[] {
  return s
    .split(/[,\n]/)
    .map((t) => t.trim())
    .filter((t) => t.length > 0);
}

function join(prefix: string, key: string): string {
  return prefix === '' ? key : `${prefix}.${key}`;
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  return `${typeof v} ${JSON.stringify(v)}`;
}

function definedOnly(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}
