import type { Logger } from '../../telemetry/logger.js';
import type { EdgeMetrics } from '../../telemetry/metrics.js';
import type { FaultReporter } from '../../transport/contain.js';
import type { SessionRegistry } from './session-registry.js';
import type { FrameHeader } from '../../protocol/frame.js';
import type { RelaySession } from '../relay-session.js';

/**
 * What a relay agent's stream connection needs of the edge (the edge's own context, edge/context.ts, is
 * one). Declared by shape here, so relay imports neither the edge nor the configuration's types.
 */
export interface StreamContext {
  readonly config: {
    readonly transport: {
      readonly high_water_bytes: number;
      readonly max_queued_bytes: number;
      readonly max_message_bytes: number;
    };
    readonly timing: {
      readonly upstream_connect_timeout_ms: number;
      readonly hop_ping_interval_ms: number;
    };
  };
  readonly log: Logger;
  readonly metrics: EdgeMetrics;
  readonly registry: SessionRegistry;
  /** Monotonic milliseconds. */
  readonly now: () => number;
  /** Reports a contained fault. */
  readonly fault: FaultReporter;
  /** Each valid frame, as it arrived, for the session's recording if it is recorded (issue 14). */
  readonly recordFrame?: (
    session: RelaySession,
    from: 'agent' | 'world',
    buf: Uint8Array,
    h: FrameHeader,
    binding: string,
  ) => void;
}
