import type { EdgeConfig } from '../config/schema.js';
import type { Logger } from '../telemetry/logger.js';
import type { EdgeMetrics } from '../telemetry/metrics.js';
import type { SessionRegistry } from './session-registry.js';
import type { ChannelHub } from '../fanout/channel-hub.js';
import type { CredentialBudgets } from '../policy/budgets.js';
import type { RouteRuntime } from './route.js';

/** What every connection of the edge shares. */
export interface EdgeContext {
  readonly config: EdgeConfig;
  readonly log: Logger;
  readonly metrics: EdgeMetrics;
  readonly registry: SessionRegistry;
  readonly budgets: CredentialBudgets;
  /** Monotonic milliseconds (for round-trip times and budgets). */
  readonly now: () => number;
  /** The observer hub of a route and time model (started on first use). */
  hubFor(route: RouteRuntime, mode: 'streaming' | 'lockstep'): ChannelHub;
  /** Live agent control connections (for drain and leak checks). */
  readonly connections: Set<{ terminate(code: number, reason: string): void }>;
}
