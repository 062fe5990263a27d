/**
 * An observer session the edge serves itself (AWP-EMB-004): the edge owns what a world would — its
 * session_id, token, status_seq sequence and replay journal, heartbeats, telemetry, subscriptions —
 * while frames and world events come from the route's shared upstream session (the hub).
 */
import { awpError } from '../protocol/errors.js';
import { findMessageIntegerRangeViolation } from '../protocol/integers.js';
import { errorText, parseMessage, type JsonRpcId } from '../protocol/jsonrpc.js';
import { ReplayJournal } from '../relay/journal.js';
import type { StreamEndpoint } from '../relay/relay-session.js';
import type { OutboxObserver, Sink } from './outbox.js';
import { Subscriber, type SubscribedChannel } from './subscriber.js';
import type { ChannelDecl, UpstreamGrant } from './hub-upstream.js';

/** What an observer session needs from the hub serving it. */
export interface ObserverHost {
  readonly route: string;
  readonly mode: 'streaming' | 'lockstep';
  manifestJson(): string;
  channelDecl(name: string): ChannelDecl | undefined;
  upstreamGrant(name: string): UpstreamGrant | undefined;
  /** The edge's estimate of the upstream session clock (ns), or undefined before any sample. */
  sessionNow(nowMs: number): number | undefined;
  readyFields(): {
    heartbeat_interval_ms: number;
    reconnect_window_ms: number;
    clock_anchor?: string;
    tick?: number;
  };
  /** Makes the upstream session carry these channels at these rates; `done(false)` if it cannot. */
  ensureChannels(
    wants: readonly { channel: string; rate_hz: number | null }[],
    done: (ok: boolean) => void,
  ): void;
  /** An observer's subscriptions changed: the hub may narrow its upstream subscription. */
  subscriptionsChanged(): void;
  /** Sends the channel's current state (cached keyframe with resync, then what followed). */
  startChannel(observer: ObserverSession, channel_id: number): void;
  endpoints(publicBase: string): StreamEndpoint[];
  ended(observer: ObserverSession): void;
  /** Metrics and logs. */
  note(
    event: 'opened' | 'resumed' | 'suspended' | 'closed' | 'refused',
    session: ObserverSession,
    detail?: string,
  ): void;
  /** Told of every frame written to, or replaced for, an observer on its control connection. */
  readonly frameObserver: OutboxObserver;
}

export interface ObserverConnection {
  readonly sink: Sink;
  close(code: number, reason: string): void;
  readonly publicBase: string;
}

export interface ObserverLimits {
  readonly high_water_bytes: number;
  readonly max_queued_bytes: number;
}

type State = 'opening' | 'ready' | 'active' | 'suspended' | 'closed';

const HB_ID = 'awp-edge:hb:';

export class ObserverSession {
  state: State = 'opening';
  readonly journal = new ReplayJournal();
  private seq = 0;
  private conn: ObserverConnection | null = null;
  sub: Subscriber | null = null;
  private readonly wants = new Map<string, { rate_hz: number | null }>();
  private grants = new Map<string, SubscribedChannel>();
  /** The last seq delivered per channel while detached: a resumed session continues above it (AWP-DAT-001). */
  private positions = new Map<number, number>();
  private lastHeard = 0;
  private lastPing = 0;
  private lastTelemetry = 0;
  private suspendedAt = 0;
  private hb = 0;

  constructor(
    readonly session_id: string,
    readonly token: string,
    private readonly host: ObserverHost,
    private readonly limits: ObserverLimits,
    /** From the agent's initialize: what it can consume and how fast (AWP-AGM-001/002). */
    private readonly modalities: readonly string[],
    private readonly maxObsRateHz: number | undefined,
  ) {}

  get attached(): boolean {
    return this.conn !== null;
  }

  // ------------------------------------------------------------------ open and resume

  /** `session.open` without an embodiment, handed over by the relay connection that received it. */
  open(conn: ObserverConnection, id: JsonRpcId, params: Record<string, unknown>, now: number): void {
    this.attach(conn, now);
    if (params.mode !== this.host.mode) {
      this.refuseOpen(
        id,
        awpError('AWP_TIME_MODEL_UNSUPPORTED', `this hub serves ${this.host.mode} observers`),
      );
      return;
    }
    const requested = Array.isArray(params.subscribe)
      ? (params.subscribe as { channel?: unknown; rate_hz?: unknown }[])
      : [];
    const problem = this.checkChannels(requested);
    if (problem !== null) {
      this.refuseOpen(id, problem);
      return;
    }
    for (const r of requested)
      this.wants.set(r.channel as string, { rate_hz: typeof r.rate_hz === 'number' ? r.rate_hz : null });
    this.host.ensureChannels(this.wantList(), (ok) => {
      if (this.state === 'closed' || this.conn !== conn) return;
      if (!ok) {
        this.refuseOpen(
          id,
          awpError('AWP_EMBODIMENT_UNAVAILABLE', {
            detail: 'the world did not grant the channels',
            retryable: true,
          }),
        );
        return;
      }
      this.regrant();
      this.send(JSON.stringify({ jsonrpc: '2.0', id, result: this.ready(false) }));
      this.state = 'ready';
      this.notify('session.state', { state: 'ready', ts_mono_ns: this.clock(now), reason: 'opened' });
      this.host.note('opened', this);
      for (const g of this.grants.values()) this.host.startChannel(this, g.channel_id);
    });
  }

  /**
   * `session.resume` naming this session, on a new connection (AWP-CTL-005, AWP-SES-010); returns how
   * many notifications it replayed.
   */
  resume(conn: ObserverConnection, id: JsonRpcId, lastStatusSeq: number, now: number): number {
    if (this.conn !== null) {
      // The old connection's loss was not detected yet: replace it (AWP-SES-010).
      this.conn.close(1000, 'connection replaced');
      this.detach('connection_replaced', now);
    }
    this.attach(conn, now);
    this.journal.acknowledge(lastStatusSeq);
    const replayTo = this.seq;
    this.send(
      JSON.stringify({ jsonrpc: '2.0', id, result: { ...this.ready(true), replay_to_status_seq: replayTo } }),
    );
    const replay = this.journal.replay(lastStatusSeq, replayTo);
    for (const t of replay) this.send(t);
    this.state = 'active';
    this.notify('session.state', { state: 'active', ts_mono_ns: this.clock(now), reason: 'resumed' });
    this.host.note('resumed', this);
    for (const g of this.grants.values()) this.host.startChannel(this, g.channel_id);
    return replay.length;
  }

  private ready(resumed: boolean): Record<string, unknown> {
    const f = this.host.readyFields();
    this.hb = f.heartbeat_interval_ms;
    return {
      session_id: this.session_id,
      session_token: this.token,
      reconnect_window_ms: f.reconnect_window_ms,
      heartbeat_interval_ms: f.heartbeat_interval_ms,
      granted: { channels: this.grantList(), action_types: [], admin: [], envelopes: [] },
      stream_endpoints: this.host.endpoints(this.conn!.publicBase),
      ...(f.clock_anchor !== undefined ? { clock_anchor: f.clock_anchor } : {}),
      ...(f.tick !== undefined ? { tick: f.tick } : {}),
      ...(resumed ? { safe_state: false } : {}),
    };
  }

  private refuseOpen(id: JsonRpcId, error: ReturnType<typeof awpError>): void {
    this.send(errorText(id, error));
    this.host.note('refused', this, error.message);
    this.state = 'closed';
    this.conn = null;
    this.sub = null;
    this.host.ended(this);
  }

  private attach(conn: ObserverConnection, now: number): void {
    this.conn = conn;
    this.lastHeard = now;
    this.lastPing = now;
    this.lastTelemetry = now;
    const sub = new Subscriber(
      conn.sink,
      this.limits.high_water_bytes,
      this.limits.max_queued_bytes,
      this.host.frameObserver,
    );
    for (const g of this.grants.values()) sub.subscribe(g, this.positions.get(g.channel_id));
    this.sub = sub;
  }

  // ------------------------------------------------------------------ the observer's messages

  fromAgent(text: string, now: number): void {
    if (this.conn === null) return;
    this.lastHeard = now;
    const msg = parseMessage(text);
    if (msg.kind === 'invalid') {
      if (!msg.wasResponse) this.send(errorText(msg.id, msg.error));
      return;
    }
    const violation = findMessageIntegerRangeViolation(msg);
    if (violation !== null) {
      // AWP-CTL-009: answer, end the session, close with 1002.
      if (msg.kind === 'request')
        this.send(errorText(msg.id, awpError('AWP_INTEGER_RANGE', `${violation} exceeds 2^53 - 1`)));
      this.close('protocol_error', now, 1002, 'AWP_INTEGER_RANGE');
      return;
    }
    if (msg.kind === 'notification') {
      if (msg.method === 'cmd.frame') return; // observers have no command channels
      return; // obs.report and vendor notifications are accepted (AWP-OBS-007)
    }
    if (msg.kind !== 'request') return; // pongs to the edge's pings: liveness only
    const id = msg.id;
    const p = (msg.params ?? {}) as Record<string, unknown>;
    switch (msg.method) {
      case 'ping':
        if (typeof p.last_status_seq === 'number') this.journal.acknowledge(p.last_status_seq);
        return this.pong(id, p.origin_ns, now);
      case 'initialize':
      case 'world.manifest':
        return this.send(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${this.host.manifestJson()}}`);
      case 'session.open':
      case 'session.resume':
        return this.send(
          errorText(id, awpError('AWP_SESSION_EXISTS', 'this connection already carries a session')),
        );
      case 'session.close':
        // The result follows `session.state: closed` (AWP-SES-011), before the session lets go of the connection.
        return this.close(
          'session_closed',
          now,
          1000,
          'session closed',
          JSON.stringify({ jsonrpc: '2.0', id, result: {} }),
        );
      case 'obs.subscribe':
        return this.subscribe(id, p);
      case 'obs.unsubscribe':
        return this.unsubscribe(id, p);
      case 'action.submit':
      case 'world.snapshot':
      case 'world.restore':
      case 'world.reset':
      case 'session.transfer':
      case 'task.update':
        return this.send(
          errorText(id, awpError('AWP_FORBIDDEN', 'observer sessions cannot act (AWP-EMB-004)')),
        );
      case 'world.tick':
        return this.send(
          errorText(id, awpError('AWP_TICK_NOT_AUTHORIZED', 'observer sessions have no tick authority')),
        );
      case 'action.cancel':
      case 'action.status':
        return this.send(errorText(id, awpError('AWP_ACTION_UNKNOWN', 'observer sessions have no actions')));
      default:
        return this.send(
          errorText(id, { code: -32601, message: 'Method not found', data: { detail: msg.method } }),
        );
    }
  }

  private pong(id: JsonRpcId, origin: unknown, now: number): void {
    const at = this.clock(now);
    this.send(
      JSON.stringify({
        jsonrpc: '2.0',
        id,
        result: { origin_ns: typeof origin === 'number' ? origin : 0, receive_ns: at, transmit_ns: at },
      }),
    );
  }

  private subscribe(id: JsonRpcId, p: Record<string, unknown>): void {
    const requested = Array.isArray(p.channels)
      ? (p.channels as { channel?: unknown; rate_hz?: unknown }[])
      : [];
    const problem = this.checkChannels(requested);
    if (problem !== null) return this.send(errorText(id, problem));
    const added: string[] = [];
    for (const r of requested) {
      const name = r.channel as string;
      if (!this.wants.has(name)) added.push(name);
      this.wants.set(name, { rate_hz: typeof r.rate_hz === 'number' ? r.rate_hz : null });
    }
    const conn = this.conn;
    this.host.ensureChannels(this.wantList(), (ok) => {
      if (this.conn !== conn || this.state === 'closed') return;
      if (!ok)
        return this.send(
          errorText(id, awpError('AWP_CHANNEL_UNKNOWN', 'the world did not grant the channel')),
        );
      this.regrant();
      this.send(JSON.stringify({ jsonrpc: '2.0', id, result: { granted: this.grantList() } }));
      // The first frame on a new channel is its current keyframe (AWP-OBS-004/005).
      for (const name of added) {
        const g = this.grants.get(name);
        if (g !== undefined) this.host.startChannel(this, g.channel_id);
      }
    });
  }

  private unsubscribe(id: JsonRpcId, p: Record<string, unknown>): void {
    const names = Array.isArray(p.channels) ? (p.channels as unknown[]) : [];
    for (const n of names) {
      if (typeof n !== 'string' || this.host.channelDecl(n) === undefined) {
        return this.send(errorText(id, awpError('AWP_CHANNEL_UNKNOWN', `${String(n)} is not declared`)));
      }
    }
    for (const n of names as string[]) this.wants.delete(n);
    this.regrant();
    this.send(JSON.stringify({ jsonrpc: '2.0', id, result: { granted: this.grantList() } }));
    this.host.subscriptionsChanged(); // other observers are unaffected (AWP-MA-004)
  }

  /** 2007 for undeclared channels, 4001 for ones whose modality this agent did not declare (AWP-NEG-004). */
  private checkChannels(
    requested: readonly { channel?: unknown; rate_hz?: unknown }[],
  ): ReturnType<typeof awpError> | null {
    for (const r of requested) {
      const decl = typeof r.channel === 'string' ? this.host.channelDecl(r.channel) : undefined;
      if (decl === undefined) return awpError('AWP_CHANNEL_UNKNOWN', `${String(r.channel)} is not declared`);
      if (!this.modalities.includes(decl.modality)) {
        return awpError(
          'AWP_FORBIDDEN',
          `${decl.id} carries ${decl.modality}, which the agent did not declare it consumes`,
        );
      }
    }
    return null;
  }

  /**
   * What the hub must carry for this observer: its desired rates, not capped by what the hub holds now,
   * so an observer asking more than the others makes the hub re-rate upstream (the union at the highest rate).
   */
  private wantList(): { channel: string; rate_hz: number | null }[] {
    return [...this.wants].map(([channel, w]) => ({
      channel,
      rate_hz: this.desiredRate(channel, w.rate_hz),
    }));
  }

  /** At most what it asked, what the world declared, and its max_obs_rate_hz; reliable: the declared rate. */
  private desiredRate(channel: string, requested: number | null): number | null {
    const decl = this.host.channelDecl(channel);
    if (decl === undefined || decl.rate_hz === null) return null;
    if (decl.loss_class === 'reliable') return decl.rate_hz;
    let rate = Math.min(requested ?? decl.rate_hz, decl.rate_hz);
    if (this.maxObsRateHz !== undefined) rate = Math.min(rate, this.maxObsRateHz);
    return rate;
  }

  /**
   * The rate this observer gets: its desired rate, capped by what the world granted the hub; reliable
   * channels are never downsampled (that would be loss), so they come at the hub's rate; per-tick
   * channels have none.
   */
  private grantedRate(channel: string, requested: number | null): number | null {
    const desired = this.desiredRate(channel, requested);
    if (desired === null) return null;
    const upstream = this.host.upstreamGrant(channel)?.rate_hz ?? null;
    if (this.host.channelDecl(channel)?.loss_class === 'reliable') return upstream ?? desired;
    return upstream === null ? desired : Math.min(desired, upstream);
  }

  /** Recomputes the exact grant list (AWP-NEG-001) from what is wanted and what the hub holds. */
  private regrant(): void {
    const grants = new Map<string, SubscribedChannel>();
    for (const [name, w] of this.wants) {
      const decl = this.host.channelDecl(name);
      const up = this.host.upstreamGrant(name);
      if (decl === undefined || up === undefined) continue;
      const rate = this.grantedRate(name, w.rate_hz);
      grants.set(name, {
        name,
        channel_id: up.channel_id,
        rate_hz: rate,
        latest_wins: decl.loss_class === 'latest-wins',
        per_tick: rate === null,
        stale_after_ms: decl.stale_after_ms ?? (decl.rate_hz ? 2000 / decl.rate_hz : 1000),
      });
    }
    for (const old of this.grants.values()) if (!grants.has(old.name)) this.sub?.unsubscribe(old.channel_id);
    for (const g of grants.values()) this.sub?.subscribe(g);
    this.grants = grants;
  }

  private grantList(): { channel: string; rate_hz: number | null; channel_id: number }[] {
    return [...this.grants.values()].map((g) => ({
      channel: g.name,
      rate_hz: g.rate_hz,
      channel_id: g.channel_id,
    }));
  }

  /** Channel ids and rates this observer needs from the hub. */
  needs(): IterableIterator<SubscribedChannel> {
    return this.grants.values();
  }

  // ------------------------------------------------------------------ world events, frames, timers

  /** A world.event of the shared upstream session, re-sequenced into this session (AWP-EVT-001). */
  worldEvent(params: Record<string, unknown>): void {
    if (this.state === 'closed' || this.state === 'opening') return;
    const rest = { ...params };
    delete rest.status_seq;
    this.notify('world.event', rest);
  }

  /** The reliable channel could not be delivered for longer than its stale_after_ms (AWP-SAF-009). */
  channelDegraded(channel: SubscribedChannel, now: number): void {
    if (this.state === 'closed') return;
    this.notify('world.event', {
      event: 'channel_degraded',
      ts_mono_ns: this.clock(now),
      detail: { channel: channel.name, channel_id: channel.channel_id, cause: 'subscriber stream overflow' },
    });
  }

  /** Called after a frame reached this observer: the first one makes the session active. */
  firstActivity(now: number): void {
    if (this.state !== 'ready') return;
    this.state = 'active';
    this.notify('session.state', { state: 'active', ts_mono_ns: this.clock(now), reason: 'first_activity' });
  }

  tickTimers(now: number): void {
    if (this.state === 'closed' || this.state === 'opening') return;
    if (this.conn === null) {
      const window = this.host.readyFields().reconnect_window_ms;
      if (now - this.suspendedAt >= window) this.close('window_expired', now);
      return;
    }
    if (this.hb > 0) {
      if (now - this.lastHeard >= 3 * this.hb) {
        // Three silent intervals: the connection is lost (AWP-SAF-002).
        const c = this.conn;
        this.detach('connection_lost', now);
        c.close(1001, 'heartbeat lost');
        return;
      }
      if (now - this.lastPing >= this.hb) {
        this.lastPing = now;
        this.send(
          JSON.stringify({
            jsonrpc: '2.0',
            id: `${HB_ID}${Math.round(now)}`,
            method: 'ping',
            params: { origin_ns: this.clock(now) },
          }),
        );
      }
    }
    if (this.host.mode === 'streaming' && now - this.lastTelemetry >= 1000) this.telemetry(now);
  }

  /** session.telemetry at least once a second in streaming (AWP-TIM-006), over what this observer got. */
  private telemetry(now: number): void {
    const window_ms = Math.max(1, Math.round(now - this.lastTelemetry));
    this.lastTelemetry = now;
    const channels: Record<string, unknown> = {};
    const taken = this.sub?.takeTelemetry();
    for (const [id, stats] of taken?.channels ?? []) {
      if (stats !== undefined) channels[String(id)] = stats;
    }
    // Over every observation frame sent in the window, all channels together (AWP-TIM-006).
    const all = taken?.overall;
    this.send(
      JSON.stringify({
        jsonrpc: '2.0',
        method: 'session.telemetry',
        params: { window_ms, ...(all !== undefined ? { observation_latency_ns: all, channels } : {}) },
      }),
    );
  }

  /** The observer's control connection closed. */
  connectionLost(now: number): void {
    if (this.conn === null) return;
    this.detach('connection_lost', now);
  }

  private detach(reason: 'connection_lost' | 'connection_replaced', now: number): void {
    if (this.state === 'closed') return;
    this.sub?.closeStream(1001, 'session suspended');
    if (this.sub !== null) this.positions = this.sub.positions();
    this.conn = null;
    this.sub = null;
    this.suspendedAt = now;
    if (this.state === 'opening') {
      this.close('connection_lost', now);
      return;
    }
    this.state = 'suspended';
    this.notify('session.state', { state: 'suspended', ts_mono_ns: this.clock(now), reason });
    this.host.note('suspended', this, reason);
  }

  close(reason: string, now: number, code = 1000, closeReason = 'session closed', finalText?: string): void {
    if (this.state === 'closed') return;
    const wasAttached = this.conn !== null;
    if (wasAttached) this.notify('session.state', { state: 'closed', ts_mono_ns: this.clock(now), reason });
    if (finalText !== undefined) this.send(finalText);
    this.state = 'closed';
    this.sub?.closeStream(1000, 'session closed');
    // Nothing drains this outbox once the session lets go of it: hand the last messages to the engine.
    this.sub?.control.flushAll();
    if (code !== 1000 && this.conn !== null) this.conn.close(code, closeReason);
    this.conn = null;
    this.sub = null;
    this.host.note('closed', this, reason);
    this.host.ended(this);
  }

  // ------------------------------------------------------------------ plumbing

  private notify(method: string, params: Record<string, unknown>): void {
    const status_seq = ++this.seq;
    const text = JSON.stringify({ jsonrpc: '2.0', method, params: { ...params, status_seq } });
    this.journal.append(status_seq, text);
    this.journal.markDurable(status_seq);
    this.send(text);
  }

  private send(text: string): void {
    if (this.sub === null || this.conn === null) return;
    if (this.sub.control.push(text, false) === 'overflow') {
      const c = this.conn;
      this.detach('connection_lost', this.lastHeard);
      c.close(1008, 'send queue full');
    }
  }

  private clock(now: number): number {
    return Math.max(0, Math.round(this.host.sessionNow(now) ?? 0));
  }
}
