/**
 * Fuzz target: the upgrade decision (src/edge/upgrade-decision.ts), sans-IO, for both bindings, on real
 * RouteRuntimes: fuzzer-chosen path, query, Host, Origin, Authorization and Sec-WebSocket-Protocol (split by the
 * engines' parseProtocols), draining, public_url and the connection budget. In every fuzzer string `$A`, `$P`
 * and `$S` stand for an agent credential, an approver credential and a minted session token, so credentials
 * reach every place of the request in a few mutations.
 *
 * Crashes: any exception, and a decision that breaks the issue-12 contract: a URL with a query is refused 400;
 * a path segment that is a known credential is refused 400 credential_in_url; no refusal body and no redacted
 * log URL holds a credential; an accepted control connection's base URL parses, and the stream endpoints the
 * edge builds from it (ws and webtransport) parse.
 */
import { FuzzedDataProvider } from '@jazzer.js/core/dist/FuzzedDataProvider.js';
import type { RouteConfig } from '../../../src/config/schema.js';
import { decideUpgrade, redactedUrl, type DecisionState } from '../../../src/edge/upgrade-decision.js';
import { RouteRuntime } from '../../../src/edge/route.js';
import { CredentialBudgets } from '../../../src/policy/budgets.js';
import { RelaySession } from '../../../src/relay/relay-session.js';
import { TokenMint } from '../../../src/session/tokens.js';
import { bearerCredential, urlCarriesCredential } from '../../../src/transport/auth.js';
import { parseProtocols } from '../../../src/transport/engine.js';
import { check } from './check.js';

const AGENT = 'agtok-7Hq2Lm';
const APPROVER = 'aprtok-9Zx1Vb';
const mint = new TokenMint();
const SESSION = mint.mint();
const CREDENTIALS = [AGENT, APPROVER, SESSION];

const PATHS = ['/', '/arm/', '/lab', '/stream', '/stream/1', '/arm/stream', '/lab/stream/2', '/nope'];
const PUBLIC_URLS = [undefined, 'https://edge.example.com', 'http://127.0.0.1:8080'];
const WORLD_ENDPOINTS = [{ binding: 'ws', url: 'ws://world.internal/stream' }, { binding: 'inline' }];

function route(name: string, path: string, extra: Partial<RouteConfig>): RouteConfig {
  return {
    name,
    path,
    upstream: 'ws://world.internal/control',
    agent_tokens: [AGENT],
    allow_anonymous: false,
    observers: 'relay',
    hub_linger_ms: 1000,
    approver_tokens: [APPROVER],
    allowed_origins: [],
    ...extra,
  };
}

function expand(s: string): string {
  return s.replace(/\$A/g, AGENT).replace(/\$P/g, APPROVER).replace(/\$S/g, SESSION);
}

function maybe(fdp: FuzzedDataProvider, max: number): string | undefined {
  return fdp.consumeBoolean() ? expand(fdp.consumeString(fdp.consumeIntegralInRange(0, max))) : undefined;
}

export function fuzz(data: Buffer): void {
  const fdp = new FuzzedDataProvider(data);
  const config = fdp.consumeIntegralInRange(0, 0xff);
  const routes = [
    new RouteRuntime(route('main', '/', {}), mint),
    new RouteRuntime(
      route('arm', '/arm/', { allow_anonymous: true, allowed_origins: ['https://app.example.com'] }),
      mint,
    ),
    new RouteRuntime(route('lab', '/lab', { allowed_origins: ['*'], observers: 'fanout' }), mint),
  ];
  if ((config & 1) !== 0) for (const r of routes) r.enableWebTransport(4433);
  const session = new RelaySession({
    edge_token: SESSION,
    route: (config & 2) !== 0 ? 'main' : 'lab',
    upstream_token: 'world-token',
    session_id: 's1',
    mode: 'streaming',
    reconnect_window_ms: 30000,
    heartbeat_interval_ms: 5000,
    agent_ack: 0,
    suspended_at_ms: null,
  });
  session.upstreamEndpoints = WORLD_ENDPOINTS;
  const budgets = new CredentialBudgets(
    {
      max_connections: [1000, 0, 1, 2][(config >> 2) & 3]!, // 0: the budget refuses (429)
      max_sessions: 10,
      max_messages_per_second: 100,
      max_bytes_per_second: 1e6,
      max_message_bytes: 1e6,
    },
    () => 0,
    () => undefined,
  );
  const state: DecisionState = {
    routes,
    draining: (config & 16) !== 0,
    publicUrl: PUBLIC_URLS[(config >> 5) % PUBLIC_URLS.length],
    scheme: (config & 128) !== 0 ? 'wss' : 'ws',
    fallbackAuthority: '127.0.0.1:8080',
    budgets,
    isCredential: (v) => CREDENTIALS.includes(v) || mint.owns(v),
    attachedSession: (t) => (t === SESSION ? session : undefined),
  };

  const pathChoice = fdp.consumeIntegralInRange(0, PATHS.length);
  const pathTail = expand(fdp.consumeString(fdp.consumeIntegralInRange(0, 64)));
  const path = pathChoice === PATHS.length ? pathTail : PATHS[pathChoice]! + pathTail;
  const query = fdp.consumeBoolean() ? expand(fdp.consumeString(fdp.consumeIntegralInRange(0, 64))) : '';
  const headers = new Map<string, string>();
  for (const name of ['host', 'origin', 'authorization']) {
    const v = maybe(fdp, 96);
    if (v !== undefined) headers.set(name, v);
  }
  const protocolHeader = maybe(fdp, 128);
  const binding = fdp.consumeBoolean() ? 'webtransport' : 'ws';
  const protocols = parseProtocols(protocolHeader);
  check(
    protocols.every((p) => p.length > 0 && p === p.trim()),
    'parseProtocols kept an empty or padded entry',
  );
  bearerCredential(headers.get('authorization'), protocols);
  urlCarriesCredential(query);

  const decision = decideUpgrade(
    { binding, path, query, protocols, header: (n) => headers.get(n.toLowerCase()) },
    state,
  );
  const logged = redactedUrl(path, query);
  for (const c of CREDENTIALS) check(!logged.includes(c), 'a redacted URL shows a credential');

  const segments = path.split('/').map((s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  });
  const credentialInPath = segments.some((s) => CREDENTIALS.includes(s));
  if (!decision.accept) {
    for (const c of CREDENTIALS) check(!decision.body.includes(c), 'a refusal body shows a credential');
    check(Number.isInteger(decision.status) && decision.status >= 400 && decision.status < 600, 'bad status');
  }
  if (credentialInPath) {
    check(
      !decision.accept && /^(credential_in_url|url_too_long)$/.test(decision.reason),
      'a credential in the path was not refused',
    );
  }
  if (query !== '') {
    check(
      !decision.accept &&
        ((decision.status === 400 && /^(query_not_allowed|credential_in_url)$/.test(decision.reason)) ||
          (decision.status === 414 && decision.reason === 'url_too_long')),
      'a URL with a query was not refused 400 (or 414, too long)',
    );
  }
  if (!decision.accept || decision.target.kind !== 'control') return;
  const base = decision.target.base;
  try {
    new URL(base);
  } catch {
    check(
      false,
      `accepted control connection has a base that is not a URL: ${JSON.stringify(base)}`,
      'host-not-a-url',
    );
  }
  // What session.open hands the agent: every endpoint the edge builds from this base must be a URL.
  let endpoints;
  try {
    endpoints = decision.target.route.edgeEndpoints(base, WORLD_ENDPOINTS);
  } catch (e) {
    check(false, `edgeEndpoints threw for base ${JSON.stringify(base)}: ${String(e)}`, 'host-not-a-url');
    return;
  }
  for (const ep of endpoints) {
    if (ep.url === undefined) continue;
    try {
      new URL(ep.url);
    } catch {
      check(false, `stream endpoint is not a URL: ${JSON.stringify(ep.url)}`, 'host-not-a-url');
    }
  }
}
