/** An observer's stream connection, served by its hub: frames only, from the edge to the observer. */
import { WsStreamSink } from '../fanout/ws-stream-sink.js';
import { closeFor } from '../policy/budgets.js';
import { peekFrame } from '../protocol/frame.js';
import { FrameMetrics } from '../telemetry/frame-metrics.js';
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
  return {
    message: (data, binary) => {
      // Observers have no command channels; anything but a valid frame is malformed (AWP-TRN-013).
      if (!binary || !isFrame(data as Buffer)) return conn.close(1002, 'AWP_MALFORMED');
      // A valid one goes nowhere, but it is the credential's traffic all the same.
      const over = session.budget?.message((data as Buffer).length) ?? null;
      if (over !== null) {
        metrics.rejections.labels(route.name, `budget_${over}`).inc();
        const { code, reason } = closeFor(over);
        conn.close(code, reason);
      }
    },
    drain: () => sink.drain(),
    close: () => {
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
