/**
 * The edge: an agent-facing listener routing each upgrade to a relay connection or a stream relay,
 * and an admin listener for health and metrics.
 */
import type { EdgeConfig } from '../config/schema.js';
import { isLoopback } from '../config/load.js';
import { TokenMint } from '../relay/tokens.js';
import type { SessionStore } from '../store/session-store.js';
import { openStore } from './store-setup.js';
import { CredentialBudgets } from '../policy/budgets.js';
import { createLogger, type Logger } from '../telemetry/logger.js';
import { EdgeMetrics } from '../telemetry/metrics.js';
import { bearerCredential, credentialMatches, urlCarriesCredential } from '../transport/auth.js';
import type { AgentServer, UpgradeOutcome, UpgradeRequest } from '../transport/engine.js';
import { listenAgents } from '../transport/select-engine.js';
import { startAdmin, type AdminServer } from './admin.js';
import type { EdgeContext } from './context.js';
import { RelayDriver } from './relay-driver.js';
import { RouteRuntime } from './route.js';
import { SessionRegistry } from './session-registry.js';
import { StreamRelay } from './stream-relay.js';
import type { WebTransportListener } from '../transport/webtransport.js';
import type { ChannelHub, HubContext } from '../fanout/channel-hub.js';
import type { ObserverSession } from '../fanout/observer-session.js';
import { WsStreamSink } from '../fanout/ws-stream-sink.js';
import { FrameMetrics } from '../telemetry/frame-metrics.js';
import { redact } from '../telemetry/redact.js';
import { peekFrame } from '../protocol/frame.js';

export interface EdgeOptions {
  readonly store?: SessionStore;
  readonly log?: Logger;
  readonly metrics?: EdgeMetrics;
}

/** Resolution of the hubs' timers (heartbeats are seconds; telemetry once a second). */
const HUB_TICK_MS = 50;

export class Edge {
  private draining = false;
  private timer: NodeJS.Timeout | undefined;
  private stopStore: () => void = () => undefined;
  /** The `webtransport` stream endpoints, when configured. */
  private webtransport: WebTransportListener | undefined;

  private constructor(
    readonly config: EdgeConfig,
    readonly ctx: EdgeContext,
    private readonly routes: readonly RouteRuntime[],
    private readonly server: AgentServer,
    private readonly admin: AdminServer,
  ) {}

  static async start(config: EdgeConfig, options: EdgeOptions = {}): Promise<Edge> {
    const log = options.log ?? createLogger(config.log_level);
    const mint = new TokenMint();
    const opened =
      options.store !== undefined
        ? { store: options.store, epochReady: () => true, stop: () => undefined }
        : await openStore(config.store, mint, log);
    const store = opened.store;
    const storeReady = () => store.healthy() && opened.epochReady();
    const refused = () =>
      storeReady() ? undefined : `the session store (${store.kind}) is unreachable; retry shortly`;
    const routes = config.routes.map((r) => new RouteRuntime(r, mint, refused));
    const metrics = options.metrics ?? new EdgeMetrics();
    const now = () => performance.now();
    // Refusals are counted where the route is known; here each episode is logged once.
    const budgets = new CredentialBudgets(config.budgets, now, (kind, budget, first) => {
      if (first)
        log.warn(
          { event: 'budget_exceeded', budget: kind, agent: budget.id },
          'an agent exceeded its budget',
        );
    });
    const ctx: EdgeContext = {
      config,
      log,
      metrics,
      budgets,
      registry: new SessionRegistry(store),
      now,
      connections: new Set(),
      hubFor: (route, mode) => route.hub(mode, () => hubContext(config, route, mint, metrics, log, now)),
    };
    const ref: { edge?: Edge } = {};
    const server = await listenAgents(config.engine, {
      host: config.listen.host,
      port: config.listen.port,
      maxMessageBytes: config.transport.max_message_bytes,
      pingIntervalMs: config.timing.hop_ping_interval_ms,
      upgrade: (req) => ref.edge!.upgrade(req),
      onError: (err) =>
        log.error(
          { event: 'internal_error', err: err instanceof Error ? err.stack : String(err) },
          'connection setup failed',
        ),
      tls: config.tls,
    });
    if (config.tls === undefined && !isLoopback(config.listen.host)) {
      log.warn(
        { event: 'plaintext_listener', listen: config.listen.host },
        'agents reach this listener from other machines without TLS: configure tls: or terminate TLS in front of the edge (AWP-SEC-001)',
      );
    }
    const admin = await startAdmin(config.admin, {
      ready: () => ref.edge !== undefined && !ref.edge.draining && storeReady(),
      metrics: () => {
        ref.edge?.sampleGauges();
        return metrics.exposition();
      },
    });
    const edge = new Edge(config, ctx, routes, server, admin);
    edge.stopStore = opened.stop;
    ref.edge = edge;
    if (config.webtransport !== undefined) {
      // Loaded only when configured: the library probes for its native HTTP/3 transport on import.
      const { startWebTransportEndpoint } = await import('./webtransport-endpoint.js');
      edge.webtransport = await startWebTransportEndpoint(ctx, routes, () => edge.draining).catch(
        async (err: unknown) => {
          await edge.close(); // e.g. its port is taken: release what did start
          throw err;
        },
      );
    }
    // Timers of the observer hubs and their sessions (heartbeats, telemetry, linger, expiry).
    edge.timer = setInterval(() => {
      const t = now();
      for (const r of routes) for (const hub of [...r.allHubs()]) hub.tick(t);
    }, HUB_TICK_MS);
    edge.timer.unref();
    log.info(
      {
        event: 'edge_started',
        engine: server.engine,
        listen: `${config.listen.host}:${server.port}`,
        admin: `${config.admin.host}:${admin.port}`,
        store: store.kind,
        routes: config.routes.map((r) => ({ name: r.name, path: r.path, upstream: r.upstream })),
      },
      'awp-edge listening',
    );
    return edge;
  }

  /** Gauges read at scrape time from what the edge holds. */
  sampleGauges(): void {
    const m = this.ctx.metrics;
    m.sessions.reset();
    m.journalEntries.reset();
    for (const r of this.routes) {
      m.journalEntries.labels(r.name).set(0);
      m.sessions.labels(r.name, 'relay', 'attached').set(0);
      m.sessions.labels(r.name, 'relay', 'suspended').set(0);
    }
    for (const s of this.ctx.registry.sessions()) {
      m.sessions.labels(s.record.route, 'relay', s.attachment !== null ? 'attached' : 'suspended').inc();
      m.journalEntries.labels(s.record.route).inc(s.journal.size);
    }
    for (const r of this.routes) {
      for (const hub of r.allHubs()) {
        for (const o of hub.sessions()) {
          m.sessions.labels(r.name, 'observer', o.attached ? 'attached' : 'suspended').inc();
          m.journalEntries.labels(r.name).inc(o.journal.size);
        }
      }
    }
  }

  get port(): number {
    return this.server.port;
  }

  get adminPort(): number {
    return this.admin.port;
  }

  get engine(): string {
    return this.server.engine;
  }

  /** Decides an upgrade before any WebSocket exists: refusals are plain HTTP answers, counted and logged. */
  private upgrade(req: UpgradeRequest): UpgradeOutcome {
    const outcome = this.decide(req);
    if (!outcome.accept && 'reason' in outcome) {
      const r = outcome;
      this.ctx.metrics.rejections.labels(r.route, r.reason).inc();
      this.ctx.log.info({
        event: 'connection_refused',
        route: r.route,
        reason: r.reason,
        status: r.status,
        path: req.path,
      });
    }
    return outcome;
  }

  private decide(req: UpgradeRequest): UpgradeOutcome | Refusal {
    if (urlCarriesCredential(req.query)) {
      return refuse(
        400,
        'credential_in_url',
        'credentials must not appear in URLs (AWP-SEC-006): use the Authorization header or the awp.bearer.<token> subprotocol',
      );
    }
    if (!req.protocols.includes('awp'))
      return refuse(400, 'no_subprotocol', 'offer the WebSocket subprotocol "awp"');
    if (this.draining) return refuse(503, 'draining', 'this edge is draining; reconnect to another replica');
    const credential = bearerCredential(req.header('authorization'), req.protocols);
    const base = this.publicBase(req);
    for (const route of this.routes) {
      if (req.path === route.config.path) {
        const approver =
          credential !== undefined && credentialMatches(credential, route.config.approver_tokens);
        if (credential === undefined) {
          if (!route.config.allow_anonymous)
            return refuse(401, 'missing_credential', 'missing bearer credential', route);
        } else if (!approver && !credentialMatches(credential, route.config.agent_tokens)) {
          return refuse(401, 'invalid_credential', 'invalid bearer credential', route);
        }
        const budget = this.ctx.budgets.for(credential);
        if (!budget.openConnection())
          return refuse(
            429,
            'budget_connections',
            'this credential holds as many connections as its budget allows',
            route,
          );
        return {
          accept: true,
          protocol: 'awp',
          open: (conn) =>
            new RelayDriver(this.ctx, route, conn, base, budget, approver ? credential : undefined),
        };
      }
      const index = route.worldEndpointIndex(req.path);
      if (index !== undefined) return this.openStream(route, index, credential);
    }
    return refuse(404, 'no_route', `no world is routed at ${req.path}`);
  }

  /** A stream connection: its credential is the session token the edge minted (AWP-TRN-013). */
  private openStream(
    route: RouteRuntime,
    index: number,
    token: string | undefined,
  ): UpgradeOutcome | Refusal {
    if (token === undefined) return refuse(401, 'stream_unauthorized', 'missing session token', route);
    const observer = route.observer(token);
    if (observer !== undefined) return this.openObserverStream(route, observer.hub, observer.session, index);
    const session = this.ctx.registry.attachedSession(token);
    if (session === undefined || session.record.route !== route.name) {
      return refuse(
        401,
        'stream_unauthorized',
        'the token names no session with a live control connection here',
        route,
      );
    }
    const endpoint = session.upstreamEndpoints[index];
    if (endpoint?.binding !== 'ws' || typeof endpoint.url !== 'string')
      return refuse(404, 'no_route', 'no such stream endpoint', route);
    const relay = StreamRelay.open(this.ctx, session, endpoint.url);
    return {
      accept: true,
      protocol: 'awp',
      open: (conn) => relay.attach(conn, this.ctx),
      abandon: () => relay.abandon(),
    };
  }

  /** An observer's stream connection, served by its hub: frames only, from the edge to the observer. */
  private openObserverStream(
    route: RouteRuntime,
    hub: ChannelHub,
    session: ObserverSession,
    index: number,
  ): UpgradeOutcome | Refusal {
    if (index !== 0) return refuse(404, 'no_route', 'no such stream endpoint', route);
    if (!session.attached)
      return refuse(
        401,
        'stream_unauthorized',
        'the token names no session with a live control connection here',
        route,
      );
    const t = this.config.transport;
    const metrics = this.ctx.metrics;
    return {
      accept: true,
      protocol: 'awp',
      open: (conn) => {
        metrics.agentConnections.labels(route.name, 'stream').inc();
        const frames = FrameMetrics.for(metrics, route.name, 'ws', 'world_to_agent', this.ctx.now);
        const sink = new WsStreamSink(conn, t.high_water_bytes, t.max_queued_bytes, frames);
        hub.attachStream(session, sink);
        return {
          message: (data, binary) => {
            // Observers have no command channels; anything but a valid frame is malformed (AWP-TRN-013).
            if (!binary || !isFrame(data as Buffer)) conn.close(1002, 'AWP_MALFORMED');
          },
          drain: () => sink.drain(),
          close: () => {
            metrics.agentConnections.labels(route.name, 'stream').dec();
            hub.streamLost(session, sink);
          },
        };
      },
    };
  }

  private publicBase(req: UpgradeRequest): string {
    if (this.config.public_url !== undefined) return this.config.public_url.replace(/\/$/, '');
    const scheme = this.config.tls !== undefined ? 'wss' : 'ws';
    return `${scheme}://${req.header('host') ?? `${this.config.listen.host}:${this.server.port}`}`;
  }

  /**
   * Graceful drain (SIGTERM): readiness turns false at once and new connections are refused; agents are
   * closed with 1001 spread over the drain window with full jitter, so they reconnect and resume at other
   * replicas without a storm; each close mirrors the agent's drop upstream. Without a shared store the
   * sessions could not resume elsewhere, so the drain waits for them to end, up to the window.
   */
  async drain(): Promise<{ closed: number; cut: number }> {
    this.draining = true;
    const window = this.config.drain.window_ms;
    const shared = this.ctx.registry.store.kind !== 'memory';
    const conns = [...this.ctx.connections];
    this.ctx.log.info(
      { event: 'drain_started', connections: conns.length, window_ms: window, shared_store: shared },
      'draining',
    );
    let cut = 0;
    if (shared) {
      await Promise.all(
        conns.map(
          (c) =>
            new Promise<void>((resolve) => {
              setTimeout(() => {
                c.terminate(1001, 'edge draining: reconnect and resume');
                resolve();
              }, Math.random() * window);
            }),
        ),
      );
    } else {
      const end = performance.now() + window;
      while (this.ctx.connections.size > 0 && performance.now() < end)
        await new Promise((r) => setTimeout(r, 100));
      cut = this.ctx.connections.size;
      if (cut > 0) {
        this.ctx.log.warn(
          { event: 'drain_cut', connections: cut },
          'drain window over: closing agents whose sessions cannot resume elsewhere',
        );
      }
    }
    await this.close();
    return { closed: conns.length, cut };
  }

  async close(): Promise<void> {
    this.draining = true;
    clearInterval(this.timer);
    this.stopStore();
    for (const r of this.routes) for (const hub of [...r.allHubs()]) hub.shutdown();
    for (const c of [...this.ctx.connections]) c.terminate(1001, 'edge shutting down');
    await this.webtransport?.close();
    this.ctx.registry.clear();
    await this.server.close();
    await this.admin.close();
    await this.ctx.registry.store.close();
  }
}

function hubContext(
  config: EdgeConfig,
  route: RouteRuntime,
  mint: TokenMint,
  metrics: EdgeMetrics,
  log: Logger,
  now: () => number,
): Omit<HubContext, 'retired'> {
  // Observers' inline frames: forward latency is measured to their control connections.
  const frames = FrameMetrics.for(metrics, route.name, 'inline', 'world_to_agent', now);
  return {
    route: route.name,
    upstreamUrl: route.config.upstream,
    upstreamToken: route.config.upstream_token,
    connectTimeoutMs: config.timing.upstream_connect_timeout_ms,
    maxMessageBytes: config.transport.max_message_bytes,
    pingIntervalMs: config.timing.hop_ping_interval_ms,
    highWaterBytes: config.transport.high_water_bytes,
    maxQueuedBytes: config.transport.max_queued_bytes,
    lingerMs: route.config.hub_linger_ms,
    now,
    mintToken: () => mint.mint(),
    endpoints: (base) => route.observerEndpoints(base),
    frames,
    upstream: (kind, delta) => metrics.upstreamConnections.labels(route.name, kind).inc(delta),
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

/** A refused upgrade: an HTTP answer, with a bounded reason for metrics and logs. */
type Refusal = { accept: false; status: number; body: string; reason: string; route: string };

function refuse(status: number, reason: string, body: string, route?: RouteRuntime): Refusal {
  return { accept: false, status, body: `${body}\n`, reason, route: route?.name ?? 'none' };
}
