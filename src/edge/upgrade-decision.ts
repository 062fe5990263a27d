/**
 * Whether to accept an upgrade, decided before any WebSocket or WebTransport session exists. Sans-IO:
 * the request's parts and the edge's state in, a target or an HTTP refusal out. Both bindings (the
 * agent listener's WebSocket upgrades and the WebTransport listener's CONNECTs) decide here, in this
 * order: the URL (AWP-SEC-006), the subprotocol, draining, the Host, the route, the Origin, the
 * credential and its budget (control connections) or the session token (stream connections, AWP-TRN-013).
 */
import type { AgentBudget, CredentialBudgets } from '../policy/budgets.js';
import type { RelaySession } from '../relay/relay-session.js';
import type { StreamEndpoint } from '../session/stream-endpoint.js';
import type { ChannelHub } from '../fanout/channel-hub.js';
import type { ObserverShell } from '../fanout/observer-shell.js';
import {
  bearerCredential,
  credentialDigest,
  digestAccepted,
  urlCarriesCredential,
} from '../transport/auth.js';
import { originAllowed, parseAuthority } from '../transport/origin.js';
import { redact } from '../telemetry/redact.js';
import type { RouteRuntime } from './route.js';

/** The parts of an upgrade request the decision reads (every one of them hostile). */
export interface UpgradeFacts {
  readonly binding: 'ws' | 'webtransport';
  readonly path: string;
  readonly query: string;
  header(name: string): string | undefined;
  /** Offered subprotocols (Sec-WebSocket-Protocol, or WT-Available-Protocols). */
  readonly protocols: readonly string[];
}

/** What the decision reads of the edge. */
export interface DecisionState {
  readonly routes: readonly RouteRuntime[];
  readonly draining: boolean;
  /** The configured public URL (no trailing slash), or undefined: endpoints are built from the Host. */
  readonly publicUrl: string | undefined;
  /** `ws` or `wss`: the scheme of endpoints built from the Host. */
  readonly scheme: 'ws' | 'wss';
  /** The authority used when a request carries no Host (HTTP/1.0 clients). */
  readonly fallbackAuthority: string;
  readonly budgets: CredentialBudgets;
  /** Whether a string is a credential the edge knows: agent and approver credentials, minted tokens. */
  isCredential(value: string): boolean;
  /** The relay session a token names, if its control connection is live here. */
  attachedSession(token: string): RelaySession | undefined;
}

export type UpgradeTarget =
  | {
      readonly kind: 'control';
      readonly route: RouteRuntime;
      /** Base URL of the edge's endpoints for this connection (validated authority). */
      readonly base: string;
      readonly budget: AgentBudget;
      /** An approver's own credential, presented upstream in place of the edge's (AWP-APR-005). */
      readonly approverCredential: string | undefined;
    }
  | {
      readonly kind: 'observer-stream';
      readonly route: RouteRuntime;
      readonly hub: ChannelHub;
      readonly session: ObserverShell;
    }
  | {
      readonly kind: 'relay-stream';
      readonly route: RouteRuntime;
      readonly session: RelaySession;
      readonly endpoint: StreamEndpoint & { readonly url: string };
    };

/** A refused upgrade: an HTTP answer whose body never echoes the URL, with a bounded reason. */
export interface Refusal {
  readonly accept: false;
  readonly status: number;
  readonly body: string;
  readonly reason: string;
  readonly route: string;
}

export type UpgradeDecision = { readonly accept: true; readonly target: UpgradeTarget } | Refusal;

const NO_LIVE_SESSION = 'the token names no session with a live control connection here';

export function decideUpgrade(req: UpgradeFacts, state: DecisionState): UpgradeDecision {
  const url = urlRefusal(req, state);
  if (url !== undefined) return meantFor(url, req.path, state.routes);
  if (!req.protocols.includes('awp'))
    return meantFor(refuse(400, 'no_subprotocol', 'offer the subprotocol "awp"'), req.path, state.routes);
  if (state.draining) {
    const r = refuse(503, 'draining', 'this edge is draining; reconnect to another replica');
    return meantFor(r, req.path, state.routes);
  }
  const host = req.header('host') ?? req.header(':authority'); // HTTP/2 CONNECT: :authority
  const authority = host === undefined ? state.fallbackAuthority : parseAuthority(host);
  if (authority === undefined && state.publicUrl === undefined) {
    // The Host names the edge in the endpoints it hands out: only a valid authority may (set public_url).
    const r = refuse(400, 'bad_host', 'the Host header is not a valid host[:port]');
    return meantFor(r, req.path, state.routes);
  }
  const credential = bearerCredential(req.header('authorization'), req.protocols);
  for (const route of state.routes) {
    const control = req.path === route.config.path;
    const index = control ? undefined : route.worldEndpointIndex(req.path);
    if (!control && index === undefined) continue;
    const origin = req.header('origin');
    if (origin !== undefined && !originAllowed(origin, route.config.allowed_origins, host, state.publicUrl)) {
      return refuse(403, 'origin_not_allowed', 'this Origin may not connect to this route', route);
    }
    if (index !== undefined) return decideStream(route, index, credential, state);
    if (req.binding !== 'ws') return refuse(404, 'no_route', 'control connections are WebSocket only', route);
    const base = state.publicUrl ?? `${state.scheme}://${authority!}`;
    return decideControl(route, credential, base, state);
  }
  return refuse(404, 'no_route', 'no world is routed at this path');
}

function decideControl(
  route: RouteRuntime,
  credential: string | undefined,
  base: string,
  state: DecisionState,
): UpgradeDecision {
  const digest = credential === undefined ? undefined : credentialDigest(credential);
  const approver = digest !== undefined && digestAccepted(digest, route.config.approver_tokens);
  if (digest === undefined) {
    if (!route.config.allow_anonymous)
      return refuse(401, 'missing_credential', 'missing bearer credential', route);
  } else if (!approver && !digestAccepted(digest, route.config.agent_tokens)) {
    return refuse(401, 'invalid_credential', 'invalid bearer credential', route);
  }
  const budget = state.budgets.for(digest);
  if (!budget.openConnection()) {
    return refuse(
      429,
      'budget_connections',
      'this credential holds as many connections as its budget allows',
      route,
    );
  }
  return {
    accept: true,
    target: { kind: 'control', route, base, budget, approverCredential: approver ? credential : undefined },
  };
}

/** A stream connection: its credential is the session token the edge minted (AWP-TRN-013). */
function decideStream(
  route: RouteRuntime,
  index: number,
  token: string | undefined,
  state: DecisionState,
): UpgradeDecision {
  if (token === undefined) return refuse(401, 'stream_unauthorized', 'missing session token', route);
  const observer = route.observer(token);
  if (observer !== undefined) {
    if (index !== 0) return refuse(404, 'no_route', 'no such stream endpoint', route);
    if (!observer.session.attached) return refuse(401, 'stream_unauthorized', NO_LIVE_SESSION, route);
    return { accept: true, target: { kind: 'observer-stream', route, ...observer } };
  }
  const session = state.attachedSession(token);
  if (session === undefined || session.record.route !== route.name) {
    return refuse(401, 'stream_unauthorized', NO_LIVE_SESSION, route);
  }
  const endpoint = session.upstreamEndpoints[index];
  if (endpoint?.binding !== 'ws' || typeof endpoint.url !== 'string')
    return refuse(404, 'no_route', 'no such stream endpoint', route);
  if (session.attachment?.admitStream() === false) {
    // Each stream connection dials the world: one replaced in a loop is charged like messages.
    return refuse(
      429,
      'budget_messages_per_second',
      "the session's credential has spent its message budget",
      route,
    );
  }
  return {
    accept: true,
    target: { kind: 'relay-stream', route, session, endpoint: { ...endpoint, url: endpoint.url } },
  };
}

/**
 * The longest URL (path and query together) and the most segments and parameters the edge reads. Its
 * own paths are a few short segments; each segment of a longer one would be checked against every
 * credential the edge knows (below), and logged, before anything else about the request is known.
 */
export const MAX_URL_CHARS = 2048;
export const MAX_URL_SEGMENTS = 64;

/** Segments and query parameters a log line shows of a URL (the rest are counted). */
const LOGGED_URL_PARTS = 16;

/**
 * AWP-SEC-006: no credential in a URL. No endpoint of the edge takes a query, so any query is refused;
 * a URL carrying a credential the edge knows (in the query or any path segment), or a query parameter
 * named like one (`token`, `api_key`, ...), is refused as such.
 */
function urlRefusal(req: UpgradeFacts, state: DecisionState): Refusal | undefined {
  const tooLong = refuse(
    414,
    'url_too_long',
    `URLs of more than ${MAX_URL_CHARS} characters or ${MAX_URL_SEGMENTS} segments are refused`,
  );
  if (req.path.length + req.query.length > MAX_URL_CHARS) return tooLong;
  const parts = [...pathSegments(req.path)];
  if (req.query !== '') for (const [k, v] of new URLSearchParams(req.query)) parts.push(k, v);
  if (parts.length > MAX_URL_SEGMENTS) return tooLong;
  if (urlCarriesCredential(req.query) || parts.some((p) => p !== '' && state.isCredential(p))) {
    return refuse(
      400,
      'credential_in_url',
      'credentials must not appear in URLs (AWP-SEC-006): use the Authorization header or the awp.bearer.<token> subprotocol',
    );
  }
  if (req.query !== '') return refuse(400, 'query_not_allowed', 'this endpoint takes no query string');
  return undefined;
}

/** The path's segments and their parameters (`/a;token=x` is `a`, `token`, `x`), percent-decoded. */
function pathSegments(path: string): string[] {
  return path.split(/[/;,=&]/).map((s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s; // malformed escapes: compare as sent
    }
  });
}

/**
 * A URL as logs may show it: each path segment and parameter value redacted (the path may hold secrets),
 * at most LOGGED_URL_PARTS of each, then how many more there were.
 */
export function redactedUrl(path: string, query: string): string {
  const more = (n: number): string[] => (n > LOGGED_URL_PARTS ? [`(+${n - LOGGED_URL_PARTS})`] : []);
  const segments = path.split('/');
  const p = [
    ...segments.slice(0, LOGGED_URL_PARTS).map((s) => (s === '' ? s : redact(s))),
    ...more(segments.length),
  ];
  if (query === '') return p.join('/');
  const params = [...new URLSearchParams(query)];
  const q = [
    ...params.slice(0, LOGGED_URL_PARTS).map(([k, v]) => `${redact(k)}=${redact(v)}`),
    ...more(params.length),
  ];
  return `${p.join('/')}?${q.join('&')}`;
}

/**
 * A refusal decided before routing, attributed to the route its path names (control path or stream
 * endpoint): the label is only ever a configured route's name, never anything from the request.
 */
function meantFor(r: Refusal, path: string, routes: readonly RouteRuntime[]): Refusal {
  for (const route of routes) {
    if (path === route.config.path || route.worldEndpointIndex(path) !== undefined)
      return { ...r, route: route.name };
  }
  return r;
}

function refuse(status: number, reason: string, body: string, route?: RouteRuntime): Refusal {
  return { accept: false, status, body: `${body}\n`, reason, route: route?.name ?? 'none' };
}
