/**
 * The channel hub of one route and time model: one upstream observer session feeding any number of
 * observer sessions the edge serves itself. The upstream subscription is the union of what the
 * observers need, at the highest rate any was granted; each observer is downsampled to its own rate,
 * and one observer's subscriptions, slowness or errors never change what another receives (AWP-MA-004).
 */
import { randomBytes } from 'node:crypto';
import { createFrameHeader, encodeFrame, peekFrame, FrameError } from '../protocol/frame.js';
import { inlineToFrame } from '../protocol/inline-frame.js';
import type { StreamEndpoint } from '../relay/relay-session.js';
import type { FrameMetrics } from '../telemetry/frame-metrics.js';
import { dialUpstream, type UpstreamConnection } from '../transport/upstream.js';
import { HubUpstream, type ChannelDecl, type HubUpstreamEffect, type UpstreamGrant } from './hub-upstream.js';
import { KeyframeCache, type HubFrame } from './keyframe-cache.js';
import { ObserverSession, type ObserverConnection, type ObserverHost } from './observer-session.js';
import type { StreamSink, SubscribedChannel } from './subscriber.js';
import type { FrameNote } from './outbox.js';

type HubFrameMetrics = Pick<FrameMetrics, 'count' | 'observeAge' | 'received' | 'written' | 'replaced'>;

/** What a hub needs from the edge around it. */
export interface HubContext {
  readonly route: string;
  readonly upstreamUrl: string;
  readonly upstreamToken: string | undefined;
  readonly connectTimeoutMs: number;
  readonly maxMessageBytes: number;
  readonly pingIntervalMs: number;
  readonly highWaterBytes: number;
  readonly maxQueuedBytes: number;
  /** How long the upstream session outlives the last observer. */
  readonly lingerMs: number;
  now(): number;
  mintToken(): string;
  /** The edge's own stream endpoints for observers of this route. */
  endpoints(publicBase: string): StreamEndpoint[];
  /** Frame metrics of this route's observers: outcomes, forward latency of inline frames, ages. */
  readonly frames: HubFrameMetrics;
  /** Connections and failures toward the world (`kind` hub: control; stream: the ws stream). */
  upstream(kind: 'hub' | 'stream', delta: 1 | -1): void;
  upstreamFailed(kind: 'hub' | 'stream'): void;
  rejected(reason: string): void;
  noteSession(event: string, session: ObserverSession, detail?: string): void;
  log(level: 'info' | 'warn', fields: Record<string, unknown>, message: string): void;
  /** The hub is done (idle past its linger, or its upstream failed). */
  retired(hub: ChannelHub): void;
}

export class ChannelHub {
  private readonly upstream: HubUpstream;
  private control: UpstreamConnection | null = null;
  private stream: UpstreamConnection | null = null;
  private readonly observers = new Map<string, ObserverSession>();
  private readonly byChannel = new Map<number, Set<ObserverSession>>();
  private readonly cache = new KeyframeCache();
  private readonly waiting: {
    wants: { channel: string; rate_hz: number | null }[];
    done: (ok: boolean) => void;
  }[] = [];
  private readonly header = createFrameHeader();
  private readonly degradedDue = new Map<ObserverSession, { at: number; channels: SubscribedChannel[] }>();
  private emptySince: number | null = null;
  private retired = false;
  private readonly names = new Map<number, string>();

  constructor(
    readonly mode: 'streaming' | 'lockstep',
    private readonly ctx: HubContext,
  ) {
    this.upstream = new HubUpstream(mode, () => this.union());
  }

  get size(): number {
    return this.observers.size;
  }

  sessions(): IterableIterator<ObserverSession> {
    return this.observers.values();
  }

  /** An observer's token, if it names one of this hub's sessions. */
  observer(token: string): ObserverSession | undefined {
    return this.observers.get(token);
  }

  // ------------------------------------------------------------------ observers arriving

  open(
    conn: ObserverConnection,
    id: string | number,
    params: Record<string, unknown>,
    initialize: Record<string, unknown> | undefined,
  ): ObserverSession {
    const modalities = Array.isArray(initialize?.consumes_modalities)
      ? (initialize.consumes_modalities as unknown[]).filter((m): m is string => typeof m === 'string')
      : [];
    const maxRate = typeof initialize?.max_obs_rate_hz === 'number' ? initialize.max_obs_rate_hz : undefined;
    const session = new ObserverSession(
      `edge-obs-${randomBytes(6).toString('hex')}`,
      this.ctx.mintToken(),
      this.host(),
      { high_water_bytes: this.ctx.highWaterBytes, max_queued_bytes: this.ctx.maxQueuedBytes },
      modalities,
      maxRate,
    );
    this.observers.set(session.token, session);
    this.emptySince = null;
    this.run(this.upstream.start());
    if (this.upstream.isReady) session.open(conn, id, params, this.ctx.now());
    else this.whenReady(() => session.open(conn, id, params, this.ctx.now()));
    return session;
  }

  private readonly onReady: (() => void)[] = [];
  private whenReady(f: () => void): void {
    this.onReady.push(f);
  }

  // ------------------------------------------------------------------ the host interface

  private host(): ObserverHost {
    const up = this.upstream;
    return {
      route: this.ctx.route,
      mode: this.mode,
      manifestJson: () => JSON.stringify(up.manifest ?? {}),
      channelDecl: (name) => up.channels.get(name),
      upstreamGrant: (name) => up.grants.get(name),
      sessionNow: (nowMs) => up.sessionNow(Math.round(nowMs * 1e6)),
      readyFields: () => ({
        heartbeat_interval_ms: up.heartbeat_interval_ms,
        reconnect_window_ms: up.reconnect_window_ms,
        ...(up.clock_anchor !== undefined ? { clock_anchor: up.clock_anchor } : {}),
        ...(up.tick !== undefined ? { tick: up.tick } : {}),
      }),
      ensureChannels: (wants, done) => this.ensure(wants, done),
      subscriptionsChanged: () => this.reindex(true),
      startChannel: (observer, channel_id) => this.startChannel(observer, channel_id),
      endpoints: (base) => this.ctx.endpoints(base),
      ended: (observer) => this.ended(observer),
      note: (event, session, detail) => this.ctx.noteSession(event, session, detail),
      frameObserver: this.ctx.frames,
    };
  }

  /** Makes the upstream subscription cover `wants` (added to every observer's needs). */
  private ensure(
    wants: readonly { channel: string; rate_hz: number | null }[],
    done: (ok: boolean) => void,
  ): void {
    if (!this.upstream.isReady) {
      this.waiting.push({ wants: [...wants], done });
      return;
    }
    const missing = this.missing(wants);
    if (missing.length === 0) {
      done(true);
      this.reindex(false);
      return;
    }
    this.run(
      this.upstream.subscribe(missing, this.ctx.now(), (ok) => {
        done(ok);
        this.reindex(false);
      }),
    );
  }

  /** Channels (or higher latest-wins rates) the upstream session does not carry yet. */
  private missing(
    wants: readonly { channel: string; rate_hz: number | null }[],
  ): { channel: string; rate_hz?: number }[] {
    const out: { channel: string; rate_hz?: number }[] = [];
    for (const w of wants) {
      const decl = this.upstream.channels.get(w.channel);
      const grant = this.upstream.grants.get(w.channel);
      if (decl === undefined) continue;
      const rate = upstreamRate(decl, w.rate_hz);
      if (grant === undefined || (rate !== undefined && grant.rate_hz !== null && grant.rate_hz < rate)) {
        out.push(rate === undefined ? { channel: w.channel } : { channel: w.channel, rate_hz: rate });
      }
    }
    return out;
  }

  /** What the hub's session subscribes at open: every observer's needs at the highest rate. */
  private union(): { channel: string; rate_hz?: number }[] {
    const best = new Map<string, number | undefined>();
    const consider = (channel: string, rate: number | null) => {
      const decl = this.upstream.channels.get(channel);
      const r = decl === undefined ? (rate ?? undefined) : upstreamRate(decl, rate);
      const prev = best.get(channel);
      best.set(channel, prev === undefined || (r !== undefined && r > prev) ? r : prev);
    };
    for (const w of this.waiting) for (const x of w.wants) consider(x.channel, x.rate_hz);
    for (const o of this.observers.values()) for (const g of o.needs()) consider(g.name, g.rate_hz);
    return [...best].map(([channel, rate_hz]) =>
      rate_hz === undefined ? { channel } : { channel, rate_hz },
    );
  }

  /** Rebuilds the channel -> observers index; `narrow` also drops upstream channels nobody needs. */
  private reindex(narrow: boolean): void {
    this.byChannel.clear();
    const needed = new Set<string>();
    for (const o of this.observers.values()) {
      for (const g of o.needs()) {
        needed.add(g.name);
        let set = this.byChannel.get(g.channel_id);
        if (set === undefined) this.byChannel.set(g.channel_id, (set = new Set()));
        set.add(o);
      }
    }
    if (!narrow || !this.upstream.isReady) return;
    const unused = [...this.upstream.grants.keys()].filter((n) => !needed.has(n));
    if (unused.length > 0) {
      for (const n of unused) {
        const g = this.upstream.grants.get(n);
        if (g !== undefined) this.cache.forget(g.channel_id);
      }
      this.run(this.upstream.unsubscribe(unused, this.ctx.now()));
    }
  }

  private startChannel(observer: ObserverSession, channel_id: number): void {
    const now = this.ctx.now();
    const note = { received_at: now, channel: this.names.get(channel_id) ?? 'unknown' };
    for (const f of this.cache.startFor(channel_id)) this.offer(observer, f, note, true);
  }

  private ended(observer: ObserverSession): void {
    this.observers.delete(observer.token);
    this.degradedDue.delete(observer);
    this.reindex(true);
    if (this.observers.size === 0) this.emptySince = this.ctx.now();
  }

  // ------------------------------------------------------------------ upstream

  private run(effects: readonly HubUpstreamEffect[]): void {
    for (const e of effects) {
      switch (e.kind) {
        case 'dial':
          this.dialControl();
          break;
        case 'send':
          this.control?.send(e.text, false);
          break;
        case 'close':
          this.control?.close(e.code, e.reason);
          this.stream?.close(1000, e.reason);
          break;
        case 'ready':
          this.upstreamReady(e.resumed);
          break;
        case 'grants':
          this.names.clear();
          for (const g of e.grants) this.names.set(g.channel_id, g.channel);
          break;
        case 'event':
          for (const o of this.observers.values()) o.worldEvent(e.params);
          break;
        case 'frame':
          this.inlineFrame(e.params);
          break;
        case 'failed':
          this.fail(e.reason);
          break;
      }
    }
  }

  private dialControl(): void {
    dialUpstream(
      {
        url: this.ctx.upstreamUrl,
        credential: this.ctx.upstreamToken,
        connectTimeoutMs: this.ctx.connectTimeoutMs,
        maxMessageBytes: this.ctx.maxMessageBytes,
        pingIntervalMs: this.ctx.pingIntervalMs,
      },
      {
        message: (data, binary) => {
          if (!binary) this.run(this.upstream.fromUpstream(data as string, this.ctx.now()));
        },
        drain: () => undefined,
        close: () => {
          this.control = null;
          this.ctx.upstream('hub', -1);
          this.stream?.close(1000, 'control connection lost');
          if (!this.retired) this.run(this.upstream.lost());
        },
      },
    ).then(
      (conn) => {
        if (this.retired) return conn.close(1000, 'hub retired');
        this.control = conn;
        this.ctx.upstream('hub', 1);
        this.run(this.upstream.connected(this.ctx.now()));
      },
      (err: unknown) => {
        this.ctx.upstreamFailed('hub');
        this.run(this.upstream.dialFailed(`cannot reach the world: ${(err as Error).message}`));
      },
    );
  }

  private upstreamReady(resumed: boolean): void {
    this.ctx.log(
      'info',
      { route: this.ctx.route, event: 'hub_ready', mode: this.mode, resumed },
      'observer hub session ready',
    );
    const ws = this.upstream.endpoints.find((e) => e.binding === 'ws' && typeof e.url === 'string');
    if (ws !== undefined) this.dialStream(ws.url!);
    for (const f of this.onReady.splice(0)) f();
    for (const w of this.waiting.splice(0)) this.ensure(w.wants, w.done);
    this.reindex(false);
  }

  private dialStream(url: string): void {
    dialUpstream(
      {
        url,
        credential: this.upstream.token ?? undefined,
        connectTimeoutMs: this.ctx.connectTimeoutMs,
        maxMessageBytes: this.ctx.maxMessageBytes,
        pingIntervalMs: this.ctx.pingIntervalMs,
      },
      {
        message: (data, binary) => {
          if (binary) this.binaryFrame(data as Buffer);
        },
        drain: () => undefined,
        close: () => {
          this.stream = null;
          this.ctx.upstream('stream', -1);
          // Reconnect while the control connection is up; the world restarts reliable channels with resync.
          if (!this.retired && this.control !== null && this.upstream.isReady)
            setTimeout(() => this.dialStream(url), 200).unref();
        },
      },
    ).then(
      (conn) => {
        if (this.retired || this.control === null) return conn.close(1000, 'hub retired');
        this.stream = conn;
        this.ctx.upstream('stream', 1);
      },
      (err: unknown) => {
        this.ctx.upstreamFailed('stream');
        this.ctx.log(
          'warn',
          { route: this.ctx.route, event: 'hub_stream_unavailable', detail: String(err) },
          'frames stay inline',
        );
      },
    );
  }

  private fail(reason: string): void {
    this.ctx.log(
      'warn',
      { route: this.ctx.route, event: 'hub_failed', reason },
      'observer hub lost its upstream session',
    );
    this.retire();
    for (const f of this.onReady.splice(0)) f(); // let waiting opens answer (they will see no grants)
    for (const w of this.waiting.splice(0)) w.done(false);
    for (const o of [...this.observers.values()])
      o.close('world_shutdown', this.ctx.now(), 1011, 'world session lost');
  }

  private retire(): void {
    if (this.retired) return;
    this.retired = true;
    this.control?.close(1000, 'hub retired');
    this.stream?.close(1000, 'hub retired');
    this.cache.clear();
    this.ctx.retired(this);
  }

  // ------------------------------------------------------------------ frames

  private binaryFrame(buf: Buffer): void {
    try {
      peekFrame(buf, this.header);
    } catch (err) {
      if (!(err instanceof FrameError)) throw err;
      this.ctx.frames.count('unknown', 'malformed', buf.length);
      return; // AWP-DAT-010: dropped, never forwarded
    }
    buf[5] = buf[5]! & 0x0f; // senders zero reserved flag bits (AWP-DAT-005)
    const h = this.header;
    if (h.has_tick) this.upstream.observeStamp(h.tick, h.ts_mono_ns);
    this.fanOut({
      buf,
      channel_id: h.channel_id,
      seq: h.seq,
      ts_mono_ns: h.ts_mono_ns,
      ts_send_ns: h.has_ts_send_ns ? h.ts_send_ns : undefined,
      flags: h.flags,
    });
  }

  private inlineFrame(params: Record<string, unknown>): void {
    let frame;
    try {
      frame = inlineToFrame(params);
    } catch (err) {
      if (!(err instanceof FrameError)) throw err;
      this.ctx.frames.count('unknown', 'malformed', 0);
      return;
    }
    const buf = encodeFrame(frame);
    this.fanOut({
      buf,
      channel_id: frame.channel_id,
      seq: frame.seq,
      ts_mono_ns: frame.ts_mono_ns,
      ts_send_ns: frame.ts_send_ns,
      flags: frame.flags,
      inline: Buffer.from(JSON.stringify({ jsonrpc: '2.0', method: 'obs.frame', params })),
    });
  }

  private fanOut(frame: HubFrame): void {
    this.cache.add(frame);
    const now = this.ctx.now();
    const channel = this.names.get(frame.channel_id) ?? 'unknown';
    this.ctx.frames.received(channel, frame.buf.length);
    this.ctx.frames.observeAge(
      channel,
      frame.ts_mono_ns,
      frame.ts_send_ns,
      this.upstream.sessionNow(Math.round(now * 1e6)),
    );
    const subs = this.byChannel.get(frame.channel_id);
    if (subs === undefined) return;
    const note = { received_at: now, channel }; // one per frame, shared by every subscriber
    for (const o of subs) this.offer(o, frame, note, false);
  }

  private offer(o: ObserverSession, frame: HubFrame, note: FrameNote, start: boolean): void {
    const sub = o.sub;
    if (sub === null) return;
    const { channel, received_at: now } = note;
    const outcome = sub.deliver(frame, note, start);
    switch (outcome) {
      case 'forwarded':
        o.firstActivity(now);
        break;
      case 'downsampled':
        this.ctx.frames.count(channel, 'downsampled', frame.buf.length);
        break;
      case 'overflow-stream': {
        // A reliable channel cannot drop: this observer loses its stream connection and resyncs when
        // it reconnects; after stale_after_ms it hears channel_degraded (AWP-SAF-009, AWP-TRN-010).
        this.ctx.frames.count(channel, 'dropped_slow', frame.buf.length);
        sub.closeStream(1008, 'stream connection overflowed');
        const lost = [...sub.subscribed()].filter((c) => !c.latest_wins);
        if (lost.length > 0)
          this.degradedDue.set(o, {
            at: now + Math.max(...lost.map((c) => c.stale_after_ms)),
            channels: lost,
          });
        break;
      }
      case 'overflow-control':
        this.ctx.frames.count(channel, 'dropped_slow', frame.buf.length);
        this.ctx.rejected('send_queue_full');
        o.close('connection_lost', now, 1008, 'send queue full');
        break;
      default:
        break;
    }
  }

  /** An observer's stream connection: every channel moves onto it, each starting from its keyframe. */
  attachStream(o: ObserverSession, sink: StreamSink): void {
    const sub = o.sub;
    if (sub === null) return sink.close(1008, 'session has no live control connection');
    sub.attachStream(sink);
    this.degradedDue.delete(o);
    for (const c of [...sub.subscribed()]) this.startChannel(o, c.channel_id);
  }

  streamLost(o: ObserverSession, sink: StreamSink): void {
    const lost = o.sub?.streamLost(sink) ?? [];
    if (lost.length === 0 || o.sub === null) return;
    const channels = [...o.sub.subscribed()].filter((c) => lost.includes(c.channel_id));
    this.degradedDue.set(o, {
      at: this.ctx.now() + Math.max(...channels.map((c) => c.stale_after_ms)),
      channels,
    });
  }

  // ------------------------------------------------------------------ time

  tick(now: number): void {
    if (this.retired) return;
    this.run(this.upstream.tickTimers(now));
    for (const o of [...this.observers.values()]) o.tickTimers(now);
    for (const [o, due] of this.degradedDue) {
      if (now < due.at) continue;
      this.degradedDue.delete(o);
      if (o.sub !== null && !o.sub.hasStream) for (const c of due.channels) o.channelDegraded(c, now);
    }
    if (this.observers.size === 0 && this.emptySince !== null && now - this.emptySince >= this.ctx.lingerMs) {
      this.run(this.upstream.close(now));
      this.retire();
    }
  }

  /** Shutdown: observers are dropped (their sessions end with this process). */
  shutdown(): void {
    for (const o of [...this.observers.values()])
      o.close('world_shutdown', this.ctx.now(), 1001, 'edge shutting down');
    this.retire();
  }

  manifestChannels(): ReadonlyMap<string, ChannelDecl> {
    return this.upstream.channels;
  }

  grants(): ReadonlyMap<string, UpstreamGrant> {
    return this.upstream.grants;
  }
}

/** The rate the hub asks upstream for an observer's need: latest-wins at the need; reliable at the declared rate. */
function upstreamRate(decl: ChannelDecl, rate: number | null): number | undefined {
  if (decl.rate_hz === null) return undefined;
  if (decl.loss_class === 'reliable') return decl.rate_hz;
  return rate ?? decl.rate_hz;
}
