/**
 * The edge's `webtransport` stream endpoints (configured with the top-level `webtransport` section):
 * `https://HOST:PORT<route>/stream[/<n>]`, the same paths as the `ws` ones. A session request is
 * authenticated like a `ws` stream connection: the session token as bearer credential, subprotocol
 * `awp`, and the token must name a session with a live control connection on that route
 * (AWP-TRN-013). Observer sessions are served by the route's hub; a relay agent's session is relayed
 * to the world's `ws` stream endpoint of the same index.
 */
import { FrameSkipper, IncomingFrames } from '../transport/webtransport-framing.js';
import { WebTransportStreamSink } from '../fanout/webtransport-sink.js';
import type { ChannelHub } from '../fanout/channel-hub.js';
import type { ObserverShell } from '../fanout/observer-shell.js';
import { FrameError, peekFrame } from '../protocol/frame.js';
import { FrameMetrics } from '../telemetry/frame-metrics.js';
import { DialError } from '../transport/upstream.js';
import {
  listenWebTransport,
  readIncomingStreams,
  type WebTransportDecision,
  type WebTransportListener,
  type WebTransportRequest,
  type WebTransportSession,
} from '../transport/webtransport.js';
import type { EdgeContext } from './context.js';
import type { RouteRuntime } from './route.js';
import { WebTransportRelay } from '../relay/io/webtransport-relay.js';
import { decideUpgrade, type DecisionState, type Refusal } from './upgrade-decision.js';

/** AWP-TRN-011: an endpoint without `max_frame_bytes` carries frames up to 16 MiB. */
const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;

/** What the endpoint needs of the edge: the shared upgrade decision's inputs, and refusal accounting. */
export interface WebTransportEdge {
  decisionState(): DecisionState;
  refused(r: Refusal, path: string, query: string, binding: string): void;
}

/** Starts the listener and adds its endpoints to every route's `stream_endpoints`; undefined when not configured. */
export async function startWebTransportEndpoint(
  ctx: EdgeContext,
  routes: readonly RouteRuntime[],
  edge: WebTransportEdge,
): Promise<WebTransportListener | undefined> {
  const wt = ctx.config.webtransport;
  if (wt === undefined) return undefined;
  const listener = await listenWebTransport({
    host: wt.listen.host,
    port: wt.listen.port,
    cert: wt.cert,
    key: wt.key,
    decide: async (req) => {
      const d = await decide(ctx, edge.decisionState(), req);
      if (!d.accept) edge.refused(d, req.path, req.query, 'webtransport');
      return d.accept ? d : { accept: false, status: d.status, reason: d.body.trimEnd() };
    },
    log: (fields, message) => ctx.log.warn(fields, message),
    handshake: {
      timeoutMs: ctx.config.transport.handshake_timeout_ms,
      maxPending: ctx.config.transport.max_pending_handshakes,
      maxPendingPerAddress: ctx.config.transport.max_pending_handshakes_per_address,
    },
    onHandshakeClosed: (reason) => ctx.metrics.handshakesClosed.labels('webtransport', reason).inc(),
  });
  for (const r of routes) r.enableWebTransport(listener.port);
  ctx.log.info(
    {
      event: 'webtransport_listening',
      listen: `${wt.listen.host}:${listener.port}`,
      transports: listener.transports,
    },
    'webtransport stream endpoints enabled',
  );
  return listener;
}

type Accepted = Extract<WebTransportDecision, { accept: true }>;

async function decide(
  ctx: EdgeContext,
  state: DecisionState,
  req: WebTransportRequest,
): Promise<Accepted | Refusal> {
  const d = decideUpgrade({ binding: 'webtransport', ...req, header: (n) => req.header(n) }, state);
  if (!d.accept) return d;
  const target = d.target;
  if (target.kind === 'observer-stream') return observerStream(ctx, target.route, target.hub, target.session);
  if (target.kind !== 'relay-stream') throw new Error('unreachable: control targets are WebSocket only');
  const { route, session, endpoint } = target;
  const maxFrame = Math.min(
    endpoint.max_frame_bytes ?? DEFAULT_MAX_FRAME_BYTES,
    ctx.config.transport.max_message_bytes,
  );
  let relay: WebTransportRelay;
  try {
    relay = await WebTransportRelay.open(ctx, session, endpoint.url, maxFrame);
  } catch (err) {
    const detail = err instanceof DialError ? err.message : String(err);
    ctx.log.info({ event: 'stream_unavailable', route: route.name, detail });
    return {
      accept: false,
      status: 502,
      body: "the world's stream endpoint is unavailable\n",
      reason: 'stream_unavailable',
      route: route.name,
    };
  }
  return {
    accept: true,
    open: (wt) => {
      counted(ctx, route, wt);
      relay.attach(wt);
    },
    abandon: () => relay.abandon(),
  };
}

/** An observer's session, served by its hub: frames only, one stream per channel. */
function observerStream(
  ctx: EdgeContext,
  route: RouteRuntime,
  hub: ChannelHub,
  session: ObserverShell,
): Accepted {
  const t = ctx.config.transport;
  return {
    accept: true,
    open: (wt) => {
      counted(ctx, route, wt);
      const frames = FrameMetrics.for(ctx.metrics, route.name, 'webtransport', 'world_to_agent', ctx.now);
      const sink = new WebTransportStreamSink(wt, t.high_water_bytes, t.max_queued_bytes, frames);
      wt.closed.then(
        () => hub.streamLost(session, sink),
        () => hub.streamLost(session, sink),
      );
      hub.attachStream(session, sink);
      // Observers have no command channels: frames they send are checked and dropped, anything else is
      // malformed (AWP-TRN-013), like on their `ws` stream connection. What is held for unfinished frame
      // headers is bounded across the session's streams.
      const incoming = new IncomingFrames(() => new FrameSkipper(t.max_message_bytes), t.max_queued_bytes);
      const malformed = () => sink.close(1002, 'AWP_MALFORMED');
      const refuse = (err: unknown) => {
        if (err instanceof FrameError) return malformed();
        sink.close(1009, 'frame exceeds max_frame_bytes');
      };
      readIncomingStreams(wt, {
        chunk: (stream, data) => {
          try {
            incoming.push(stream, data);
          } catch (err) {
            refuse(err);
          }
        },
        end: (stream, finished) => {
          try {
            incoming.end(stream, finished);
          } catch (err) {
            refuse(err);
          }
        },
        datagram: (data) => {
          try {
            peekFrame(data);
          } catch {
            malformed();
          }
        },
      });
    },
  };
}

/** The stream connection gauge, as for `ws` stream connections. */
function counted(ctx: EdgeContext, route: RouteRuntime, wt: WebTransportSession): void {
  const census = ctx.metrics.agentCensus;
  census.open(wt, route.name, 'stream');
  const gone = () => census.close(wt, route.name, 'stream');
  wt.closed.then(gone, gone);
}
