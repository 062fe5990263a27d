/** What an observer hub needs from the edge around it (its context), for one route. */
import type { EdgeConfig } from '../config/schema.js';
import type { HubContext } from '../fanout/channel-hub.js';
import type { SliceLoop } from '../transport/slice-loop.js';
import type { TokenMint } from '../session/tokens.js';
import { FrameMetrics } from '../telemetry/frame-metrics.js';
import type { Logger } from '../telemetry/logger.js';
import type { EdgeMetrics } from '../telemetry/metrics.js';
import { redact } from '../telemetry/redact.js';
import type { FaultReporter } from '../transport/contain.js';
import type { RouteRuntime } from './route.js';

export function hubContext(
  config: EdgeConfig,
  route: RouteRuntime,
  mint: TokenMint,
  metrics: EdgeMetrics,
  log: Logger,
  now: () => number,
  fault: FaultReporter,
  slices: SliceLoop,
): Omit<HubContext, 'retired'> {
  // Observers' inline frames: forward latency is measured to their control connections.
  const frames = FrameMetrics.for(metrics, route.name, 'inline', 'world_to_agent', now);
  return {
    route: route.name,
    upstreamUrl: route.config.upstream,
    // Read at each dial: a reload may have rotated it (a hub's open connection keeps the one it dialled with).
    get upstreamToken() {
      return route.config.upstream_token;
    },
    connectTimeoutMs: config.timing.upstream_connect_timeout_ms,
    maxMessageBytes: config.transport.max_message_bytes,
    pingIntervalMs: config.timing.hop_ping_interval_ms,
    highWaterBytes: config.transport.high_water_bytes,
    maxQueuedBytes: config.transport.max_queued_bytes,
    maxJsonDepth: config.transport.max_json_depth,
    lingerMs: route.config.hub_linger_ms,
    now,
    mintToken: () => mint.mint(),
    endpoints: (base) => route.observerEndpoints(base),
    frames,
    upstream: (kind, handle, live) =>
      live
        ? metrics.upstreamCensus.open(handle, route.name, kind)
        : metrics.upstreamCensus.close(handle, route.name, kind),
    upstreamFailed: (kind) => metrics.upstreamFailures.labels(route.name, kind, 'unreachable').inc(),
    rejected: (reason) => metrics.rejections.labels(route.name, reason).inc(),
    noteSession: (event, session, detail) => {
      log.info({
        route: route.name,
        event: `observer_${event}`,
        session_id: session.session_id,
        token: redact(session.token),
        ...(detail !== undefined ? { reason: detail } : {}),
      });
    },
    log: (level, fields, message) => log[level](fields, message),
    fault,
    slices,
  };
}
