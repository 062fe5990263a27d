/** The semantic checks of `routes[]` (the shape is the schema's): credentials, URLs, origins, duplicates. */
import { urlCarriesCredential } from '../transport/auth.js';
import { isLoopback, normaliseOrigin, type ListenAddress } from './address.js';
import {
  AGENT_TOKENS_ENV,
  agentCredentials,
  approverTokens,
  resolveSecret,
  type AgentCredentials,
} from './credentials.js';
import type { RouteFile } from './edge-schema.js';
import { describe, join, type Env, type Problems } from './problems.js';
import type { RouteConfig } from './schema.js';
import { recordConfig } from './record.js';

export interface RouteContext {
  readonly env: Env;
  /** The top-level `agents` section; `failed` when it had a problem (routes then say nothing more). */
  readonly defaults: { readonly value: AgentCredentials | undefined; readonly failed: boolean };
  /** The agent listener, when `listen` is valid. */
  readonly listen: ListenAddress | undefined;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_.:-]*$/;

/** One route whose shape is valid; undefined when it has a problem (reported). */
export function routeConfig(
  p: Problems,
  o: RouteFile,
  prefix: string,
  ctx: RouteContext,
): RouteConfig | undefined {
  const before = p.list.length;
  const { path } = o;
  if (/\/stream(\/|$)/.test(path)) p.fail(join(prefix, 'path'), '"stream" is reserved for stream endpoints');
  upstreamUrl(p, o.upstream, join(prefix, 'upstream'));
  // The default name comes from the path, so it is checked here rather than by the schema.
  const name = o.name ?? (path === '/' ? 'default' : path.slice(1).replaceAll('/', '_'));
  if (o.name === undefined && !IDENTIFIER.test(name)) {
    p.fail(
      join(prefix, 'name'),
      `expected an identifier (letters, digits, _ . : -), got ${describe(name)} (from the path: give a name)`,
    );
  }
  const upstreamToken = resolveSecret(p, o, prefix, 'upstream_token', ctx.env) as string | undefined;
  const own =
    o.agents !== undefined
      ? agentCredentials(p, o.agents, join(prefix, 'agents'), ctx.env, false)
      : { value: undefined, failed: false };
  let agents = own.value ?? (own.failed ? undefined : ctx.defaults.value);
  const agentsKnown = !own.failed && (own.value !== undefined || !ctx.defaults.failed);
  if (agentsKnown && (agents === undefined || (agents.tokens.length === 0 && !agents.allow_anonymous))) {
    const key = join(prefix, 'agents');
    const message = `no agent credentials: set ${AGENT_TOKENS_ENV} (comma-separated), or agents.tokens / tokens_env / tokens_file in the config`;
    // Credentials a route inherits may come from AWP_EDGE_AGENT_TOKENS at run time (check-config without --strict).
    if (agents !== undefined || o.agents !== undefined) p.fail(key, message);
    else if (p.absent(key, message)) agents = { tokens: [], allow_anonymous: false };
  }
  const origins = allowedOrigins(p, o.allowed_origins, join(prefix, 'allowed_origins'));
  if (agents?.allow_anonymous === true) {
    if (ctx.listen !== undefined && !isLoopback(ctx.listen.host)) {
      p.fail(
        join(prefix, 'agents.allow_anonymous'),
        `anonymous agents are only allowed when listening on loopback, not ${ctx.listen.host} (AWP-SEC-002)`,
      );
    }
    if (origins !== undefined && (origins.length === 0 || origins.includes('*'))) {
      p.fail(
        join(prefix, 'allowed_origins'),
        'allow_anonymous: true needs a non-empty list of origins without "*": otherwise a cross-site page ' +
          'open in a browser on this machine could open a session (and move the world) without a credential',
      );
    }
  }
  const approvers =
    o.approvers !== undefined ? approverTokens(p, o.approvers, join(prefix, 'approvers'), ctx.env) : [];
  const record = o.record !== undefined ? recordConfig(p, o.record, join(prefix, 'record')) : undefined;
  if (p.list.length > before || agents === undefined || origins === undefined) return undefined;
  return {
    name,
    path,
    upstream: o.upstream,
    upstream_token: upstreamToken,
    agent_tokens: agents.tokens,
    allow_anonymous: agents.allow_anonymous,
    observers: o.observers,
    hub_linger_ms: o.hub_linger_ms,
    approver_tokens: approvers,
    allowed_origins: origins,
    ...(record !== undefined && { record }),
  };
}

/** Two routes may not share a path or a name. */
export function duplicateRoutes(p: Problems, routes: readonly RouteConfig[]): void {
  const seen = new Set<string>();
  for (const r of routes) {
    for (const [what, value] of [
      ['path', r.path],
      ['name', r.name],
    ] as const) {
      const k = `${what}:${value}`;
      if (seen.has(k))
        p.fail(`routes (${r.name})`, `${what} ${JSON.stringify(value)} is used by more than one route`);
      seen.add(k);
    }
  }
}

/** A world URL: ws:// or wss://, parseable, and without a credential in it (AWP-SEC-006). */
function upstreamUrl(p: Problems, s: string, key: string): void {
  let url: URL;
  try {
    url = new URL(s);
  } catch {
    p.fail(key, `expected a ws:// or wss:// URL, got ${describe(s)}`);
    return;
  }
  // The schema has settled the scheme (ws or wss).
  if (url.username !== '' || url.password !== '' || urlCarriesCredential(url.search.slice(1))) {
    p.fail(
      key,
      'the URL carries a credential (AWP-SEC-006): give it as upstream_token_env or upstream_token_file',
    );
  }
}

/**
 * Normalises the entries the way a browser serialises an Origin header, so the edge compares strings; the
 * schema's pattern has settled the form, this settles the port range and the host. Undefined on a problem.
 */
function allowedOrigins(p: Problems, list: readonly string[], key: string): string[] | undefined {
  const out: string[] = [];
  let ok = true;
  for (const [i, entry] of list.entries()) {
    const origin = normaliseOrigin(entry);
    if (origin === undefined) {
      p.fail(
        `${key}[${i}]`,
        `expected "*" or an origin http(s)://HOST[:PORT] without a path, got ${describe(entry)}`,
      );
      ok = false;
    } else if (!out.includes(origin)) out.push(origin);
  }
  return ok ? out : undefined;
}
