/**
 * The shape of `edge.yaml`, declared once as a JSON Schema (draft-07): types, ranges, defaults and a
 * description for every key. The loader validates with it (ajv), the file types below are derived from it,
 * and `edge.schema.json` is this object written out for editors (yaml-language-server).
 *
 * Annotations of our own, ignored by editors:
 * - `x-expected`: what the key expects, for messages (`<key>: expected <...>, got <what>`), when the
 *   generic wording (a non-empty string, an integer from A to B, ...) is not precise enough;
 * - `x-missing`: the message when a required key is absent;
 * - `x-secret`: the value is a credential: messages name its type, never its value.
 *
 * What a schema cannot say (credentials from the environment or files, certificate pairs, anonymous only on
 * loopback, origins with anonymous agents, duplicate routes, credentials in URLs) is checked in semantic.ts.
 */
import type { FromSchema } from 'json-schema-to-ts';
import { RECORD } from './record-schema.js';

const ADDRESS_EXPECTED = 'expected HOST:PORT (e.g. 127.0.0.1:8720)';
/** HOST:PORT with a DNS name, IPv4 or [IPv6] host and a port from 0 to 65535. */
const ADDRESS_PATTERN =
  '^(\\[[0-9a-fA-F:]+\\]|[A-Za-z0-9.-]+):([0-9]{1,4}|[0-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])$';

const address = (description: string) =>
  ({ type: 'string', pattern: ADDRESS_PATTERN, description, 'x-expected': ADDRESS_EXPECTED }) as const;

const nonEmpty = (description: string) => ({ type: 'string', minLength: 1, description }) as const;

const secret = (description: string) =>
  ({ type: 'string', minLength: 1, description, 'x-secret': true }) as const;

const int = (minimum: number, maximum: number, dflt: number, description: string) =>
  ({ type: 'integer', minimum, maximum, default: dflt, description }) as const;

/** A list of credentials, given literally, by environment variable or by file (one way only). */
const credentialList = {
  tokens: {
    type: 'array',
    items: { type: 'string', minLength: 1 },
    description: 'Credentials, literally (prefer tokens_env or tokens_file: a config file is rarely secret).',
    'x-expected': 'expected a list of non-empty strings',
    'x-secret': true,
  },
  tokens_env: nonEmpty('An environment variable holding the credentials, comma- or newline-separated.'),
  tokens_file: nonEmpty('A file holding the credentials, comma- or newline-separated.'),
} as const;

const AGENTS = {
  type: 'object',
  description:
    'Who may connect: agent credentials, presented as "Authorization: Bearer <token>" or the subprotocol "awp.bearer.<token>".',
  additionalProperties: false,
  properties: {
    ...credentialList,
    allow_anonymous: {
      type: 'boolean',
      description:
        'Accept agents without a credential (default false). Only when listening on loopback, and only with a non-empty allowed_origins without "*".',
    },
  },
} as const;

const APPROVERS = {
  type: 'object',
  description:
    'Approver credentials (AWP-APR-005): an approver connection is relayed with its own credential, so the world authorises the approver, never the edge.',
  additionalProperties: false,
  properties: credentialList,
} as const;

const ORIGIN_EXPECTED = 'expected "*" or an origin http(s)://HOST[:PORT] without a path';
/** "*" or http(s)://host[:port][/], either case; port range and IPv6 are settled by the loader. */
const ORIGIN_PATTERN =
  '^(\\*|[hH][tT][tT][pP][sS]?://(\\[[0-9a-fA-F:.]+\\]|[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*)(:[0-9]{1,5})?/?)$';

const ROUTE = {
  type: 'object',
  description: 'One world behind the edge.',
  additionalProperties: false,
  required: ['upstream'],
  properties: {
    name: {
      type: 'string',
      pattern: '^[A-Za-z_][A-Za-z0-9_.:-]*$',
      description: 'A label for logs and metrics; default: the path without slashes ("default" for /).',
      'x-expected': 'expected an identifier (letters, digits, _ . : -)',
    },
    path: {
      type: 'string',
      pattern: '^/([^?#]*[^/?#])?$',
      default: '/',
      description: 'Where agents connect, e.g. /worlds/arm; stream connections are served at <path>/stream.',
      'x-expected': 'expected an absolute path like /worlds/arm (no trailing slash, query or fragment)',
    },
    upstream: {
      type: 'string',
      pattern: '^[wW][sS][sS]?://',
      description: "The world's control endpoint, ws:// or wss://, never with a credential in it.",
      'x-expected': 'expected a ws:// or wss:// URL',
      'x-missing': "required: the world's ws:// or wss:// URL",
    },
    upstream_token: secret("The edge's credential toward the world, literally (prefer upstream_token_env)."),
    upstream_token_env: nonEmpty("An environment variable holding the edge's credential toward the world."),
    upstream_token_file: nonEmpty("A file holding the edge's credential toward the world."),
    agents: { ...AGENTS, description: 'Agent credentials for this route; default: the top-level agents.' },
    observers: {
      enum: ['fanout', 'relay'],
      default: 'fanout',
      description:
        'Observer sessions: fanout serves them all from one upstream session; relay gives each its own.',
    },
    hub_linger_ms: int(
      0,
      3_600_000,
      5_000,
      'How long the shared observer session outlives the last observer, in milliseconds.',
    ),
    approvers: APPROVERS,
    allowed_origins: {
      type: 'array',
      items: { type: 'string', pattern: ORIGIN_PATTERN, 'x-expected': ORIGIN_EXPECTED },
      default: [],
      description:
        'Origins a browser upgrade may come from (scheme://host[:port], or "*"); default []: same-origin only. Requests without an Origin header are unaffected.',
      'x-expected': 'expected a list of origins (e.g. [https://app.example.com])',
    },
    record: RECORD,
  },
} as const;

const TIMING = {
  type: 'object',
  description: 'Liveness on each hop.',
  additionalProperties: false,
  default: {},
  properties: {
    hop_ping_interval_ms: int(
      0,
      600_000,
      5_000,
      'WebSocket-level ping interval on each hop; a hop silent for two intervals is lost (0: no pings).',
    ),
    upstream_connect_timeout_ms: int(
      100,
      120_000,
      5_000,
      'How long dialling a world may take (for an observer hub, until the world has opened its session).',
    ),
  },
} as const;

const TRANSPORT = {
  type: 'object',
  description: 'Sizes and limits of the agent-facing connections.',
  additionalProperties: false,
  default: {},
  properties: {
    max_message_bytes: int(1024, 2 ** 30, 32 * 1024 * 1024, 'Larger messages close the connection (1009).'),
    high_water_bytes: int(
      1024,
      2 ** 30,
      256 * 1024,
      'Write to a socket while the engine holds fewer bytes than this.',
    ),
    max_queued_bytes: int(
      65_536,
      2 ** 31,
      16 * 1024 * 1024,
      'Control messages and reliable frames queued for one peer beyond this close its connection.',
    ),
    max_json_depth: int(
      8,
      1024,
      64,
      'A control message nested deeper than this is refused before anything walks it.',
    ),
    handshake_timeout_ms: int(
      100,
      600_000,
      10_000,
      'A socket that has not completed its upgrade this long after connecting is closed.',
    ),
    max_pending_handshakes: int(
      1,
      1_000_000,
      1024,
      'Sockets not yet upgraded, per listener; beyond this, new ones are closed at once.',
    ),
    max_pending_handshakes_per_address: int(
      1,
      1_000_000,
      64,
      'Sockets not yet upgraded, per remote address and listener.',
    ),
  },
} as const;

const STORE = {
  type: 'object',
  description: "Where relay sessions live between an agent's connections.",
  additionalProperties: false,
  default: {},
  properties: {
    kind: {
      enum: ['memory', 'redis'],
      default: 'memory',
      description: 'memory: in this process; redis: shared, so any replica can resume a session.',
    },
    url: secret(
      'redis only: the redis:// or rediss:// URL, literally (it may carry a password: prefer url_env).',
    ),
    url_env: nonEmpty('redis only: an environment variable holding the URL (e.g. AWP_EDGE_REDIS_URL).'),
    url_file: nonEmpty('redis only: a file holding the URL.'),
    key_prefix: nonEmpty('redis only: prefix of every key the edge writes (default "awp-edge:").'),
  },
} as const;

const DRAIN = {
  type: 'object',
  description: 'Graceful stop.',
  additionalProperties: false,
  default: {},
  properties: {
    window_ms: int(
      0,
      600_000,
      20_000,
      'On SIGTERM, agents are closed (1001) spread over this window with full jitter, then the process exits.',
    ),
  },
} as const;

const CERTIFICATE = {
  cert_file: { ...nonEmpty('A PEM certificate (chain).'), 'x-missing': 'required: a PEM file' },
  key_file: { ...nonEmpty('The PEM private key of the certificate.'), 'x-missing': 'required: a PEM file' },
} as const;

const WEBTRANSPORT = {
  type: 'object',
  description:
    'A webtransport stream endpoint (HTTP/3 where the native transport is installed, WebTransport over HTTP/2 otherwise); none when absent.',
  additionalProperties: false,
  required: ['listen', 'cert_file', 'key_file'],
  properties: {
    listen: {
      ...address('The WebTransport listener (TCP for HTTP/2, UDP for HTTP/3).'),
      'x-missing': 'required: HOST:PORT (HTTP/2 on TCP, and HTTP/3 on UDP where available)',
    },
    ...CERTIFICATE,
  },
} as const;

const TLS = {
  type: 'object',
  description:
    'Serve wss:// on the agent-facing listener (AWP-SEC-001); absent: plaintext, for loopback or behind a TLS proxy.',
  additionalProperties: false,
  required: ['cert_file', 'key_file'],
  properties: CERTIFICATE,
} as const;

const budget = (dflt: number, description: string) => int(1, 2 ** 40, dflt, description);

const BUDGETS = {
  type: 'object',
  description: 'Operator budgets, per agent credential; exceeding one is refused in the protocol’s terms.',
  additionalProperties: false,
  default: {},
  properties: {
    // One credential may serve a whole dashboard or fleet: a session is a control connection, and often a
    // stream connection too, so connections allow two per session.
    max_connections: budget(2048, 'Connections at once (HTTP 429 before the upgrade).'),
    max_sessions: budget(1024, 'Sessions at once (-32004 AWP_EDGE_BUDGET_EXCEEDED, retryable).'),
    max_messages_per_second: budget(2_000, 'Messages per second (close 1008).'),
    max_bytes_per_second: budget(64 * 1024 * 1024, 'Bytes per second (close 1008).'),
    max_message_bytes: budget(32 * 1024 * 1024, 'Largest message (close 1009).'),
  },
} as const;

const VIEWER = {
  type: 'object',
  description:
    'The live viewer: a web page on the agent-facing listener (GET /viewer/) that watches every route as an observer session, with the credential it is given.',
  additionalProperties: false,
  default: {},
  properties: {
    enabled: {
      type: 'boolean',
      default: false,
      description:
        'Serve the viewer page and its stats (GET /viewer/, /viewer/stats.json) on the agent listener (default false; on in `awp-edge demo`).',
    },
  },
} as const;

const CREDENTIAL_FILES = {
  type: 'object',
  description:
    'Credential files (*_file keys) are re-read while the edge runs, validated as at start, and applied to new connections: on SIGHUP, and when they change unless watch is false. Open sessions keep running.',
  additionalProperties: false,
  default: {},
  properties: {
    watch: {
      type: 'boolean',
      default: true,
      description:
        'Watch the directories of the credential files and re-read them after a change (default true); follows the symlink swap of Kubernetes Secret volumes. SIGHUP re-reads them whatever this says.',
    },
    debounce_ms: int(
      0,
      60_000,
      1_000,
      'How long a watched directory must stay quiet after a change before the files are re-read.',
    ),
  },
} as const;

const METRICS = {
  type: 'object',
  description: 'The Prometheus metrics on the admin listener (/metrics).',
  additionalProperties: false,
  default: {},
  properties: {
    process_prefix: {
      type: 'string',
      pattern: '^([a-zA-Z_][a-zA-Z0-9_]*)?$',
      default: '',
      description:
        "Prefix of the default process and Node.js metrics (process_*, nodejs_*); default none, their standard names, so stock Node.js dashboards and alerts work. The edge's own metrics are always awp_edge_*.",
      'x-expected': 'expected a Prometheus metric name prefix (letters, digits, _), or ""',
    },
  },
} as const;

/** Where agents reach a listener of the edge: scheme, host and port, nothing else (no path, no query). */
const PUBLIC_URL = {
  type: 'string',
  pattern: '^[wW][sS][sS]?://[^/?#]+/?$',
  'x-expected': 'expected ws(s)://HOST[:PORT] without a path',
} as const;

export const EDGE_SCHEMA = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'awp-edge configuration (edge.yaml)',
  description:
    'Every key but routes is optional. Credentials come from the environment or files (*_env, *_file), never from the command line.',
  type: 'object',
  additionalProperties: false,
  required: ['routes'],
  properties: {
    listen: { ...address('The agent-facing listener.'), default: '127.0.0.1:8720' },
    admin: { ...address('The admin listener: /healthz, /readyz, /metrics.'), default: '127.0.0.1:9464' },
    public_url: {
      ...PUBLIC_URL,
      description:
        'How agents reach the edge (ws(s)://HOST[:PORT]), for stream endpoint URLs; default: the request’s Host header. Production sets it.',
    },
    engine: {
      enum: ['auto', 'uws', 'ws'],
      default: 'auto',
      description: 'WebSocket engine; auto: uWebSockets.js where its binary loads, else ws.',
    },
    log_level: {
      enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
      default: 'info',
      description: 'Log level.',
    },
    agents: { ...AGENTS, description: `${AGENTS.description} For every route that does not say otherwise.` },
    routes: {
      type: 'array',
      minItems: 1,
      items: ROUTE,
      description: 'The worlds behind the edge, one per path.',
      'x-expected': 'expected a list of at least one route ({name, path, upstream})',
      'x-missing': 'expected a list of at least one route ({name, path, upstream})',
    },
    timing: TIMING,
    transport: TRANSPORT,
    store: STORE,
    drain: DRAIN,
    webtransport: WEBTRANSPORT,
    stream_listen: address(
      'A listener for observers’ ws stream connections, served by a worker thread (uWebSockets.js), so fan-out writes never hold up control messages; absent: observers stream on the agent listener.',
    ),
    stream_public_url: {
      ...PUBLIC_URL,
      description:
        'How agents reach the stream listener (ws(s)://HOST[:PORT]), when a proxy maps it to another host or port; default: public_url’s host (or the request’s) and stream_listen’s port.',
    },
    stream_worker_nice: int(
      0,
      19,
      0,
      'The stream listener’s worker thread this much lower in priority than the main thread: its niceness is the process’s plus this, at most 19 (Linux only, as `nice -n`). Where the edge’s threads compete only with each other (in a container: niceness ranks a container’s own threads), the main thread then runs first when both want the CPU: control messages, relay traffic and heartbeats wait less behind frame writes, and the worker writes in what is left. Where other processes share the cores, they take CPU from the worker too. Needs stream_listen.',
    ),
    tls: TLS,
    budgets: BUDGETS,
    viewer: VIEWER,
    metrics: METRICS,
    credential_files: CREDENTIAL_FILES,
  },
} as const;

/** A config file after validation with defaults filled in. */
export type EdgeFile = FromSchema<typeof EDGE_SCHEMA>;
export type RouteFile = FromSchema<typeof ROUTE>;
export type TimingFile = FromSchema<typeof TIMING>;
export type TransportFile = FromSchema<typeof TRANSPORT>;
export type StoreFile = FromSchema<typeof STORE>;
export type DrainFile = FromSchema<typeof DRAIN>;
export type MetricsFile = FromSchema<typeof METRICS>;
export type ViewerFile = FromSchema<typeof VIEWER>;
export type CredentialFilesFile = FromSchema<typeof CREDENTIAL_FILES>;
