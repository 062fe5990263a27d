/**
 * Loads and validates the edge's configuration: the shape against EDGE_SCHEMA (edge-schema.ts), then the
 * checks a schema cannot express. Every refusal names the file, the key and what was expected. Credentials
 * come from the environment, files, or the config file; never from argv.
 */
import { readFileSync } from 'node:fs';
import { parseDocument } from 'yaml';
import { parseAddress, type ListenAddress } from './address.js';
import { certificatePair } from './certificates.js';
import { agentCredentials, APPROVER_TOKENS_ENV, resolveSecret } from './credentials.js';
import type { EdgeFile, StoreFile } from './edge-schema.js';
import { ConfigError, Problems, type Env } from './problems.js';
import { duplicateRoutes, routeConfig } from './routes.js';
import type { EdgeConfig, RouteConfig, StoreConfig } from './schema.js';
import { checkShape } from './shape.js';

export { ConfigError } from './problems.js';
export { AGENT_TOKENS_ENV } from './credentials.js';
export const UPSTREAM_TOKEN_ENV = 'AWP_EDGE_UPSTREAM_TOKEN';

export interface CommandLine {
  readonly upstream?: string | undefined;
  readonly listen?: string | undefined;
  readonly admin?: string | undefined;
  readonly engine?: string | undefined;
  readonly log_level?: string | undefined;
}

/**
 * A configuration that can be checked again while the edge runs: the same document (a config file is read
 * once, at start) with every credential file it names read anew, validated exactly as at start.
 */
export interface ConfigSource {
  readonly config: EdgeConfig;
  /** The document validated again, its `*_file` credentials read anew; throws ConfigError. */
  readonly reread: () => EdgeConfig;
}

/** `awp-edge serve --upstream URL`: one world at `/`, credentials (agent, approver, upstream) from the environment. */
export function commandLineSource(cli: CommandLine, env: Env = process.env): ConfigSource {
  return source(commandLineDocument(cli, env), 'command line', env);
}

/** `awp-edge serve --config FILE`, with the command line's listen/admin/engine/log_level over the file's. */
export function configFileSource(file: string, env: Env = process.env, cli: CommandLine = {}): ConfigSource {
  return source(readConfigFile(file, cli), file, env);
}

function source(raw: unknown, name: string, env: Env): ConfigSource {
  const reread = () => validateConfig(raw, name, env);
  return { config: reread(), reread };
}

function commandLineDocument(cli: CommandLine, env: Env): Record<string, unknown> {
  return {
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
        approvers: env[APPROVER_TOKENS_ENV] ? { tokens_env: APPROVER_TOKENS_ENV } : undefined,
      },
    ],
  };
}

/** The parsed YAML, with the command line's listen/admin/engine/log_level over the file's. */
function readConfigFile(file: string, cli: CommandLine): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError([`${file}: cannot read: ${(err as Error).message}`]);
  }
  const doc = parseDocument(text, { prettyErrors: true });
  if (doc.errors.length > 0) throw new ConfigError(doc.errors.map((e) => `${file}: ${e.message}`));
  const raw = doc.toJS() as unknown;
  return typeof raw === 'object' && raw !== null && !Array.isArray(raw)
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
}

/**
 * Validates a parsed config. Semantic checks run on each section whose shape is valid, so one run reports
 * every problem without knock-on errors from a section that is already wrong.
 */
export function validateConfig(raw: unknown, source: string, env: Env = process.env): EdgeConfig {
  return checkConfig(raw, new Problems(source), env);
}

/**
 * `awp-edge check-config`: like loadConfigFile, but (unless `strict`) an environment variable or file that is
 * absent now is listed in `runtime` rather than refused, so a production config checks without its secrets.
 */
export function checkConfigFile(
  file: string,
  env: Env = process.env,
  strict = false,
): { readonly config: EdgeConfig; readonly runtime: readonly string[] } {
  const p = new Problems(file, !strict);
  return { config: checkConfig(readConfigFile(file, {}), p, env), runtime: p.runtime };
}

function checkConfig(raw: unknown, p: Problems, env: Env): EdgeConfig {
  const shape = checkShape(raw, p);
  // Where `clean` holds, the data has the schema's shape (defaults included).
  const file = shape.data as EdgeFile;
  const address = (key: 'listen' | 'admin' | 'stream_listen'): ListenAddress | undefined =>
    shape.clean(key) && file[key] !== undefined ? parseAddress(file[key]) : undefined;
  const listen = address('listen');
  const admin = address('admin');
  const streamListen = address('stream_listen');
  if (streamListen !== undefined && file.engine === 'ws')
    p.fail('stream_listen', 'needs the uWebSockets.js engine (engine: auto or uws), not ws');
  const publicUrl = shape.clean('public_url') ? publicBase(p, 'public_url', file.public_url) : undefined;
  const streamPublicUrl = shape.clean('stream_public_url')
    ? publicBase(p, 'stream_public_url', file.stream_public_url)
    : undefined;
  if (streamPublicUrl !== undefined && file.stream_listen === undefined)
    p.fail('stream_public_url', 'needs stream_listen (the listener it names)');
  const lowered = typeof file.stream_worker_nice === 'number' && file.stream_worker_nice > 0;
  if (lowered && file.stream_listen === undefined)
    p.fail('stream_worker_nice', 'needs stream_listen (the worker thread it lowers)');
  // Elsewhere setpriority(pid 0) would lower the whole process, the main thread with it.
  else if (lowered && process.platform !== 'linux')
    p.fail('stream_worker_nice', `lowers one thread on Linux only, not ${process.platform}`);

  const defaults = shape.clean('agents')
    ? agentCredentials(p, file.agents ?? {}, 'agents', env, true)
    : { value: undefined, failed: true };
  const routes: RouteConfig[] = [];
  if (Array.isArray(file.routes) && !shape.failed('routes')) {
    const ctx = { env, defaults, listen };
    // Each route whose shape is valid is checked, whatever the others' problems.
    file.routes.forEach((r, i) => {
      const route = shape.clean(`routes[${i}]`) ? routeConfig(p, r, `routes[${i}]`, ctx) : undefined;
      if (route !== undefined) routes.push(route);
    });
    duplicateRoutes(p, routes);
  }
  const store = shape.clean('store') ? storeConfig(p, file.store, env) : undefined;
  // Only sections whose shape is valid are read further (`null` or a list is not a mapping).
  const tlsFile = shape.clean('tls') ? file.tls : undefined;
  const tls = tlsFile !== undefined ? certificatePair(p, tlsFile, 'tls') : undefined;
  const wt = shape.clean('webtransport') ? file.webtransport : undefined;
  const wtPair = wt !== undefined ? certificatePair(p, wt, 'webtransport') : undefined;
  const wtListen = wt !== undefined ? parseAddress(wt.listen) : undefined;

  if (p.list.length > 0 || listen === undefined || admin === undefined || store === undefined)
    throw new ConfigError(p.list);
  return {
    listen,
    admin,
    stream_listen: streamListen,
    stream_public_url: streamPublicUrl,
    stream_worker_nice: file.stream_worker_nice,
    public_url: publicUrl,
    engine: file.engine,
    log_level: file.log_level,
    routes,
    timing: file.timing,
    transport: file.transport,
    store,
    drain: file.drain,
    tls,
    webtransport:
      wtPair !== undefined && wtListen !== undefined ? { listen: wtListen, ...wtPair } : undefined,
    budgets: file.budgets,
    viewer: file.viewer,
    metrics: file.metrics,
    credential_files: file.credential_files,
    secret_files: [...p.secretFiles],
  };
}

function storeConfig(p: Problems, o: StoreFile, env: Env): StoreConfig | undefined {
  if (o.kind === 'memory') {
    const extra = (['url', 'url_env', 'url_file', 'key_prefix'] as const).filter((k) => o[k] !== undefined);
    for (const k of extra) p.fail(`store.${k}`, 'only for kind: redis');
    return extra.length > 0 ? undefined : { kind: 'memory' };
  }
  // The URL may carry a password: it is a credential, given like one.
  const given = ['url', 'url_env', 'url_file'].some((k) => o[k as keyof StoreFile] !== undefined);
  const url = resolveSecret(p, o, 'store', 'url', env, 'redis://placeholder') as string | undefined;
  if (!given) {
    p.fail('store.url_env', 'kind redis needs url_env (e.g. AWP_EDGE_REDIS_URL), url_file or url');
    return undefined;
  }
  if (url === undefined) return undefined;
  if (!/^rediss?:\/\//.test(url)) {
    p.fail('store.url', 'expected a redis:// or rediss:// URL');
    return undefined;
  }
  return { kind: 'redis', url, key_prefix: o.key_prefix ?? 'awp-edge:' };
}

function definedOnly(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}

/**
 * A URL the edge hands every agent in its stream endpoints (the schema has settled its form): without a
 * credential, which would go to every agent, and without the trailing slash.
 */
function publicBase(p: Problems, key: string, url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    p.fail(key, 'expected ws(s)://HOST[:PORT] without a path, with a valid host');
    return undefined;
  }
  if (parsed.username !== '' || parsed.password !== '') {
    p.fail(key, 'the URL carries a credential: it names where agents connect, and every agent is handed it');
    return undefined;
  }
  return url.replace(/\/$/, '');
}
