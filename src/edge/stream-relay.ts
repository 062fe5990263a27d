/**
 * One `ws` stream connection relayed frame by frame (AWP-TRN-013): the agent's side authenticated
 * with the edge's session token, the world's side with the world's. Frames pass as the buffers they
 * arrived in after a header-only peek; nothing is decoded or re-encoded.
 */
import { Outbox } from '../fanout/outbox.js';
import { createFrameHeader, FrameError, peekFrame } from '../protocol/frame.js';
import type { RelaySession } from '../relay/relay-session.js';
import { CommandPacer } from '../policy/command-pacer.js';
import type { ConnectionHandlers, ServerConnection } from '../transport/engine.js';
import { dialUpstream, type UpstreamConnection } from '../transport/upstream.js';
import type { EdgeContext } from './context.js';
import { FrameMetrics } from '../telemetry/frame-metrics.js';

const MALFORMED = 'AWP_MALFORMED';

export class StreamRelay implements ConnectionHandlers {
  private agent: ServerConnection | null = null;
  private agentOut: Outbox | null = null;
  private upstreamOut!: Outbox;
  private upstream!: UpstreamConnection;
  private readonly early: Buffer[] = [];
  private readonly header = createFrameHeader();
  private unbind: () => void = () => undefined;
  private done = false;
  private readonly toAgentMetrics: FrameMetrics;
  private readonly toWorldMetrics: FrameMetrics;

  private constructor(
    private readonly ctx: EdgeContext,
    private readonly session: RelaySession,
  ) {
    const route = session.record.route;
    this.toAgentMetrics = new FrameMetrics(ctx.metrics, route, 'ws', 'world_to_agent', ctx.now);
    this.toWorldMetrics = new FrameMetrics(ctx.metrics, route, 'ws', 'agent_to_world', ctx.now);
  }

  private get route(): string {
    return this.session.record.route;
  }

  /** The channel name of the frame just peeked (a metric label). */
  private channel(): string {
    return this.session.channels.get(this.header.channel_id)?.name ?? 'unknown';
  }

  /** Dials the world's stream endpoint before the agent's upgrade completes (a failure is an HTTP 502). */
  static async open(ctx: EdgeContext, session: RelaySession, url: string): Promise<StreamRelay> {
    const relay = new StreamRelay(ctx, session);
    const t = ctx.config;
    relay.upstream = await dialUpstream(
      {
        url,
        credential: session.record.upstream_token,
        connectTimeoutMs: t.timing.upstream_connect_timeout_ms,
        maxMessageBytes: t.transport.max_message_bytes,
        pingIntervalMs: t.timing.hop_ping_interval_ms,
      },
      {
        message: (data, binary) => relay.fromUpstream(data, binary),
        drain: () => relay.upstreamOut.drain(),
        close: () => relay.end(1001, 'world stream connection closed'),
      },
    );
    relay.upstreamOut = new Outbox(
      relay.upstream,
      t.transport.high_water_bytes,
      t.transport.max_queued_bytes,
      relay.toWorldMetrics,
    );
    relay.unbind = ctx.registry.bind(session.token, relay);
    ctx.metrics.upstreamConnections.labels(relay.route, 'stream').inc();
    return relay;
  }

  /** The agent's side is up: flush frames that arrived during the handshake. */
  attach(agent: ServerConnection): ConnectionHandlers {
    this.agent = agent;
    const t = this.ctx.config.transport;
    this.agentOut = new Outbox(agent, t.high_water_bytes, t.max_queued_bytes, this.toAgentMetrics);
    this.ctx.metrics.agentConnections.labels(this.route, 'stream').inc();
    for (const buf of this.early.splice(0)) this.fromUpstream(buf, true);
    return this;
  }

  // ---------------------------------------------------------------- agent -> world

  message(data: string | Uint8Array, binary: boolean): void {
    if (this.done) return;
    if (!binary) return this.end(1002, MALFORMED, 'agent sent a text message on a stream connection');
    const buf = data as Buffer;
    if (!this.valid(buf)) {
      this.toWorldMetrics.count('unknown', 'malformed', buf.length);
      return this.end(1002, MALFORMED, 'agent sent a malformed frame');
    }
    const channel = this.latestWins();
    const rate = channel === undefined ? null : (this.session.channels.get(channel)?.rate_hz ?? null);
    if (channel !== undefined && rate !== null) {
      // Command frames within the channel's granted rate, the oldest waiting one dropped first.
      const paced = this.pacer.offer(channel, rate, this.ctx.now(), buf);
      if (paced === 'replaced') this.toWorldMetrics.count(this.channel(), 'replaced', buf.length);
      if (paced !== 'send') return this.schedulePacer();
    }
    this.toWorld(buf, channel);
  }

  private toWorld(buf: Buffer, latestWinsChannel: number | undefined): void {
    const note = { received_at: this.ctx.now(), channel: this.channel() };
    if (this.upstreamOut.push(buf, true, latestWinsChannel, note) === 'overflow') {
      this.end(1008, 'world stopped reading command frames');
    }
  }

  private readonly pacer = new CommandPacer<Buffer>();
  private pacerTimer: NodeJS.Timeout | undefined;

  /** Writes the waiting command frames whose slot has come, and sets a timer for the next one. */
  private schedulePacer(): void {
    if (this.pacerTimer !== undefined || this.done) return;
    const { frames, next } = this.pacer.due(this.ctx.now());
    for (const buf of frames) this.toWorld(buf, peekFrame(buf, this.header).channel_id);
    if (next === undefined) return;
    this.pacerTimer = setTimeout(
      () => {
        this.pacerTimer = undefined;
        this.schedulePacer();
      },
      Math.max(0, next - this.ctx.now()),
    );
  }

  drain(): void {
    this.agentOut?.drain();
  }

  close(): void {
    this.agent = null;
    this.end(1001, 'agent stream connection lost');
  }

  /** The session's control connection ended: both sides of the stream go too (AWP-TRN-008). */
  terminate(code: number, reason: string): void {
    this.end(code, reason);
  }

  // ---------------------------------------------------------------- world -> agent

  private fromUpstream(data: string | Buffer, binary: boolean): void {
    if (this.done) return;
    if (!binary || !this.valid(data as Buffer)) {
      // The world broke the stream: it is closed on both hops; the agent may reconnect (AWP-TRN-010).
      this.toAgentMetrics.count('unknown', 'malformed', data.length);
      this.upstream.close(1002, MALFORMED);
      return this.end(1014, 'world sent a malformed frame');
    }
    const buf = data as Buffer;
    if (this.agentOut === null) {
      this.early.push(buf);
      return;
    }
    const h = this.header;
    const channel = this.channel();
    this.toAgentMetrics.observeAge(
      channel,
      h.ts_mono_ns,
      h.has_ts_send_ns ? h.ts_send_ns : undefined,
      this.session.clock.sessionNow(Math.round(this.ctx.now() * 1e6)),
    );
    if (
      this.agentOut.push(buf, true, this.latestWins(), { received_at: this.ctx.now(), channel }) ===
      'overflow'
    ) {
      // A reliable channel cannot drop: the agent loses this stream connection and resyncs when it
      // reconnects; closing the world's side too makes the world restart it with a resync keyframe.
      this.toAgentMetrics.count(channel, 'dropped_slow', buf.length);
      this.end(1008, 'agent stopped reading its stream connection');
    }
  }

  /** Header-only check (AWP-DAT-010); clears reserved flag bits in place (AWP-DAT-005). */
  private valid(buf: Buffer): boolean {
    try {
      peekFrame(buf, this.header);
    } catch (err) {
      if (err instanceof FrameError) return false;
      throw err;
    }
    buf[5] = buf[5]! & 0x0f;
    return true;
  }

  /** The channel of the frame just peeked, if a newer frame may replace it while the socket is busy. */
  private latestWins(): number | undefined {
    const id = this.header.channel_id;
    return this.session.latestWins(id) ? id : undefined;
  }

  private end(code: number, reason: string, detail?: string): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.pacerTimer);
    this.unbind();
    if (detail !== undefined) {
      this.ctx.log.info({
        event: 'stream_closed',
        route: this.route,
        session_id: this.session.record.session_id,
        detail,
      });
    }
    this.ctx.metrics.upstreamConnections.labels(this.route, 'stream').dec();
    if (this.agentOut !== null) this.ctx.metrics.agentConnections.labels(this.route, 'stream').dec();
    this.upstreamOut.flushAll();
    this.upstream.close(code === 1002 ? 1000 : 1001, 'agent side of the stream closed');
    if (this.agent !== null) {
      this.agentOut?.flushAll();
      this.agent.close(code, reason);
    }
  }
}
