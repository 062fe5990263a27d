/**
 * A relay agent's stream connection bridged to the world's `ws` stream endpoint (AWP-TRN-013), whatever
 * binding the agent uses: the world side is dialled with the world's session token; frames pass as the
 * buffers they arrived in after a header-only peek (AWP-DAT-010), latest-wins frames may be replaced
 * while a socket is busy, and the agent's command frames are paced to their channel's granted rate.
 * The agent side (a `ws` connection, a WebTransport session) is a small sink the binding supplies.
 */
import { Outbox, type FrameNote, type PushOutcome } from '../../transport/outbox.js';
import { createFrameHeader, FrameError, peekFrame } from '../../protocol/frame.js';
import type { RelaySession } from '../relay-session.js';
import { FrameMetrics } from '../../telemetry/frame-metrics.js';
import { dialUpstream, type UpstreamConnection } from '../../transport/upstream.js';
import type { StreamContext } from './stream-context.js';
import { PacedWriter } from './paced-writer.js';

export const MALFORMED = 'AWP_MALFORMED';

/** The agent's side of a bridged stream connection. */
export interface AgentStreamSink {
  push(buf: Buffer, channel_id: number, latestWins: boolean, note: FrameNote): PushOutcome;
  close(code: number, reason: string): void;
}

/**
 * Each session's live stream connection per world endpoint. A newer one replaces it (an agent may
 * reconnect its stream at any time, AWP-TRN-010), so one session token cannot make the edge hold, and
 * dial the world for, any number of them.
 */
const live = new WeakMap<RelaySession, Map<string, StreamBridge>>();

export class StreamBridge {
  private agent: AgentStreamSink | null = null;
  /** The world's side, once dialled; until then command frames wait in `worldOut`. */
  private world: UpstreamConnection | null = null;
  private readonly worldOut: Outbox;
  private readonly early: Buffer[] = [];
  private earlyBytes = 0;
  private replayingEarly = false;
  private readonly header = createFrameHeader();
  private readonly paced: PacedWriter<Buffer>;
  private readonly unbind: () => void;
  private ended = false;
  /** Settles when the world's stream endpoint answers: resolved when connected, rejected with a DialError. */
  readonly ready: Promise<void>;
  readonly toAgentMetrics: FrameMetrics;
  readonly toWorldMetrics: FrameMetrics;

  /**
   * Starts dialling the world's stream endpoint with the world's session token. The agent's side may be
   * accepted at once (its command frames wait, bounded, until the world answers) or after `ready`.
   */
  constructor(
    private readonly ctx: StreamContext,
    private readonly session: RelaySession,
    private readonly url: string,
    private readonly binding: string,
  ) {
    let streams = live.get(session);
    if (streams === undefined) live.set(session, (streams = new Map<string, StreamBridge>()));
    streams.get(url)?.end(1000, 'replaced by a newer stream connection');
    streams.set(url, this);
    const route = session.record.route;
    const c = ctx.config;
    this.toAgentMetrics = FrameMetrics.for(ctx.metrics, route, binding, 'world_to_agent', ctx.now);
    this.toWorldMetrics = FrameMetrics.for(ctx.metrics, route, binding, 'agent_to_world', ctx.now);
    this.paced = new PacedWriter(ctx.now, (buf) => this.toWorld(buf, peekFrame(buf, this.header).channel_id));
    const worldBuffered = () => (this.world === null ? Infinity : this.world.bufferedAmount);
    this.worldOut = new Outbox(
      {
        send: (data, binary) => this.world?.send(data, binary),
        // Not dialled yet: everything waits here (latest-wins frames replaced, the rest bounded).
        get bufferedAmount() {
          return worldBuffered();
        },
      },
      c.transport.high_water_bytes,
      c.transport.max_queued_bytes,
      this.toWorldMetrics,
    );
    // The session's control connection ending (or suspending) ends its streams too (AWP-TRN-008).
    this.unbind = ctx.registry.bind(session.token, { terminate: (code, reason) => this.end(code, reason) });
    session.streamDialStarted();
    this.ready = dialUpstream(
      {
        url,
        credential: session.record.upstream_token,
        connectTimeoutMs: c.timing.upstream_connect_timeout_ms,
        maxMessageBytes: c.transport.max_message_bytes,
        pingIntervalMs: c.timing.hop_ping_interval_ms,
        onFault: ctx.fault,
      },
      {
        message: (data, binary) => this.fromWorld(data, binary),
        drain: () => this.worldOut.drain(),
        close: () => this.end(1001, 'world stream connection closed'),
      },
    ).then(
      (world) => {
        session.streamDialSettled();
        if (this.ended) return world.close(1000, 'agent side of the stream closed');
        this.world = world;
        ctx.metrics.upstreamCensus.open(this, route, 'stream');
        this.worldOut.drain();
      },
      (err: unknown) => {
        session.streamDialSettled();
        ctx.metrics.upstreamFailures.labels(route, 'stream', 'unreachable').inc();
        this.end(1014, 'world stream endpoint unavailable', String(err));
        throw err;
      },
    );
    this.ready.catch(() => undefined); // the failure is handled above; awaiting `ready` is optional
  }

  get done(): boolean {
    return this.ended;
  }

  private get route(): string {
    return this.session.record.route;
  }

  /** The agent's side is up: frames that arrived during its handshake go first. */
  attach(agent: AgentStreamSink): void {
    if (this.ended) return agent.close(1001, 'world stream connection closed');
    this.agent = agent;
    this.ctx.metrics.agentCensus.open(this, this.route, 'stream');
    this.replayingEarly = true; // recorded when they arrived
    for (const buf of this.early.splice(0)) this.fromWorld(buf, true);
    this.replayingEarly = false;
  }

  // ---------------------------------------------------------------- agent -> world

  /** One frame from the agent; false once the bridge has ended. */
  fromAgent(buf: Buffer): boolean {
    if (this.ended) return false;
    if (!this.valid(buf)) {
      this.toWorldMetrics.count('unknown', 'malformed', buf.length);
      this.end(1002, MALFORMED, 'agent sent a malformed frame');
      return false;
    }
    this.ctx.recordFrame?.(this.session, 'agent', buf, this.header, this.binding);
    const channel = this.latestWins();
    const rate = channel === undefined ? null : (this.session.channels.get(channel)?.rate_hz ?? null);
    if (channel !== undefined && rate !== null) {
      // Command frames within the channel's granted rate, the oldest waiting one dropped first.
      const paced = this.paced.offer(channel, rate, buf);
      if (paced === 'replaced') this.toWorldMetrics.count(this.channel(), 'replaced', buf.length);
      if (paced !== 'send') return true;
    }
    return this.toWorld(buf, channel);
  }

  private toWorld(buf: Buffer, latestWinsChannel: number | undefined): boolean {
    const note = { received_at: this.ctx.now(), channel: this.channel() };
    if (this.worldOut.push(buf, true, latestWinsChannel, note) === 'overflow') {
      this.end(1008, 'world stopped reading command frames');
      return false;
    }
    return true;
  }

  // ---------------------------------------------------------------- world -> agent

  private fromWorld(data: string | Uint8Array, binary: boolean): void {
    if (this.ended) return;
    if (!binary || !this.valid(data as Buffer)) {
      // The world broke the stream: it is closed on both hops; the agent may reconnect (AWP-TRN-010).
      this.toAgentMetrics.count('unknown', 'malformed', data.length);
      this.world?.close(1002, MALFORMED);
      return this.end(1014, 'world sent a malformed frame');
    }
    const buf = data as Buffer;
    if (!this.replayingEarly) this.ctx.recordFrame?.(this.session, 'world', buf, this.header, this.binding);
    if (this.agent === null) {
      this.early.push(buf);
      this.earlyBytes += buf.length;
      if (this.earlyBytes > this.ctx.config.transport.max_queued_bytes)
        this.end(1008, 'agent did not complete its connection');
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
    if (this.agent.push(buf, h.channel_id, this.latestWins() !== undefined, note) === 'overflow') {
      // A reliable channel cannot drop: the agent loses this stream connection and resyncs when it
      // reconnects; closing the world's side too makes the world restart it with a resync keyframe.
      this.toAgentMetrics.count(channel, 'dropped_slow', buf.length);
      this.end(1008, 'agent stopped reading its stream connection');
    }
  }

  // ---------------------------------------------------------------- shared

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

  /** The channel of the frame just peeked, if a newer frame may replace it while a socket is busy. */
  private latestWins(): number | undefined {
    const id = this.header.channel_id;
    return this.session.latestWins(id) ? id : undefined;
  }

  /** The channel name of the frame just peeked (a metric label). */
  private channel(): string {
    return this.session.channels.get(this.header.channel_id)?.name ?? 'unknown';
  }

  /** The agent's side is gone (it closed, or never completed its handshake). */
  agentGone(reason: string): void {
    if (this.agent !== null) {
      this.ctx.metrics.agentCensus.close(this, this.route, 'stream');
      this.agent = null;
    }
    this.end(1001, reason);
  }

  /** Ends both sides: the agent's with `code`/`reason`, the world's as a normal close. */
  end(code: number, reason: string, detail?: string): void {
    if (this.ended) return;
    this.ended = true;
    const streams = live.get(this.session);
    if (streams?.get(this.url) === this) streams.delete(this.url);
    this.paced.stop();
    this.unbind();
    if (detail !== undefined) {
      this.ctx.log.info({
        event: 'stream_closed',
        binding: this.binding,
        route: this.route,
        session_id: this.session.record.session_id,
        detail,
      });
    }
    if (this.world !== null) {
      this.ctx.metrics.upstreamCensus.close(this, this.route, 'stream');
      this.worldOut.flushAll();
      this.world.close(code === 1002 ? 1000 : 1001, 'agent side of the stream closed');
    }
    if (this.agent !== null) {
      this.ctx.metrics.agentCensus.close(this, this.route, 'stream');
      this.agent.close(code, reason);
      this.agent = null;
    }
  }
}
