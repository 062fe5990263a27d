/** An observer's stream connection, served by its hub: frames only, from the edge to the observer. */
import { WsStreamSink } from '../fanout/ws-stream-sink.js';
import { peekFrame } from '../protocol/frame.js';
import { FrameMetrics } from '../telemetry/frame-metrics.js';
import { guarded } from '../transport/contain.js';
import type { ConnectionHandlers, ServerConnection } from '../transport/engine.js';
import type { EdgeContext } from './context.js';
import type { UpgradeTarget } from './upgrade-decision.js';

export function observerStream(
  ctx: EdgeContext,
  target: Extract<UpgradeTarget, { kind: 'observer-stream' }>,
  conn: ServerConnection,
): ConnectionHandlers {
  const { route, hub, session } = target;
  const t = ctx.config.transport;
  const metrics = ctx.metrics;
  metrics.agentCensus.open(conn, route.name, 'stream');
  const frames = FrameMetrics.for(metrics, route.name, 'ws', 'world_to_agent', ctx.now);
  const sink = new WsStreamSink(conn, t.high_water_bytes, t.max_queued_bytes, frames);
  hub.attachStream(session, sink);
  // A drain that throws is contained to this connection, as its own handlers are (transport/contain.ts).
  const drains = ctx.streamDrains;
  const drainee = {
    drain: () =>
      guarded(
        'stream_drain',
        ctx.fault,
        () => sink.drain(),
        () => conn.close(1011, 'internal error'),
      ),
  };
  return {
    message: (data, binary) => {
      // Observers have no command channels; anything but a valid frame is malformed (AWP-TRN-013).
      if (!binary || !isFrame(data as Buffer)) conn.close(1002, 'AWP_MALFORMED');
    },
    drain: () => drains.request(drainee),
    close: () => {
      drains.forget(drainee);
      metrics.agentCensus.close(conn, route.name, 'stream');
      hub.streamLost(session, sink);
    },
  };
}

function isFrame(buf: Buffer): boolean {
  try {
    peekFrame(buf);
    return true;
  } catch {
    return false;
  }
}
