/**
 * The edge's `webtransport` stream endpoints (configured with the top-level `webtransport` section):
 * `https://HOST:PORT<route>/stream[/<n>]`, the same paths as the `ws` ones. A session request is
 * authenticated like a `ws` stream connection: the session token as bearer credential, subprotocol
 * `awp`, and the token must name a session with a live control connection on that route
 * (AWP-TRN-013). Observer sessions are served by the route's hub; a relay agent's session is relayed
 * to the world's `ws` stream endpoint of the same index.
 */
import { FrameSplitter } from '../transport/webtransport-framing.js';
import { WebTransportStreamSink } from '../fanout/webtransport-sink.js';
import type { ChannelHub } from '../fanout/channel-hub.js';
import type { ObserverSession } from '../fanout/observer-session.js';
import { FrameError, peekFrame } from '../protocol/frame.js';
import { FrameMetrics } from '../telemetry/frame-metrics.js';
import { bearerCredential, urlCarriesCredential } from '../transport/auth.js';
import { DialError } from '../transport/upstream.js';
import {
  AWP_PROTOCOL,
  listenWebTransport,
  readIncomingStreams,
  type WebTransportDecision,
  type WebTransportListener,
  type WebTransportRequest,
  type WebTransportSession,
} from '../transport/webtransport.js';
import type { EdgeContext } from './context.js';
import type { RouteRuntime } from './route.js';
import { WebTransportRelay } from './webtransport-relay.js';

/** AWP-TRN-011: an endpoint without `max_frame_bytes` carries frames up to 16 MiB. */
const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;

/** Starts the listener and adds its endpoints to every route's `stream_endpoints`; undefined when not configured. */
export async function startWebTransportEndpoint(
  ctx: EdgeContext,
  routes: readonly RouteRuntime[],
  draining: () => boolean,
): Promise<WebTransportListener | undefined> {
  const wt = ctx.config.webtransport;
  if (wt === undefined) return undefined;
  const listener = await listenWebTransport({
    host: wt.listen.host,
    port: wt.listen.port,
    cert: wt.cert,
    key: wt.key,
    decide: async (req) => {
      const d = await decide(ctx, routes, draining, req);
      if (!d.accept) {
        // Counted and logged as the `ws` upgrades' refusals are.
        ctx.metrics.rejections.labels(d.route, d.code).inc();
        ctx.log.info({
          event: 'connection_refused',
          binding: 'webtransport',
          route: d.route,
          reason: d.code,
          status: d.status,
          path: req.path,
        });
      }
      return d;
    },
    log: (fields, message) => ctx.log.warn(fields, message),
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

async function decide(
  ctx: EdgeContext,
  routes: readonly RouteRuntime[],
  draining: () => boolean,
  req: WebTransportRequest,
): Promise<Decision> {
  if (urlCarriesCredential(req.query)) {
    return refuse(400, 'credential_in_url', 'credentials must not appear in URLs (AWP-SEC-006)');
  }
  if (!req.protocols.includes(AWP_PROTOCOL)) return refuse(400, 'no_subprotocol', 'offer the protocol "awp"');
  if (draining()) return refuse(503, 'draining', 'this edge is draining');
  const token = bearerCredential(req.header('authorization'), req.protocols);
  for (const route of routes) {
    const index = route.worldEndpointIndex(req.path);
    if (index === undefined) continue;
    if (token === undefined) return refuse(401, 'stream_unauthorized', 'missing session token', route);
    const observer = route.observer(token);
    if (observer !== undefined) return observerStream(ctx, route, observer.hub, observer.session, index);
    const session = ctx.registry.attachedSession(token);
    if (session === undefined || session.record.route !== route.name) {
      return refuse(401, 'stream_unauthorized', NO_LIVE_SESSION, route);
    }
    const endpoint = session.upstreamEndpoints[index];
    if (endpoint?.binding !== 'ws' || typeof endpoint.url !== 'string') {
      return refuse(404, 'no_route', 'no such stream endpoint', route);
    }
    const maxFrame = Math.min(
      endpoint.max_frame_bytes ?? DEFAULT_MAX_FRAME_BYTES,
      ctx.config.transport.max_message_bytes,
    );
    let relay: WebTransportRelay;
    try {
      relay = await WebTransportRelay.open(ctx, session, endpoint.url, maxFrame);
    } catch (err) {
      const detail = err instanceof DialError ? err.message : String(err);
      return refuse(
        502,
        'stream_unavailable',
        `the world's stream endpoint is unavailable: ${detail}`,
        route,
      );
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
  return refuse(404, 'no_route', `no stream endpoint at ${req.path}`);
}

/** An observer's session, served by its hub: frames only, one stream per channel. */
function observerStream(
  ctx: EdgeContext,
  route: RouteRuntime,
  hub: ChannelHub,
  session: ObserverSession,
  index: number,
): Decision {
  if (index !== 0) return refuse(404, 'no_route', 'no such stream endpoint', route);
  if (!session.attached) return refuse(401, 'stream_unauthorized', NO_LIVE_SESSION, route);
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
      // Observers have no command channels; anything but whole valid frames is malformed (AWP-TRN-013).
      const splitters = new Map<object, FrameSplitter>();
      const malformed = () => sink.close(1002, 'AWP_MALFORMED');
      readIncomingStreams(wt, {
        chunk: (stream, data) => {
          let splitter = splitters.get(stream);
          if (splitter === undefined)
            splitters.set(stream, (splitter = new FrameSplitter(t.max_message_bytes)));
          try {
            for (const buf of splitter.push(data)) peekFrame(buf);
          } catch (err) {
            if (err instanceof FrameError) return malformed();
            sink.close(1009, 'frame exceeds max_frame_bytes');
          }
        },
        end: (stream) => {
          if ((splitters.get(stream)?.pending ?? 0) > 0) malformed();
          splitters.delete(stream);
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
  const gauge = ctx.metrics.agentConnections.labels(route.name, 'stream');
  gauge.inc();
  wt.closed.then(
    () => gauge.dec(),
    () => gauge.dec(),
  );
}

const NO_LIVE_SESSION = 'the token names no session with a live control connection here';

/** A decision; a refusal carries a bounded reason code and its route for metrics and logs. */
type Decision = Extract<WebTransportDecision, { accept: true }> | Refusal;
type Refusal = Extract<WebTransportDecision, { accept: false }> & { code: string; route: string };

function refuse(status: number, code: string, reason: string, route?: RouteRuntime): Refusal {
  return { accept: false, status, reason, code, route: route?.name ?? 'none' };
}
