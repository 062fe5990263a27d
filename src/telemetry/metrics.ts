/**
 * Prometheus metrics of the edge. Labels are bounded: route, channel name, direction, binding,
 * outcome, method, reason, kind, state — never a session id or a token.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** From 10 us to 10 s: fine enough for sub-millisecond forwarding, wide enough for stalls. */
const LATENCY_BUCKETS = [
  0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
  0.5, 1, 2.5, 10,
];

/** `received`: a frame arrived from a world (once, before fan-out); the rest are per subscriber. */
export type FrameOutcome =
  'received' | 'forwarded' | 'replaced' | 'downsampled' | 'dropped_slow' | 'malformed';
export type Direction = 'world_to_agent' | 'agent_to_world';
export type SessionKind = 'relay' | 'observer';

export class EdgeMetrics {
  readonly registry = new Registry();

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

  readonly frames = new Counter({
    name: 'awp_edge_frames_total',
    help: 'Frames by outcome: received from a world (once), then per subscriber forwarded, replaced, downsampled, dropped_slow or malformed.',
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

  readonly upstreamConnections = new Gauge({
    name: 'awp_edge_upstream_connections',
    help: 'Open connections from the edge to worlds, by kind (control, stream, hub).',
    labelNames: ['route', 'kind'] as const,
    registers: [this.registry],
  });

  readonly upstreamFailures = new Counter({
    name: 'awp_edge_upstream_failures_total',
    help: 'Failed dials and lost connections toward worlds, by kind and reason.',
    labelNames: ['route', 'kind', 'reason'] as const,
    registers: [this.registry],
  });

  readonly agentConnections = new Gauge({
    name: 'awp_edge_agent_connections',
    help: 'Open agent-facing connections, by kind (control, stream).',
    labelNames: ['route', 'kind'] as const,
    registers: [this.registry],
  });

  /** Run before each scrape: folds counts kept on the frame path into the metrics. */
  readonly beforeScrape = new Set<() => void>();

  constructor(options: { defaults?: boolean } = {}) {
    if (options.defaults !== false) collectDefaultMetrics({ register: this.registry, prefix: 'awp_edge_' });
  }

  async exposition(): Promise<{ contentType: string; body: string }> {
    for (const f of this.beforeScrape) f();
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
