import type { EdgeConfig } from '../config/schema.js';
import type { Logger } from '../telemetry/logger.js';
import type { EdgeMetrics } from '../telemetry/metrics.js';
import type { SessionRegistry } from '../relay/io/session-registry.js';
import type { ChannelHub } from '../fanout/channel-hub.js';
import type { CredentialBudgets } from '../policy/budgets.js';
import type { RouteRuntime } from './route.js';
import type { FaultReporter } from '../transport/contain.js';
import type { RouteRecorder } from '../recorder/io/route-recorder.js';
import type { FrameHeader } from '../protocol/frame.js';
import type { RelaySession } from '../relay/relay-session.js';

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
  /** Reports a contained fault: a log line and awp_edge_internal_errors_total{where}. */
  readonly fault: FaultReporter;
  /** The flight recorders of the routes that record (issue 14), by route name. */
  readonly recorders: ReadonlyMap<string, RouteRecorder>;
  /** A frame on a relay agent's stream connection, for its session's recording (relay/io/stream-bridge.ts). */
  readonly recordFrame: (
    session: RelaySession,
    from: 'agent' | 'world',
    buf: Uint8Array,
    h: FrameHeader,
    binding: string,
  ) => void;
  /** Live agent control connections (for drain and leak checks). */
  readonly connections: Set<{
    terminate(code: number, reason: string): void;
    /** Drain with a shared store: an observer session is stored, then its connection closed (1001). */
    moveOut(): Promise<void> | undefined;
  }>;
}
