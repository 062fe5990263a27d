/**
 * The validated configuration the edge runs on. The file's shape, ranges and defaults are declared once in
 * edge-schema.ts; these are the loaded forms (addresses parsed, credentials read, certificates loaded).
 */
import type {
  EdgeFile,
  RouteFile,
  TimingFile,
  TransportFile,
  DrainFile,
  MetricsFile,
  ViewerFile,
  CredentialFilesFile,
} from './edge-schema.js';
import type { ListenAddress } from './address.js';
import type { TlsConfig } from './certificates.js';
import type { RecordConfig } from './record.js';

export type { ListenAddress } from './address.js';
export type { TlsConfig } from './certificates.js';
export type { BudgetConfig } from '../policy/budgets.js';
import type { BudgetConfig } from '../policy/budgets.js';

export interface RouteConfig {
  /** A short name for logs and metric labels. */
  readonly name: string;
  /** The path agents connect to, e.g. `/` or `/worlds/arm`. */
  readonly path: string;
  /** The world's control endpoint (ws:// or wss://); never carries a credential. */
  readonly upstream: string;
  /** The edge's credential toward the world (agents never see it). */
  readonly upstream_token?: string | undefined;
  /** Credentials accepted from agents on this route. */
  readonly agent_tokens: readonly string[];
  /** Accept agents without a credential (only allowed when listening on loopback, with allowed_origins). */
  readonly allow_anonymous: boolean;
  /** Observer sessions: served by the edge from one upstream session ('fanout'), or relayed one to one. */
  readonly observers: RouteFile['observers'];
  /** How long an observer hub keeps its upstream session after the last observer left. */
  readonly hub_linger_ms: number;
  /**
   * Approver credentials (AWP-APR-005): a connection presenting one is relayed with that same
   * credential upstream, so the world authorises the approver itself, never the edge's credential.
   */
  readonly approver_tokens: readonly string[];
  /**
   * Origins a browser upgrade may come from, normalised (`scheme://host[:port]`, lower case, default port
   * dropped), or "*". Empty: only same-origin browser upgrades. Requests without `Origin` are unaffected.
   */
  readonly allowed_origins: readonly string[];
  /** The flight recorder (issue 14): this route's sessions recorded as AWP audit-log files; absent: off. */
  readonly record?: RecordConfig | undefined;
}

export type TimingConfig = Readonly<TimingFile>;
export type TransportConfig = Readonly<TransportFile>;
export type DrainConfig = Readonly<DrainFile>;
export type MetricsConfig = Readonly<MetricsFile>;
/** The live viewer page on the agent listener (`enabled` defaults to false). */
export type ViewerConfig = Readonly<ViewerFile>;
/** Re-reading credential files while the edge runs: on SIGHUP, and on change unless `watch` is false. */
export type CredentialFilesConfig = Readonly<CredentialFilesFile>;

export type StoreConfig =
  { readonly kind: 'memory' } | { readonly kind: 'redis'; readonly url: string; readonly key_prefix: string };

/** The WebTransport listener (HTTP/3 where the native transport is installed, HTTP/2 otherwise). */
export interface WebTransportConfig extends TlsConfig {
  readonly listen: ListenAddress;
}

export interface EdgeConfig {
  readonly listen: ListenAddress;
  readonly admin: ListenAddress;
  /** Observers' stream connections on a listener of their own, served by a worker thread. */
  readonly stream_listen?: ListenAddress | undefined;
  /** Base URL agents reach the edge at (for stream endpoints); default: from the request's Host header. */
  readonly public_url?: string | undefined;
  /** Base URL agents reach the stream listener at; default: public_url's (or the Host's) host, its port. */
  readonly stream_public_url?: string | undefined;
  /** Added to the process's niceness for the stream listener's worker thread (0: the same). */
  readonly stream_worker_nice: number;
  readonly engine: EdgeFile['engine'];
  readonly log_level: EdgeFile['log_level'];
  readonly routes: readonly RouteConfig[];
  readonly timing: TimingConfig;
  readonly transport: TransportConfig;
  readonly store: StoreConfig;
  readonly drain: DrainConfig;
  /** TLS on the agent-facing listener (wss://); absent: plaintext, for loopback or behind a TLS proxy. */
  readonly tls?: TlsConfig | undefined;
  /** The `webtransport` stream endpoints; none are offered when absent. */
  readonly webtransport?: WebTransportConfig | undefined;
  /** Operator budgets, per agent credential. */
  readonly budgets: BudgetConfig;
  readonly viewer: ViewerConfig;
  /** /metrics options; absent: the defaults (process metrics under their standard names). */
  readonly metrics?: MetricsConfig | undefined;
  /** Reloading credentials from their files; absent: the defaults (watch, 1 s debounce). */
  readonly credential_files?: CredentialFilesConfig | undefined;
  /**
   * The files credentials were read from (`*_file`: agent, approver and upstream credentials, the store
   * URL), as named; absent or empty: none (credentials from the environment or literal values only).
   */
  readonly secret_files?: readonly string[] | undefined;
}
