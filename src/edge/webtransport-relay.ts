/**
 * A relay agent's `webtransport` stream connection, relayed frame by frame to the world's `ws` stream
 * endpoint (the binding an agent uses need not be the world's). World frames go out on one
 * unidirectional stream per channel (independent flow control); the agent's command frames arrive on
 * streams it opens, back to back (or one per datagram), and are forwarded as one `ws` binary message
 * each after a header-only peek (AWP-TRN-013, AWP-DAT-010), paced on latest-wins command channels as
 * the `ws` stream relay paces them. Malformed input closes the session with code 1002, reason
 * `AWP_MALFORMED`: the `ws` close's code and reason, carried as the WebTransport close info.
 */
import { ChannelStreams } from '../fanout/webtransport-sink.js';
import { Outbox } from '../fanout/outbox.js';
import { CommandPacer } from '../policy/command-pacer.js';
import { createFrameHeader, FrameError, peekFrame } from '../protocol/frame.js';
import type { RelaySession } from '../relay/relay-session.js';
import { FrameMetrics } from '../telemetry/frame-metrics.js';
import { dialUpstream, type UpstreamConnection } from '../transport/upstream.js';
import { FrameSplitter, FrameTooLarge } from '../transport/webtransport-framing.js';
import { readIncomingStreams, type WebTransportSession } from '../transport/webtransport.js';
import type { EdgeContext } from './context.js';

const MALFORMED = 'AWP_MALFORMED';

export class WebTransportRelay {
  private agent: WebTransportSession | null = null;
  private streams: ChannelStreams | null = null;
  private upstreamOut!: Outbox;
  private upstream!: UpstreamConnection;
  private readonly early: Buffer[] = [];
  private earlyBytes = 0;
  private readonly header = createFrameHeader();
  private readonly splitters = new Map<object, FrameSplitter>();
  private unbind: () => void = () => undefined;
  private done = false;
  private readonly pacer = new CommandPacer<Buffer>();
  private pacerTimer: NodeJS.Timeout | undefined;

  private readonly toAgentMetrics: FrameMetrics;
  private readonly toWorldMetrics: FrameMetrics;

  private constructor(
    private readonly ctx: EdgeContext,
    private readonly session: RelaySession,
    /** Largest frame either side may send on this endpoint (AWP-TRN-011). */
    private readonly maxFrameBytes: number,
  ) {
    const route = session.record.route;
    this.toAgentMetrics = new FrameMetrics(ctx.metrics, route, 'webtransport', 'world_to_agent', ctx.now);
    this.toWorldMetrics = new FrameMetrics(ctx.metrics, route, 'webtransport', 'agent_to_world', ctx.now);
  }

  private get route(): string {
    return this.session.record.route;
  }

  /** The channel name of the frame just peeked (a metric label). */
  private channel(): string {
    return this.session.channels.get(this.header.channel_id)?.name ?? 'unknown';
  }

  /** Dials the world's stream endpoint before the agent's session is accepted (a failure refuses it). */
  static async open(
    ctx: EdgeContext,
    session: RelaySession,
    url: string,
    maxFrameBytes: number,
  ): Promise<WebTransportRelay> {
    const relay = new WebTransportRelay(ctx, session, maxFrameBytes);
    const c = ctx.config;
    relay.upstream = await dialUpstream(
      {
        url,
        credential: session.record.upstream_token,
        connectTimeoutMs: c.timing.upstream_connect_timeout_ms,
        maxMessageBytes: c.transport.max_message_bytes,
        pingIntervalMs: c.timing.hop_ping_interval_ms,
      },
      {
        message: (data, binary) => relay.fromWorld(data, binary),
        drain: () => relay.upstreamOut.drain(),
        close: () => relay.end(1001, 'world stream connection closed'),
      },
    );
    relay.upstreamOut = new Outbox(
      relay.upstream,
      c.transport.high_water_bytes,
      c.transport.max_queued_bytes,
      relay.toWorldMetrics,
    );
    relay.unbind = ctx.registry.bind(session.token, relay);
    ctx.metrics.upstreamConnections.labels(relay.route, 'stream').inc();
    return relay;
  }

  /** The agent's session is up: frames that arrived meanwhile go first. */
  attach(agent: WebTransportSession): void {
    if (this.done) {
      agent.close({ closeCode: 1001, reason: 'world stream connection closed' });
      return;
    }
    this.agent = agent;
    const t = this.ctx.config.transport;
    this.streams = new ChannelStreams(
      agent,
      t.high_water_bytes,
      t.max_queued_bytes,
      this.toAgentMetrics,
      () => this.end(1011, 'stream write to the agent failed'),
    );
    agent.closed.then(
      () => this.agentGone(),
      () => this.agentGone(),
    );
    readIncomingStreams(agent, {
      chunk: (stream, data) => this.fromAgent(stream, data),
      end: (stream) => this.agentStreamEnded(stream),
      datagram: (data) => this.datagramFromAgent(data),
    });
    for (const buf of this.early.splice(0)) this.fromWorld(buf, true);
  }

  /** The agent never completed its session: release the world's side. */
  abandon(): void {
    this.end(1001, 'agent did not complete its session');
  }

  /** The session's control connection ended or was suspended: both sides go too (AWP-TRN-008). */
  terminate(code: number, reason: string): void {
    this.end(code, reason);
  }

  // ---------------------------------------------------------------- agent -> world

  private fromAgent(stream: object, data: Uint8Array): void {
    if (this.done) return;
    let splitter = this.splitters.get(stream);
    if (splitter === undefined)
      this.splitters.set(stream, (splitter = new FrameSplitter(this.maxFrameBytes)));
    let frames: Buffer[];
    try {
      frames = splitter.push(data);
    } catch (err) {
      if (err instanceof FrameTooLarge) return this.end(1009, 'frame exceeds max_frame_bytes', err.message);
      if (err instanceof FrameError)
        return this.end(1002, MALFORMED, `agent sent a malformed frame: ${err.message}`);
      throw err;
    }
    for (const buf of frames) {
      if (!this.commandFrame(buf)) return;
    }
  }

  /** A datagram holds exactly one frame (a frame too large for one goes on a stream, spec 1.3). */
  private datagramFromAgent(data: Uint8Array): void {
    if (this.done) return;
    this.commandFrame(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  }

  /** One command frame toward the world, as the `ws` stream relay does it; false once the relay ended. */
  private commandFrame(buf: Buffer): boolean {
    if (!this.valid(buf)) {
      this.toWorldMetrics.count('unknown', 'malformed', buf.length);
      this.end(1002, MALFORMED, 'agent sent a malformed frame');
      return false;
    }
    const channel = this.latestWins();
    const rate = channel === undefined ? null : (this.session.channels.get(channel)?.rate_hz ?? null);
    if (channel !== undefined && rate !== null) {
      // Command frames within the channel's granted rate, the oldest waiting one dropped first.
      const paced = this.pacer.offer(channel, rate, this.ctx.now(), buf);
      if (paced === 'replaced') this.toWorldMetrics.count(this.channel(), 'replaced', buf.length);
      if (paced !== 'send') {
        this.schedulePacer();
        return true;
      }
    }
    return this.toWorld(buf, channel);
  }

  private toWorld(buf: Buffer, latestWinsChannel: number | undefined): boolean {
    const note = { received_at: this.ctx.now(), channel: this.channel() };
    if (this.upstreamOut.push(buf, true, latestWinsChannel, note) === 'overflow') {
      this.end(1008, 'world stopped reading command frames');
      return false;
    }
    return true;
  }

  private schedulePacer(): void {
    if (this.pacerTimer !== undefined || this.done) return;
    const { frames, next } = this.pacer.due(this.ctx.now());
    // A slot may have opened since the frame was offered: those frames go now, not into the void.
    for (const buf of frames) if (!this.toWorld(buf, peekFrame(buf, this.header).channel_id)) return;
    if (next === undefined) return;
    this.pacerTimer = setTimeout(
      () => {
        this.pacerTimer = undefined;
        if (this.done) return;
        for (const buf of this.pacer.due(this.ctx.now()).frames) {
          if (!this.toWorld(buf, peekFrame(buf, this.header).channel_id)) return;
        }
        this.schedulePacer();
      },
      Math.max(0, next - this.ctx.now()),
    );
  }

  private agentStreamEnded(stream: object): void {
    const splitter = this.splitters.get(stream);
    this.splitters.delete(stream);
    try {
      splitter?.end();
    } catch {
      this.end(1002, MALFORMED, 'agent stream ended inside a frame');
    }
  }

  private agentGone(): void {
    this.agent = null;
    this.end(1001, 'agent stream connection lost');
  }

  // ---------------------------------------------------------------- world -> agent

  private fromWorld(data: string | Buffer, binary: boolean): void {
    if (this.done) return;
    if (!binary || !this.valid(data as Buffer)) {
      // The world broke the stream: closed on both hops; the agent may reconnect (AWP-TRN-010).
      this.toAgentMetrics.count('unknown', 'malformed', data.length);
      this.upstream.close(1002, MALFORMED);
      return this.end(1014, 'world sent a malformed frame');
    }
    const buf = data as Buffer;
    if (this.streams === null) {
      this.early.push(buf);
      this.earlyBytes += buf.length;
      if (this.earlyBytes > this.ctx.config.transport.max_queued_bytes)
        this.end(1008, 'agent did not complete its session');
      return;
    }
    const h = this.header;
    const channel = this.channel();
    const sessionNow = this.session.clock.sessionNow(Math.round(this.ctx.now() * 1e6));
    this.toAgentMetrics.observeAge(
      channel,
      h.ts_mono_ns,
      h.has_ts_send_ns ? h.ts_send_ns : undefined,
      sessionNow,
    );
    const note = { received_at: this.ctx.now(), channel };
    if (this.streams.push(h.channel_id, buf, this.latestWins() !== undefined, note) === 'overflow') {
      // A reliable channel cannot drop: the agent loses this stream connection and resyncs on reconnect.
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

  /** The channel of the frame just peeked, if a newer frame may replace it while its stream is busy. */
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
        binding: 'webtransport',
        route: this.route,
        session_id: this.session.record.session_id,
        detail,
      });
    }
    this.ctx.metrics.upstreamConnections.labels(this.route, 'stream').dec();
    this.upstreamOut.flushAll();
    this.upstream.close(code === 1002 ? 1000 : 1001, 'agent side of the stream closed');
    this.streams?.close();
    this.agent?.close({ closeCode: code, reason });
    this.agent = null;
  }
}
