/**
 * Prometheus metrics of the edge. Labels are bounded: route, channel name, direction, binding,
 * outcome, method, reason, kind, state, thread — never a session id or a token.
 */
import { performance } from 'node:perf_hooks';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** From 10 us to 10 s: fine enough for sub-millisecond forwarding, wide enough for stalls. */
const LATENCY_BUCKETS = [
  0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
  0.5, 1, 2.5, 10,
];

/**
 * What became of a frame for one subscriber (frames a world sends are counted once, before fan-out, in
 * `awp_edge_frames_received_total`): the outcomes of a channel sum to its deliveries, so shares and
 * ratios over `outcome` mean something.
 */
export type FrameOutcome = 'forwarded' | 'replaced' | 'downsampled' | 'dropped_slow' | 'malformed';
export type Direction = 'world_to_agent' | 'agent_to_world';

/**
 * Live connections by route and kind, as sets of handles: a gauge read from it at scrape time cannot
 * drift or go negative (an inc/dec pair can, when a close is seen for an open that was not).
 */
export class Census {
  private readonly live = new Map<string, { route: string; kind: string; handles: Set<object> }>();

  open(handle: object, route: string, kind: string): void {
    this.entry(route, kind).handles.add(handle);
  }

  close(handle: object, route: string, kind: string): void {
    this.live.get(`${route}\u0000${kind}`)?.handles.delete(handle);
  }

  /** Sets the gauge from the census, 0 for every pair seen before. */
  fill(gauge: Gauge<'route' | 'kind'>): void {
    for (const e of this.live.values()) gauge.labels(e.route, e.kind).set(e.handles.size);
  }

  private entry(route: string, kind: string) {
    const k = `${route}\u0000${kind}`;
    let e = this.live.get(k);
    if (e === undefined) this.live.set(k, (e = { route, kind, handles: new Set() }));
    return e;
  }
}

export class EdgeMetrics {
  readonly registry = new Registry();
  readonly upstreamCensus = new Census();
  readonly agentCensus = new Census();

  readonly forwardLatency = new Histogram({
    name: 'awp_edge_forward_latency_seconds',
    help: 'Time from the edge receiving a frame to writing it on the subscriber socket.',
    labelNames: ['route', 'channel', 'binding'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  readonly pipelineLatency = new Histogram({
    name: 'awp_edge_world_pipeline_latency_seconds',
    help: "World pipeline latency of forwarded observation frames: ts_send_ns - ts_mono_ns (the world's own clock).",
    labelNames: ['route', 'channel'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  readonly staleness = new Histogram({
    name: 'awp_edge_staleness_seconds',
    help: "Age of an observation when the edge forwards it: the edge's estimate of the upstream session clock minus ts_mono_ns.",
    labelNames: ['route', 'channel'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  readonly framesReceived = new Counter({
    name: 'awp_edge_frames_received_total',
    help: 'Frames the edge received from worlds for fan-out to observers, once per frame (before fan-out or drops).',
    labelNames: ['route', 'channel'] as const,
    registers: [this.registry],
  });

  readonly frameBytesReceived = new Counter({
    name: 'awp_edge_frames_received_bytes_total',
    help: 'Bytes of the frames in awp_edge_frames_received_total.',
    labelNames: ['route', 'channel'] as const,
    registers: [this.registry],
  });

  readonly frames = new Counter({
    name: 'awp_edge_frames_total',
    help: 'Frames per subscriber, by outcome: forwarded, replaced (latest-wins), downsampled, dropped_slow or malformed.',
    labelNames: ['route', 'channel', 'direction', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly frameBytes = new Counter({
    name: 'awp_edge_frame_bytes_total',
    help: 'Frame bytes by outcome (as awp_edge_frames_total).',
    labelNames: ['route', 'channel', 'direction', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly controlRtt = new Histogram({
    name: 'awp_edge_control_rtt_seconds',
    help: "Round trip of an agent's request through the edge and the world, by method and outcome.",
    labelNames: ['route', 'method', 'outcome'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  readonly rejections = new Counter({
    name: 'awp_edge_rejections_total',
    help: 'Requests and connections the edge refused itself, by reason.',
    labelNames: ['route', 'reason'] as const,
    registers: [this.registry],
  });

  readonly sessions = new Gauge({
    name: 'awp_edge_sessions',
    help: 'Sessions held by this replica, by kind and state.',
    labelNames: ['route', 'kind', 'state'] as const,
    registers: [this.registry],
  });

  readonly topicMembers = new Gauge({
    name: 'awp_edge_topic_members',
    help: "Observer channels served through the engine's pub/sub (one publish per shard of up to 64; 0 on the ws engine), by route and channel.",
    labelNames: ['route', 'channel'] as const,
    registers: [this.registry],
  });

  readonly resumes = new Counter({
    name: 'awp_edge_resumes_total',
    help: 'session.resume requests, by outcome.',
    labelNames: ['route', 'kind', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly replayLength = new Histogram({
    name: 'awp_edge_replay_entries',
    help: 'Notifications the edge replayed from its journal on a resume.',
    labelNames: ['route', 'kind'] as const,
    buckets: [0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000],
    registers: [this.registry],
  });

  readonly journalEntries = new Gauge({
    name: 'awp_edge_journal_entries',
    help: 'Replay journal entries held for agents, by route.',
    labelNames: ['route'] as const,
    registers: [this.registry],
  });

  readonly upstreamConnections: Gauge<'route' | 'kind'> = new Gauge({
    name: 'awp_edge_upstream_connections',
    help: 'Open connections from the edge to worlds, by kind (control, stream, hub).',
    labelNames: ['route', 'kind'] as const,
    registers: [this.registry],
    collect: (): void => this.upstreamCensus.fill(this.upstreamConnections),
  });

  readonly upstreamFailures = new Counter({
    name: 'awp_edge_upstream_failures_total',
    help: 'Failed dials and lost connections toward worlds, by kind and reason.',
    labelNames: ['route', 'kind', 'reason'] as const,
    registers: [this.registry],
  });

  readonly agentConnections: Gauge<'route' | 'kind'> = new Gauge({
    name: 'awp_edge_agent_connections',
    help: 'Open agent-facing connections, by kind (control, stream).',
    labelNames: ['route', 'kind'] as const,
    registers: [this.registry],
    collect: (): void => this.agentCensus.fill(this.agentConnections),
  });

  readonly internalErrors = new Counter({
    name: 'awp_edge_internal_errors_total',
    help: 'Unexpected exceptions contained at a boundary (the connection that caused one was closed), by where.',
    labelNames: ['where'] as const,
    registers: [this.registry],
  });

  readonly handshakesClosed = new Counter({
    name: 'awp_edge_handshakes_closed_total',
    help: 'Connections closed before completing their handshake: timed out, or over a pending-handshake limit.',
    labelNames: ['listener', 'reason'] as const,
    registers: [this.registry],
  });

  readonly messagesDropped = new Counter({
    name: 'awp_edge_messages_dropped_total',
    help: 'Control messages not relayed (invalid, too deep, responses to ids never sent, redeliveries), by sender.',
    labelNames: ['route', 'from', 'reason'] as const,
    registers: [this.registry],
  });

  /** Each thread's event loop's busy time so far (ms), read at scrape time: `main`, and any engine thread. */
  private readonly threads = new Map<string, { busyMs: () => number; counted: number }>([
    ['main', { busyMs: () => performance.eventLoopUtilization().active, counted: 0 }],
  ]);

  /**
   * Busy time per thread: its rate is the share of the time the thread's event loop was busy (1 is
   * saturated). With a stream listener, fan-out writes run on `stream_worker` and control on `main`.
   */
  readonly eventLoopBusy: Counter<'thread'> = new Counter({
    name: 'awp_edge_event_loop_busy_seconds_total',
    help: "Time each of the edge's threads spent running its event loop's work (its event-loop utilisation: the rate is the busy share), by thread: main (control, relay, fan-out decisions) and stream_worker (the stream listener's socket writes).",
    labelNames: ['thread'] as const,
    registers: [this.registry],
    collect: (): void => {
      for (const [name, t] of this.threads) {
        const busy = t.busyMs();
        if (busy > t.counted) this.eventLoopBusy.labels(name).inc((busy - t.counted) / 1000);
        t.counted = Math.max(t.counted, busy);
      }
    },
  });

  /** An engine thread whose busy time is counted (`awp_edge_event_loop_busy_seconds_total{thread}`). */
  watchThread(name: string, busyMs: () => number): void {
    this.threads.set(name, { busyMs, counted: 0 });
    this.eventLoopBusy.labels(name).inc(0);
  }

  readonly streamWorkerBatch = new Histogram({
    name: 'awp_edge_stream_worker_batch_seconds',
    help: "Time from the main thread handing a batch of stream writes to the stream listener's worker until it learns the batch was carried out (stream_listen): the wait a fan-out frame adds there, and how far the worker is behind.",
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });

  /** Always 1; its labels say what runs (the Prometheus `*_build_info` convention). */
  readonly buildInfo = new Gauge({
    name: 'awp_edge_build_info',
    help: 'Always 1: the version of awp-edge, the agent-facing engine (uws or ws) and the Node.js version, as labels.',
    labelNames: ['version', 'engine', 'node'] as const,
    registers: [this.registry],
  });

  readonly configReloads = new Counter({
    name: 'awp_edge_config_reloads_total',
    help: 'Reloads of the credential files (SIGHUP, or a change in a watched directory), by result: success (new connections use them) or failure (nothing changed: the edge keeps the credentials it had).',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly configReloadSuccessful = new Gauge({
    name: 'awp_edge_config_last_reload_successful',
    help: 'Whether the last reload of the credential files succeeded (1; also before any) or failed (0: the edge runs on the credentials it had).',
    registers: [this.registry],
  });

  readonly configReloadTime = new Gauge({
    name: 'awp_edge_config_last_reload_success_timestamp_seconds',
    help: 'When the credentials in use were read (at start, or by the last successful reload), in seconds since the epoch.',
    registers: [this.registry],
  });

  /** The credentials were read (at start or by a reload, `ok`), or a reload failed (not `ok`). */
  recordReload(ok: boolean, atMs = Date.now()): void {
    this.configReloadSuccessful.set(ok ? 1 : 0);
    if (ok) this.configReloadTime.set(atMs / 1000);
  }

  recordBuild(b: { readonly version: string; readonly engine: string; readonly node: string }): void {
    this.buildInfo.reset();
    this.buildInfo.labels(b.version, b.engine, b.node).set(1);
  }

  /**
   * Series of rare events start at 0, so dashboards and alerts see a rate (0) rather than no data and
   * the first increment is not lost to `rate()` (the Prometheus convention).
   */
  initialiseRareSeries(routes: readonly string[]): void {
    for (const where of [
      'agent_message',
      'agent_close',
      'upstream_message',
      'upgrade',
      'hub_timer',
      'process',
    ])
      this.internalErrors.labels(where).inc(0);
    for (const reason of ['timeout', 'listener_limit', 'address_limit'])
      this.handshakesClosed.labels('agent', reason).inc(0);
    for (const result of ['success', 'failure']) this.configReloads.labels(result).inc(0);
    for (const route of routes) {
      for (const reason of ['invalid', 'too_deep', 'unknown_response_id'])
        for (const from of ['agent', 'world']) this.messagesDropped.labels(route, from, reason).inc(0);
    }
  }

  /** Run before each scrape: folds counts kept on the frame path into the metrics. */
  readonly beforeScrape = new Set<() => void>();

  private health: { ready: () => boolean; storeKind: string; storeUp: () => boolean } | undefined;

  readonly ready: Gauge = new Gauge({
    name: 'awp_edge_ready',
    help: 'Whether this replica takes new sessions (1) or not (0: draining, or its session store is unreachable), as /readyz answers.',
    registers: [this.registry],
    collect: (): void => {
      if (this.health !== undefined) this.ready.set(this.health.ready() ? 1 : 0);
    },
  });

  readonly storeUp: Gauge<'kind'> = new Gauge({
    name: 'awp_edge_store_up',
    help: 'Whether the session store is reachable (1) or not (0), by kind (memory, redis).',
    labelNames: ['kind'] as const,
    registers: [this.registry],
    collect: (): void => {
      if (this.health !== undefined)
        this.storeUp.labels(this.health.storeKind).set(this.health.storeUp() ? 1 : 0);
    },
  });

  /** Where the readiness gauges read from (the edge, once started). */
  watchHealth(ready: () => boolean, store: { kind: string; up: () => boolean }): void {
    this.health = { ready, storeKind: store.kind, storeUp: store.up };
  }

  /**
   * `processPrefix`: prefix of prom-client's default process and Node.js metrics; none by default, so
   * they keep their standard names (`process_cpu_seconds_total`, `nodejs_eventloop_lag_p99_seconds`)
   * and stock Node.js dashboards and alerts work.
   */
  constructor(options: { defaults?: boolean; processPrefix?: string } = {}) {
    if (options.defaults !== false)
      collectDefaultMetrics({ register: this.registry, prefix: options.processPrefix ?? '' });
  }

  async exposition(): Promise<{ contentType: string; body: string }> {
    for (const f of this.beforeScrape) f();
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
