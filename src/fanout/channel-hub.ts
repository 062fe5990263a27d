/**
 * The channel hub of one route and time model: one upstream observer session feeding any number of
 * observer sessions the edge serves itself. The upstream subscription is the union of what the
 * observers need, at the highest rate any was granted; each observer is downsampled to its own rate,
 * and one observer's subscriptions, slowness or errors never change what another receives (AWP-MA-004).
 */
import { randomBytes } from 'node:crypto';
import { createFrameHeader } from '../protocol/frame.js';
import { binaryHubFrame, inlineHubFrame } from './hub-frames.js';
import type { StreamEndpoint } from '../session/stream-endpoint.js';
import type { FrameMetrics } from '../telemetry/frame-metrics.js';
import { FanoutScheduler } from './hub-fanout.js';
import type { SliceLoop } from '../transport/slice-loop.js';
import { SlicedPass } from '../transport/sliced-pass.js';
import { HubEvents } from './hub-events.js';
import { HubLink, type HubLinkContext } from './hub-link.js';
import { indexChannels, type ChannelIndex } from './hub-passes.js';
import type { UpstreamGrant } from './hub-channels.js';
import { HubSubscription } from './hub-subscription.js';
import { HubUpstream, type HubUpstreamEffect } from './hub-upstream.js';
import { HubTopics, TopicShard, targetWeight, type TopicTarget } from './hub-topics.js';
import { KeyframeCache, type HubFrame } from './keyframe-cache.js';
import { DegradedWatch } from './degraded-watch.js';
import type { ObserverHost } from './observer-effects.js';
import { persistOpened, restoredShell, type ClaimedObserver } from './observer-store.js';
import type { SessionStore } from '../session/session-store.js';
import { agentDeclarations } from './observer-messages.js';
import { ObserverSession } from './observer-session.js';
import { ObserverShell, type ObserverConnection, type ObserverHubSide } from './observer-shell.js';
import type { StreamSink } from './subscriber.js';
import type { FrameNote } from '../transport/outbox.js';

type HubFrameMetrics = Pick<FrameMetrics, 'count' | 'observeAge' | 'received' | 'written' | 'replaced'>;

/** What a hub needs from the edge around it. */
export interface HubContext extends HubLinkContext {
  readonly highWaterBytes: number;
  readonly maxJsonDepth: number;
  /** How long the upstream session outlives the last observer. */
  readonly lingerMs: number;
  /** A shared session store: observer sessions are stored there and resume at any replica. */
  readonly store?: SessionStore | undefined;
  now(): number;
  mintToken(): string;
  /** The edge's own stream endpoints for observers of this route. */
  endpoints(publicBase: string): StreamEndpoint[];
  /** Frame metrics of this route's observers: outcomes, forward latency of inline frames, ages. */
  readonly frames: HubFrameMetrics;
  rejected(reason: string): void;
  noteSession(event: string, session: ObserverShell, detail?: string): void;
  /** The hub is done (idle past its linger, or its upstream failed). */
  retired(hub: ChannelHub): void;
  /** The process's one budget per event-loop turn for fan-out and timer passes (transport/slice-loop.ts). */
  readonly slices: SliceLoop;
}

export class ChannelHub {
  private readonly upstream: HubUpstream;
  private readonly link: HubLink;
  /** What observer sessions read of the upstream session; the shells' way to the hub. */
  private readonly host: ObserverHost;
  private readonly side: ObserverHubSide;
  private readonly observers = new Map<string, ObserverShell>();
  /**
   * Subscribers by channel (new arrays on every change: passes keep the ones they started with). Rebuilt
   * when a frame next needs it (null: stale): a thousand observers subscribing at once cost one rebuild per
   * frame, not one per subscription (up to a third of the main thread in the seconds 1,819 joined).
   */
  private index: ChannelIndex<ObserverShell> | null = null;
  private readonly fanout: FanoutScheduler<TopicTarget<ObserverShell>>;
  /** The observers' heartbeats, telemetry and windows, in slices (transport/sliced-pass.ts). */
  private readonly timers: SlicedPass<ObserverShell>;
  /** World events on their way to the observers, in slices (hub-events.ts). */
  private readonly events: HubEvents<ObserverShell>;
  private readonly cache = new KeyframeCache();
  /** Opens and resumes that arrived before the upstream session was ready (run when it is, or fails). */
  private readonly opening: (() => void)[] = [];
  /** The upstream subscription: observers' requests for channels, and narrowing (hub-subscription.ts). */
  private readonly subscription: HubSubscription<ObserverShell>;
  private readonly header = createFrameHeader();
  private readonly degraded = new DegradedWatch<ObserverShell>();
  private emptySince: number | null = null;
  private retired = false;
  private readonly names = new Map<number, string>();
  /** Steady-state stream subscribers served with one publish per frame (uWS only; hub-topics.ts). */
  private readonly topics: HubTopics<ObserverShell> | null;

  constructor(
    readonly mode: 'streaming' | 'lockstep',
    private readonly ctx: HubContext,
  ) {
    this.upstream = new HubUpstream(
      mode,
      () => this.subscription.union(),
      ctx.maxJsonDepth,
      ctx.connectTimeoutMs,
    );
    this.subscription = new HubSubscription({
      upstream: this.upstream,
      observers: () => this.observers.values(),
      needed: () => this.channelIndex().needed,
      run: (effects) => this.run(effects),
      now: () => ctx.now(),
      dropped: (channel_id) => this.cache.forget(channel_id),
    });
    this.link = new HubLink(ctx, {
      connected: () => this.run(this.upstream.connected(this.ctx.now())),
      dialFailed: (detail) => this.run(this.upstream.dialFailed(detail)),
      message: (text) => this.run(this.upstream.fromUpstream(text, this.ctx.now())),
      frame: (buf) => this.binaryFrame(buf),
      controlLost: () => {
        this.subscription.lost();
        this.run(this.upstream.lost());
      },
      wantsStream: () => this.upstream.isReady,
    });
    this.host = this.upstream.observerHost((base) => ctx.endpoints(base));
    const now = () => ctx.now();
    this.fanout = new FanoutScheduler<TopicTarget<ObserverShell>>(
      (t, frame, note) => {
        if (t instanceof TopicShard) return t.publish(frame, note, now);
        this.offer(t, frame, note, false);
        return 0;
      },
      ctx,
      targetWeight,
    );
    this.timers = new SlicedPass('hub_timer', (o, now) => o.tickTimers(now), ctx);
    this.events = new HubEvents(ctx);
    // Lockstep frames are never superseded nor downsampled: only streaming hubs have topics.
    this.topics =
      mode === 'streaming'
        ? new HubTopics(`awp-hub-${randomBytes(6).toString('hex')}`, {
            highWaterBytes: ctx.highWaterBytes,
            frames: ctx.frames,
            declaredRate: (name) => this.upstream.channels.get(name)?.rate_hz,
          })
        : null;
    this.side = {
      mode,
      highWaterBytes: ctx.highWaterBytes,
      maxQueuedBytes: ctx.maxQueuedBytes,
      frameObserver: ctx.frames,
      ensureChannels: (shell, ref, wants) => this.subscription.ensure(shell, ref, wants),
      startChannel: (shell, channel_id) => this.startChannel(shell, channel_id),
      grantsChanged: () => this.reindex(false),
      subscriptionsChanged: () => this.reindex(true),
      ended: (shell) => this.ended(shell),
      // A stream lost on the old connection says nothing of the next, which restarts every channel.
      detached: (shell) => this.degraded.clear(shell),
      note: (event, shell, detail) => ctx.noteSession(event, shell, detail),
      ...(ctx.store !== undefined && {
        persist: (shell: ObserverShell) => persistOpened(ctx, mode, this.host, shell),
      }),
    };
  }

  get size(): number {
    return this.observers.size;
  }

  sessions(): IterableIterator<ObserverShell> {
    return this.observers.values();
  }

  /** An observer's token, if it names one of this hub's sessions. */
  observer(token: string): ObserverShell | undefined {
    return this.observers.get(token);
  }

  // ------------------------------------------------------------------ observers arriving

  open(
    conn: ObserverConnection,
    id: string | number,
    params: Record<string, unknown>,
    initialize: Record<string, unknown> | undefined,
  ): ObserverShell {
    const { modalities, maxObsRateHz } = agentDeclarations(initialize);
    const session = new ObserverSession<ObserverConnection>(
      `edge-obs-${randomBytes(6).toString('hex')}`,
      this.ctx.mintToken(),
      this.host,
      modalities,
      maxObsRateHz,
    );
    const shell = new ObserverShell(session, this.side);
    this.admit(shell, () => shell.open(conn, id, params, this.ctx.now()));
    return shell;
  }

  /** `session.resume` of a session the shared store holds (it was served by another replica). */
  restore(
    conn: ObserverConnection,
    id: string | number,
    lastStatusSeq: number,
    claimed: ClaimedObserver,
  ): ObserverShell {
    const shell = restoredShell(this.ctx, this.host, this.side, claimed);
    this.admit(shell, () => shell.resume(conn, id, lastStatusSeq, this.ctx.now()));
    return shell;
  }

  private admit(shell: ObserverShell, start: () => void): void {
    this.observers.set(shell.token, shell);
    this.emptySince = null;
    this.run(this.upstream.start());
    if (this.upstream.isReady) start();
    else this.opening.push(start);
  }

  // ------------------------------------------------------------------ the observers' effects

  /** The channel -> observers index is stale; `narrow`: some observer may need fewer channels. */
  private reindex(narrow: boolean): void {
    this.index = null;
    if (narrow) this.subscription.narrowLater();
  }

  private channelIndex(): ChannelIndex<ObserverShell> {
    return (this.index ??= indexChannels(this.observers.values()));
  }

  private startChannel(observer: ObserverShell, channel_id: number): void {
    const now = this.ctx.now();
    const note = { received_at: now, channel: this.names.get(channel_id) ?? 'unknown' };
    for (const f of this.cache.startFor(channel_id)) this.offer(observer, f, note, true);
  }

  private ended(observer: ObserverShell): void {
    this.observers.delete(observer.token);
    this.degraded.clear(observer);
    this.reindex(true);
    if (this.observers.size === 0) this.emptySince = this.ctx.now();
  }

  // ------------------------------------------------------------------ upstream

  private run(effects: readonly HubUpstreamEffect[]): void {
    for (const e of effects) {
      switch (e.kind) {
        case 'dial':
          this.link.dialControl();
          break;
        case 'send':
          this.link.send(e.text);
          break;
        case 'close':
          this.link.close(e.code, e.reason);
          break;
        case 'ready':
          this.upstreamReady(e.resumed);
          break;
        case 'grants':
          // Not cleared: frames of a channel being unsubscribed are still counted under its name.
          for (const g of e.grants) this.names.set(g.channel_id, g.channel);
          this.cache.retain((id) => this.granted(id));
          break;
        case 'subscribed':
          this.subscription.subscribed(e.ref, e.ok);
          break;
        case 'event':
          this.events.add(e.event, this.observers.values());
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

  private upstreamReady(resumed: boolean): void {
    this.ctx.log(
      'info',
      { route: this.ctx.route, event: 'hub_ready', mode: this.mode, resumed },
      'observer hub session ready',
    );
    const ws = this.upstream.endpoints.find((e) => e.binding === 'ws' && typeof e.url === 'string');
    if (ws !== undefined) this.link.dialStream(ws.url!, this.upstream.token ?? undefined);
    for (const start of this.opening.splice(0)) start();
    this.subscription.ready();
    this.reindex(false);
  }

  private fail(reason: string): void {
    this.ctx.log(
      'warn',
      { route: this.ctx.route, event: 'hub_failed', reason },
      'observer hub lost its upstream session',
    );
    this.events.flush(); // what the world said before it failed comes before the sessions' end
    this.retire();
    // Waiting opens are answered (they will see no grants).
    for (const start of this.opening.splice(0)) start();
    this.subscription.failed();
    for (const o of [...this.observers.values()])
      o.close('world_shutdown', this.ctx.now(), 1011, 'world session lost');
  }

  private retire(): void {
    if (this.retired) return;
    this.retired = true;
    this.link.retire();
    this.cache.clear();
    this.fanout.clear();
    this.timers.clear();
    this.events.clear();
    this.topics?.clear();
    this.ctx.retired(this);
  }

  // ------------------------------------------------------------------ frames

  private binaryFrame(buf: Buffer): void {
    const frame = binaryHubFrame(buf, this.header);
    if (frame === null) return this.ctx.frames.count('unknown', 'malformed', buf.length);
    if (this.header.has_tick) this.upstream.observeStamp(this.header.tick, this.header.ts_mono_ns);
    this.fanOut(frame);
  }

  private inlineFrame(params: Record<string, unknown>): void {
    const frame = inlineHubFrame(params);
    if (frame === null) return this.ctx.frames.count('unknown', 'malformed', 0);
    this.fanOut(frame);
  }

  /** Whether the upstream session holds channel `id` now. */
  private granted(id: number): boolean {
    const name = this.names.get(id);
    return name !== undefined && this.upstream.grants.get(name)?.channel_id === id;
  }

  private fanOut(frame: HubFrame): void {
    // A channel's first keyframe may overtake the world's answer granting it (two connections); other
    // frames of channels not granted are a world's mistake, not kept.
    if (this.granted(frame.channel_id) || this.subscription.asking) this.cache.add(frame);
    const now = this.ctx.now();
    const channel = this.names.get(frame.channel_id) ?? 'unknown';
    this.ctx.frames.received(channel, frame.buf.length);
    this.ctx.frames.observeAge(
      channel,
      frame.ts_mono_ns,
      frame.ts_send_ns,
      this.upstream.sessionNow(Math.round(now * 1e6)),
    );
    const index = this.channelIndex();
    const subs = index.targets.get(frame.channel_id);
    if (subs === undefined) return;
    const note = { received_at: now, channel }; // one per frame, shared by every subscriber
    // Observers, and shards of topic members (one publish each), in passes that yield to I/O (hub-fanout.ts).
    const targets = this.topics === null ? subs : this.topics.targets(frame, note, now, subs);
    // Lockstep frames are never superseded.
    const latest = this.mode === 'streaming' && index.latestWins.has(frame.channel_id);
    this.fanout.add(frame, note, targets, latest);
  }

  private offer(o: ObserverShell, frame: HubFrame, note: FrameNote, start: boolean): void {
    const sub = o.sub;
    if (sub === null) return;
    const { channel, received_at: now } = note;
    const outcome = sub.deliver(frame, note, start);
    switch (outcome) {
      case 'forwarded':
        o.firstActivity(now);
        if (!start) this.topics?.consider(o, sub, frame);
        break;
      case 'downsampled':
        this.ctx.frames.count(channel, 'downsampled', frame.buf.length);
        break;
      case 'overflow-stream': {
        // A reliable channel cannot drop: this observer loses its stream connection and resyncs when
        // it reconnects; after stale_after_ms it hears channel_degraded (AWP-SAF-009, AWP-TRN-010).
        this.ctx.frames.count(channel, 'dropped_slow', frame.buf.length);
        sub.closeStream(1008, 'stream connection overflowed');
        this.degraded.lost(o, [...sub.subscribed()], now);
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
  attachStream(o: ObserverShell, sink: StreamSink): void {
    const sub = o.sub;
    if (sub === null) return sink.close(1008, 'session has no live control connection');
    sub.attachStream(sink);
    this.degraded.clear(o);
    for (const c of [...sub.subscribed()]) this.startChannel(o, c.channel_id);
  }

  streamLost(o: ObserverShell, sink: StreamSink): void {
    const lost = o.sub?.streamLost(sink) ?? [];
    if (lost.length === 0 || o.sub === null) return;
    const ids = new Set(lost);
    const channels = [...o.sub.subscribed()].filter((c) => ids.has(c.channel_id));
    this.degraded.lost(o, channels, this.ctx.now());
  }

  // ------------------------------------------------------------------ time

  tick(now: number): void {
    if (this.retired) return;
    this.run(this.upstream.tickTimers(now));
    this.subscription.tick();
    this.timers.start(this.observers.values());
    for (const [o, channels] of this.degraded.expired(now))
      if (o.sub !== null && !o.sub.hasStream) for (const c of channels) o.channelDegraded(c, now);
    if (this.observers.size === 0 && this.emptySince !== null && now - this.emptySince >= this.ctx.lingerMs) {
      this.run(this.upstream.close(now));
      this.retire();
    }
  }

  /** Ends every session, or with a shared store suspends it there for a resume elsewhere. */
  async shutdown(): Promise<void> {
    this.events.flush(); // journaled before the sessions move to the store or end
    const now = this.ctx.now();
    const moved: Promise<void>[] = [];
    for (const o of [...this.observers.values()]) {
      const move = o.moveOut(now);
      if (move !== undefined) moved.push(move);
      else if (o.state !== 'suspended' || !o.stored)
        o.close('world_shutdown', now, 1001, 'edge shutting down');
    }
    this.retire();
    await Promise.all(moved);
  }

  /** Each granted channel's topic members by channel name (0 on an engine without pub/sub). */
  *topicMembers(): IterableIterator<[string, number]> {
    for (const [name, g] of this.upstream.grants) yield [name, this.topics?.members(g.channel_id) ?? 0];
  }

  grants(): ReadonlyMap<string, UpstreamGrant> {
    return this.upstream.grants;
  }
}
