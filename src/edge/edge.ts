/**
 * The edge, composed: the agent-facing listener (each upgrade decided by upgrade-decision.ts, then an
 * agent's control connection, an observer's stream connection or a relay agent's stream relay), the
 * WebTransport listener when configured, the admin listener, the observer hubs' timers; start, drain
 * and close.
 */
import type { EdgeConfig } from '../config/schema.js';
import { isLoopback } from '../config/address.js';
import { TokenMint } from '../session/tokens.js';
import type { SessionStore } from '../session/session-store.js';
import { openStore } from './store-setup.js';
import { CredentialBudgets } from '../policy/budgets.js';
import { createLogger, type Logger } from '../telemetry/logger.js';
import { EdgeMetrics } from '../telemetry/metrics.js';
import type {
  AgentServer,
  ConnectionHandlers,
  EngineOptions,
  UpgradeOutcome,
  UpgradeRequest,
} from '../transport/engine.js';
import { listenAgents } from '../transport/select-engine.js';
import { ADMIN_LIMITS, buildInfo, startAdmin, type AdminServer } from './admin.js';
import { onStreamListener, openStreamListener } from './stream-listener.js';
import type { EdgeContext } from './context.js';
import { AgentConnection } from './agent-connection.js';
import { RouteRuntime } from './route.js';
import {
  CredentialReload,
  KnownCredentials,
  type ReloadOutcome,
  type ReloadTrigger,
} from './credential-reload.js';
import { SessionRegistry } from '../relay/io/session-registry.js';
import { StreamRelay } from '../relay/io/stream-relay.js';
import { hubContext } from './hub-context.js';
import { observerStream } from './observer-stream.js';
import { containProcessFaults } from './process-faults.js';
import { closeRecording, openRecording, type RecorderFs } from './recording.js';
import { drainConnections, sampleGauges } from './drain.js';
import type { WebTransportListener } from '../transport/webtransport.js';
import { ViewerSite } from '../viewer/site.js';
import { SliceLoop } from '../transport/slice-loop.js';
import { ViewerStats } from '../viewer/stats.js';
import { containHandlers, guarded, type FaultReporter } from '../transport/contain.js';
import {
  decideUpgrade,
  redactedUrl,
  type DecisionState,
  type Refusal,
  type UpgradeTarget,
} from './upgrade-decision.js';

export interface EdgeOptions {
  readonly store?: SessionStore;
  readonly log?: Logger;
  readonly metrics?: EdgeMetrics;
  /**
   * The configuration validated again with its credential files read anew (ConfigSource.reread): given,
   * `reloadCredentials` (SIGHUP) rotates credentials, and changes to the files are watched (unless
   * `credential_files.watch` is false). Without it, a reload validates `config` as it is.
   */
  readonly reread?: () => EdgeConfig;
  /** The file system the flight recorder writes to (default node:fs; a test gives a slow one). */
  readonly recorderFs?: RecorderFs;
}

/** Resolution of the hubs' timers (heartbeats are seconds; telemetry once a second). */
const HUB_TICK_MS = 50;

export class Edge {
  private draining = false;
  private timer: NodeJS.Timeout | undefined;
  private stopStore: () => void = () => undefined;
  /** The `webtransport` stream endpoints, when configured. */
  private webtransport: WebTransportListener | undefined;
  /** The live viewer page on the agent listener (`viewer.enabled`). */
  private viewer: ViewerSite | undefined;
  /** Whether a string is a credential this edge knows (to refuse URLs carrying one, AWP-SEC-006). */
  private readonly isCredential: (value: string) => boolean;
  private readonly known: KnownCredentials;
  private credentials: CredentialReload | undefined;
  /** The observers' stream listener (`stream_listen`), when configured. */
  private streamServer: AgentServer | undefined;

  private constructor(
    readonly config: EdgeConfig,
    readonly ctx: EdgeContext,
    private readonly routes: readonly RouteRuntime[],
    private readonly server: AgentServer,
    private readonly admin: AdminServer,
    mint: TokenMint,
  ) {
    const known = (this.known = new KnownCredentials(routes));
    this.isCredential = (value) => mint.owns(value) || known.has(value);
  }

  static async start(config: EdgeConfig, options: EdgeOptions = {}): Promise<Edge> {
    const log = options.log ?? createLogger(config.log_level);
    const mint = new TokenMint();
    const opened =
      options.store !== undefined
        ? { store: options.store, epochReady: () => true, stop: () => undefined }
        : await openStore(config.store, mint, log);
    const store = opened.store;
    // What start opens is released in reverse when a later step fails (a port taken, say): the caller gets
    // the error with nothing left listening. A store the caller passed in stays the caller's.
    const undo: (() => Promise<void> | void)[] =
      options.store === undefined ? [() => store.close(), () => opened.stop()] : [];
    const open = async <T>(make: () => Promise<T>, release: (t: T) => Promise<void> | void): Promise<T> => {
      try {
        const t = await make();
        undo.push(() => release(t));
        return t;
      } catch (err) {
        for (const u of undo.reverse())
          await Promise.resolve()
            .then(u)
            .catch(() => undefined);
        throw err;
      }
    };
    const storeReady = () => store.healthy() && opened.epochReady();
    const refused = () =>
      storeReady() ? undefined : `the session store (${store.kind}) is unreachable; retry shortly`;
    const routes = config.routes.map(
      (r) =>
        new RouteRuntime(r, mint, refused, {
          maxJsonDepth: config.transport.max_json_depth,
          maxQueuedBytes: config.transport.max_queued_bytes,
        }),
    );
    const metrics = options.metrics ?? new EdgeMetrics({ processPrefix: config.metrics?.process_prefix });
    metrics.initialiseRareSeries(config.routes.map((r) => r.name));
    const now = () => performance.now();
    // Refusals are counted where the route is known; here each episode is logged once.
    const budgets = new CredentialBudgets(config.budgets, now, (kind, budget, first) => {
      if (first)
        log.warn(
          { event: 'budget_exceeded', budget: kind, agent: budget.id },
          'an agent exceeded its budget',
        );
    });
    const fault: FaultReporter = (where, err) => {
      metrics.internalErrors.labels(where).inc();
      log.error(
        { event: 'internal_error', where, err: err instanceof Error ? err.stack : String(err) },
        'contained an internal error: the connection whose input caused it was closed',
      );
    };
    const ref: { edge?: Edge } = {};
    // Every hub's fan-out and timer passes, and the recorders' ticks, share one budget per event-loop turn.
    const slices = new SliceLoop(now);
    const isCredential = (v: string) => ref.edge?.isCredential(v) ?? mint.owns(v);
    const deps = { metrics, log, now, isCredential, routes, fs: options.recorderFs, slices, fault };
    const recording = await open(() => openRecording(config, deps), closeRecording);
    const ctx: EdgeContext = {
      config,
      log,
      metrics,
      fault,
      budgets,
      registry: new SessionRegistry(store),
      now,
      ...recording,
      connections: new Set(),
      hubFor: (route, mode) =>
        route.hub(mode, () => ({
          ...hubContext(config, route, mint, metrics, log, now, fault, slices),
          // Shared: observer sessions resume at any replica, like relay sessions (issue 13).
          store: store.kind === 'memory' ? undefined : store,
        })),
    };
    const viewer = config.viewer.enabled
      ? await open(
          () => ViewerSite.load(new ViewerStats(metrics, config.routes, () => ref.edge?.sampleGauges())),
          (v) => v.close(),
        )
      : undefined;
    const agentListener: EngineOptions = {
      host: config.listen.host,
      port: config.listen.port,
      maxMessageBytes: config.transport.max_message_bytes,
      pingIntervalMs: config.timing.hop_ping_interval_ms,
      upgrade: (req) => ref.edge!.upgrade(req),
      onError: (err) => fault('upgrade', err),
      handshake: {
        timeoutMs: config.transport.handshake_timeout_ms,
        maxPending: config.transport.max_pending_handshakes,
        maxPendingPerAddress: config.transport.max_pending_handshakes_per_address,
      },
      onHandshakeClosed: (reason) => metrics.handshakesClosed.labels('agent', reason).inc(),
      tls: config.tls,
      ...(viewer !== undefined && { plain: (req) => viewer.handle(req) }),
    };
    const server = await open(
      () => listenAgents(config.engine, agentListener),
      (s) => s.close(),
    );
    const streamServer =
      config.stream_listen === undefined
        ? undefined
        : await open(
            () =>
              openStreamListener(
                agentListener,
                config.stream_listen!,
                config.stream_public_url,
                config.stream_worker_nice,
                routes,
                slices,
                {
                  upgrade: (req) => ref.edge!.upgrade(req, 'stream'),
                  handshakeClosed: (reason) => metrics.handshakesClosed.labels('stream', reason).inc(),
                },
              ),
            (s) => s.close(),
          );
    const thread = streamServer?.thread;
    if (thread !== undefined) {
      metrics.watchThread('stream_worker', () => thread.busyMs());
      thread.onBatch((seconds) => metrics.streamWorkerBatch.observe(seconds));
    }
    for (const address of [config.listen, config.stream_listen])
      if (address !== undefined && config.tls === undefined && !isLoopback(address.host)) {
        log.warn(
          { event: 'plaintext_listener', listen: address.host },
          'agents reach this listener from other machines without TLS: configure tls: or terminate TLS in front of the edge (AWP-SEC-001)',
        );
      }
    const ready = () => ref.edge !== undefined && !ref.edge.draining && storeReady();
    metrics.watchHealth(ready, { kind: store.kind, up: storeReady });
    const build = buildInfo(server.engine);
    metrics.recordBuild(build);
    const adminHandlers = {
      ready,
      build,
      metrics: () => {
        ref.edge?.sampleGauges();
        return metrics.exposition();
      },
    };
    const admin = await open(
      () =>
        startAdmin(config.admin, adminHandlers, {
          ...ADMIN_LIMITS,
          timeoutMs: config.transport.handshake_timeout_ms,
        }),
      (a) => a.close(),
    );
    const edge = new Edge(config, ctx, routes, server, admin, mint);
    edge.streamServer = streamServer;
    edge.stopStore = opened.stop;
    edge.viewer = viewer;
    ref.edge = edge;
    metrics.recordReload(true); // the credentials in use were read now
    edge.credentials = new CredentialReload(
      { routes, known: edge.known, budgets, log, metrics },
      config,
      options.reread ?? (() => config),
      options.reread !== undefined,
    );
    if (config.webtransport !== undefined) {
      // Loaded only when configured: the library probes for its native HTTP/3 transport on import.
      const { startWebTransportEndpoint } = await import('./webtransport-endpoint.js');
      edge.webtransport = await startWebTransportEndpoint(ctx, routes, edge).catch(async (err: unknown) => {
        await edge.close(); // e.g. its port is taken: release what did start
        throw err;
      });
    }
    // Timers of the observer hubs and their sessions (heartbeats, telemetry, linger, expiry).
    edge.timer = setInterval(() => {
      const t = now();
      for (const r of routes)
        for (const hub of [...r.allHubs()]) guarded('hub_timer', fault, () => hub.tick(t));
    }, HUB_TICK_MS);
    edge.timer.unref();
    log.info(
      {
        event: 'edge_started',
        engine: server.engine,
        listen: `${config.listen.host}:${server.port}`,
        ...(streamServer !== undefined && {
          stream_listen: `${config.stream_listen!.host}:${streamServer.port}`,
          ...(config.stream_worker_nice !== 0 && { stream_worker_nice: config.stream_worker_nice }),
        }),
        admin: `${config.admin.host}:${admin.port}`,
        store: store.kind,
        routes: config.routes.map((r) => ({ name: r.name, path: r.path, upstream: r.upstream })),
      },
      'awp-edge listening',
    );
    return edge;
  }

  /**
   * SIGHUP: the credential files read anew and validated as at start; new connections use the result, open
   * ones keep running. On a problem nothing changes (logged, counted in awp_edge_config_reloads_total).
   */
  reloadCredentials(trigger: ReloadTrigger = 'signal'): ReloadOutcome {
    return this.credentials!.reload(trigger);
  }

  /** Gauges read at scrape time from what the edge holds. */
  sampleGauges(): void {
    sampleGauges(this.ctx, this.routes);
  }

  get port(): number {
    return this.server.port;
  }

  /** The stream listener's port (`stream_listen`), when there is one. */
  get streamPort(): number | undefined {
    return this.streamServer?.port;
  }

  /**
   * The last resort behind the boundaries (for the running process, not for tests that host edges):
   * an exception that escaped every connection's boundary, e.g. in a promise callback, is reported
   * like a contained one instead of ending the process for every agent.
   */
  /** Reports what no boundary caught instead of ending the process (see process-faults.ts). */
  containProcessFaults(): () => void {
    return containProcessFaults(this.ctx);
  }

  get adminPort(): number {
    return this.admin.port;
  }

  get engine(): string {
    return this.server.engine;
  }

  /**
   * Decides an upgrade before any WebSocket exists: refusals are plain HTTP answers, counted and logged.
   * The stream listener serves observers' stream connections only.
   */
  private upgrade(req: UpgradeRequest, listener: 'agent' | 'stream' = 'agent'): UpgradeOutcome {
    let decision = decideUpgrade(
      { binding: 'ws', ...req, header: (n) => req.header(n) },
      this.decisionState(),
    );
    if (listener === 'stream') decision = onStreamListener(decision);
    if (!decision.accept) {
      this.refused(decision, req.path, req.query);
      return decision;
    }
    const outcome = this.accept(decision.target);
    // The one boundary for agent connections, on every engine: a fault closes that connection only.
    const { open } = outcome;
    const fault = this.ctx.fault;
    return {
      ...outcome,
      open: (conn) => {
        const close = () => conn.close(1011, 'internal error');
        const handlers = guarded('agent_open', fault, () => open(conn), close);
        return handlers === undefined ? INERT : containHandlers('agent', handlers, fault, close);
      },
    };
  }

  /** What the upgrade decision reads of this edge (both bindings). */
  decisionState(): DecisionState {
    return {
      routes: this.routes,
      draining: this.draining,
      publicUrl: this.config.public_url,
      scheme: this.config.tls !== undefined ? 'wss' : 'ws',
      fallbackAuthority: `${this.config.listen.host}:${this.server.port}`,
      budgets: this.ctx.budgets,
      isCredential: this.isCredential,
      attachedSession: (token) => this.ctx.registry.attachedSession(token),
    };
  }

  /** Counts and logs a refused upgrade; the URL only redacted (it may carry a credential). */
  refused(r: Refusal, path: string, query: string, binding = 'ws'): void {
    this.ctx.metrics.rejections.labels(r.route, r.reason).inc();
    this.ctx.log.info({
      event: 'connection_refused',
      binding,
      route: r.route,
      reason: r.reason,
      status: r.status,
      url: redactedUrl(path, query),
    });
  }

  private accept(target: UpgradeTarget): Extract<UpgradeOutcome, { accept: true }> {
    const ctx = this.ctx;
    switch (target.kind) {
      case 'control': {
        const { route, base, budget, approverCredential } = target;
        return {
          accept: true,
          protocol: 'awp',
          open: (conn) => new AgentConnection(ctx, route, conn, base, budget, approverCredential),
          abandon: () => budget.closeConnection(), // the slot the decision took
        };
      }
      case 'relay-stream': {
        const relay = StreamRelay.open(ctx, target.session, target.endpoint.url);
        return {
          accept: true,
          protocol: 'awp',
          open: (conn) => relay.attach(conn, ctx),
          abandon: () => relay.abandon(),
        };
      }
      case 'observer-stream':
        return { accept: true, protocol: 'awp', open: (conn) => observerStream(ctx, target, conn) };
    }
  }

  /**
   * Graceful drain (SIGTERM): readiness turns false at once and new connections are refused; agents are
   * closed with 1001 spread over the drain window with full jitter, so they reconnect and resume at other
   * replicas without a storm; each close mirrors the agent's drop upstream. Without a shared store the
   * sessions could not resume elsewhere, so the drain waits for them to end, up to the window.
   */
  async drain(): Promise<{ closed: number; cut: number }> {
    this.draining = true;
    const drained = await drainConnections(this.ctx, this.config.drain.window_ms);
    await this.close();
    return drained;
  }

  async close(): Promise<void> {
    this.draining = true;
    clearInterval(this.timer);
    this.credentials?.close();
    this.viewer?.close();
    this.stopStore();
    // Observer sessions first: with a shared store they close their connections once stored there.
    await Promise.all(this.routes.flatMap((r) => [...r.allHubs()].map((hub) => hub.shutdown())));
    for (const c of [...this.ctx.connections]) c.terminate(1001, 'edge shutting down');
    await this.webtransport?.close();
    this.ctx.registry.clear();
    await this.streamServer?.close();
    await this.server.close();
    await this.admin.close();
    await this.ctx.registry.store.close();
    await closeRecording(this.ctx, 'edge shutting down');
  }
}

/** The handlers of a connection whose opening faulted (it is being closed). */
const INERT: ConnectionHandlers = {
  message: () => undefined,
  drain: () => undefined,
  close: () => undefined,
};
