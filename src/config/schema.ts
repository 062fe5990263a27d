/** The validated configuration the edge runs on (see load.ts for the file format and its checks). */

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

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
  /** Accept agents without a credential (only allowed when listening on loopback). */
  readonly allow_anonymous: boolean;
  /** Observer sessions: served by the edge from one upstream session ('fanout'), or relayed one to one. */
  readonly observers: 'fanout' | 'relay';
  /** How long an observer hub keeps its upstream session after the last observer left. */
  readonly hub_linger_ms: number;
  /**
   * Approver credentials (AWP-APR-005): a connection presenting one is relayed with that same
   * credential upstream, so the world authorises the approver itself, never the edge's credential.
   */
  readonly approver_tokens: readonly string[];
}

export interface TimingConfig {
  /** WebSocket-level ping interval on each hop; a hop silent for two intervals is lost. */
  readonly hop_ping_interval_ms: number;
  readonly upstream_connect_timeout_ms: number;
}

export interface TransportConfig {
  readonly max_message_bytes: number;
  /** Write to a socket while the engine holds fewer bytes than this. */
  readonly high_water_bytes: number;
  /** Control messages and reliable frames queued for one peer beyond this close its connection. */
  readonly max_queued_bytes: number;
}

export type StoreConfig =
  { readonly kind: 'memory' } | { readonly kind: 'redis'; readonly url: string; readonly key_prefix: string };

export interface DrainConfig {
  /** On SIGTERM, agents are closed (1001) spread over this window with full jitter, then the process exits. */
  readonly window_ms: number;
}

/** The WebTransport listener (HTTP/3 where the native transport is installed, HTTP/2 otherwise). */
/** A certificate and its key: the file names, and their PEM contents read when the config was loaded. */
export interface TlsConfig {
  readonly cert_file: string;
  readonly key_file: string;
  readonly cert: string;
  readonly key: string;
}

export interface WebTransportConfig extends TlsConfig {
  readonly listen: ListenAddress;
}

export type { BudgetConfig } from '../policy/budgets.js';
import type { BudgetConfig } from '../policy/budgets.js';

export const DEFAULT_BUDGETS: BudgetConfig = {
  max_connections: 64,
  max_sessions: 32,
  max_messages_per_second: 2_000,
  max_bytes_per_second: 64 * 1024 * 1024,
  max_message_bytes: 32 * 1024 * 1024,
};

export interface EdgeConfig {
  readonly listen: ListenAddress;
  readonly admin: ListenAddress;
  /** Base URL agents reach the edge at (for stream endpoints); default: from the request's Host header. */
  readonly public_url?: string | undefined;
  readonly engine: 'auto' | 'uws' | 'ws';
  readonly log_level: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
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
}

export const DEFAULT_TIMING: TimingConfig = {
  hop_ping_interval_ms: 5_000,
  upstream_connect_timeout_ms: 5_000,
};

export const DEFAULT_TRANSPORT: TransportConfig = {
  max_message_bytes: 32 * 1024 * 1024,
  high_water_bytes: 256 * 1024,
  max_queued_bytes: 16 * 1024 * 1024,
};
