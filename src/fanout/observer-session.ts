/**
 * An observer session the edge serves itself (AWP-EMB-004): the edge owns what a world would — its
 * session_id, token, status_seq sequence and replay journal, heartbeats, telemetry, subscriptions —
 * while frames and world events come from the route's shared upstream session (the hub).
 *
 * Sans-IO: each input takes what happened (and the time) and returns the effects its shell carries out
 * in order (observer-effects.ts, observer-shell.ts). `C` is the shell's handle of a control connection,
 * which the session only hands back in effects. What it asks of the hub (`ensure-channels`) is answered
 * by a later input (`channelsEnsured`) naming the request.
 */
import { pongText } from '../protocol/clock-sync.js';
import { awpError, edgeError, type RpcErrorObject } from '../protocol/errors.js';
import { findMessageIntegerRangeViolation, isCount } from '../protocol/integers.js';
import {
  errorText,
  parseMessage,
  resultText,
  sequencedNotification,
  type JsonRpcId,
  type Sequenced,
} from '../protocol/jsonrpc.js';
import { ReplayJournal } from '../session/journal.js';
import type { ObserverRecord } from '../session/session-store.js';
import type { ObserverEffect, ObserverHost, ObserverLink, ObserverState } from './observer-effects.js';
import { ObserverGrants, type ChannelRequest } from './observer-grants.js';
import { ObserverLiveness } from './observer-liveness.js';
import {
  heartbeatPing,
  invalidParams,
  notGranted,
  readyResult,
  refusal,
  requestedChannels,
  unsubscribeNames,
} from './observer-messages.js';
import type { SubscribedChannel } from './subscriber.js';

const EMPTY: readonly never[] = [];

/**
 * An observer's subscribes waiting for the world at most: each is also a request of the hub's upstream,
 * so an observer pipelining them while the world is slow must not make them the edge's memory.
 */
export const MAX_SUBSCRIBES_IN_FLIGHT = 64;

/** A request of the observer's waiting for the hub to carry its channels (see `channelsEnsured`). */
type Asked<C> =
  | { readonly kind: 'open'; readonly conn: C; readonly id: JsonRpcId; readonly at: number }
  | {
      readonly kind: 'resume';
      readonly conn: C;
      readonly id: JsonRpcId;
      readonly last: number;
      readonly at: number;
    }
  | { readonly kind: 'subscribe'; readonly conn: C; readonly id: JsonRpcId; readonly added: string[] };

export class ObserverSession<C extends ObserverLink = ObserverLink> {
  state: ObserverState = 'opening';
  readonly journal: ReplayJournal;
  private seq: number;
  private conn: C | null = null;
  private readonly grants: ObserverGrants;
  private readonly asked = new Map<number, Asked<C>>();
  private nextRef = 1;
  private readonly live = new ObserverLiveness();
  /** Restored from the store and not yet resumed here (its grants are not computed yet). */
  private fromStore = false;
  private out: ObserverEffect<C>[] = [];

  constructor(
    readonly session_id: string,
    readonly token: string,
    private readonly host: ObserverHost,
    /** From the agent's initialize: what it can consume and how fast (AWP-AGM-001/002). */
    private readonly modalities: readonly string[],
    private readonly maxObsRateHz: number | undefined,
    /** A session another replica served: its journal and subscriptions, as the store holds them. */
    restored?: { readonly journal: ReplayJournal; readonly wants: readonly ChannelRequest[] },
  ) {
    this.grants = new ObserverGrants(host, maxObsRateHz);
    this.journal = restored?.journal ?? new ReplayJournal();
    this.seq = this.journal.highWaterMark;
    if (restored !== undefined) {
      this.grants.want(restored.wants);
      this.state = 'suspended';
      this.fromStore = true;
    }
  }

  /** What a store keeps of what the observer declared and subscribed (see ObserverRecord). */
  stored(): Omit<ObserverRecord, 'positions'> {
    const { modalities, maxObsRateHz } = this;
    return { modalities, max_obs_rate_hz: maxObsRateHz ?? null, wants: this.grants.requests() };
  }

  get attached(): boolean {
    return this.conn !== null;
  }

  // ------------------------------------------------------------------ open and resume

  /** `session.open` without an embodiment, handed over by the relay connection that received it. */
  open(conn: C, id: JsonRpcId, params: Record<string, unknown>, now: number): readonly ObserverEffect<C>[] {
    this.attach(conn, now);
    const failure = this.host.failure();
    const requested =
      failure !== null
        ? edgeError('UPSTREAM_UNAVAILABLE', failure)
        : params.mode !== this.host.mode
          ? awpError('AWP_TIME_MODEL_UNSUPPORTED', `this hub serves ${this.host.mode} observers`)
          : requestedChannels(params.subscribe, this.host, this.modalities);
    if (!Array.isArray(requested)) this.refuseOpen(id, requested);
    else {
      this.grants.want(requested);
      this.ask({ kind: 'open', conn, id, at: now });
    }
    return this.flush();
  }

  /** The hub answered the `ensure-channels` effect `ref`: whether the world carries the channels now. */
  channelsEnsured(ref: number, ok: boolean): readonly ObserverEffect<C>[] {
    const a = this.asked.get(ref);
    if (a === undefined) return EMPTY;
    this.asked.delete(ref);
    if (this.state === 'closed' || this.conn !== a.conn) return EMPTY;
    if (a.kind === 'open') this.opened(a.id, ok, a.at);
    else if (a.kind === 'resume') {
      // The channels the hub here cannot carry are not granted (the result says which are).
      this.regrant();
      this.resumed(a.id, a.last, a.at);
    } else this.subscribed(a.id, ok, a.added);
    return this.flush();
  }

  private opened(id: JsonRpcId, ok: boolean, now: number): void {
    if (!ok) return this.refuseOpen(id, notGranted('open'));
    this.regrant();
    this.send(resultText(id, this.ready(false)));
    this.state = 'ready';
    this.notify('session.state', { state: 'ready', ts_mono_ns: this.clock(now), reason: 'opened' });
    this.out.push({ kind: 'note', event: 'opened' });
    this.startChannels(this.grants.names());
  }

  /**
   * `session.resume` naming this session, on a new connection (AWP-CTL-005, AWP-SES-010); its `resumed`
   * effect tells how many notifications it replayed.
   */
  resume(conn: C, id: JsonRpcId, lastStatusSeq: number, now: number): readonly ObserverEffect<C>[] {
    if (this.conn !== null) {
      // The old connection's loss was not detected yet: replace it (AWP-SES-010).
      this.out.push({ kind: 'close-connection', conn: this.conn, code: 1000, reason: 'connection replaced' });
      this.detach('connection_replaced', now);
    }
    this.attach(conn, now);
    if (this.fromStore) {
      // Restored from the store: this replica's hub must carry the channels before the result names them.
      this.fromStore = false;
      this.ask({ kind: 'resume', conn, id, last: lastStatusSeq, at: now });
      return this.flush();
    }
    this.resumed(id, lastStatusSeq, now);
    return this.flush();
  }

  private resumed(id: JsonRpcId, lastStatusSeq: number, now: number): void {
    this.acknowledge(lastStatusSeq);
    const replayTo = this.seq;
    this.send(resultText(id, { ...this.ready(true), replay_to_status_seq: replayTo }));
    const replay = this.journal.replay(lastStatusSeq, replayTo);
    for (const t of replay) this.send(t);
    this.state = 'active';
    this.notify('session.state', { state: 'active', ts_mono_ns: this.clock(now), reason: 'resumed' });
    this.out.push({ kind: 'resumed', replayed: replay.length });
    this.startChannels(this.grants.names());
  }

  private ready(resumed: boolean): Record<string, unknown> {
    const f = this.host.readyFields();
    this.live.heartbeatMs = f.heartbeat_interval_ms;
    const endpoints = this.host.endpoints(this.conn!.publicBase);
    return readyResult(this, f, this.grants.list(), endpoints, resumed);
  }

  private refuseOpen(id: JsonRpcId, error: RpcErrorObject): void {
    this.send(errorText(id, error));
    this.out.push({ kind: 'note', event: 'refused', detail: error.message });
    this.state = 'closed';
    this.conn = null;
    this.out.push({ kind: 'release', flush: false }, { kind: 'ended' });
  }

  private attach(conn: C, now: number): void {
    this.conn = conn;
    this.live.attached(now);
    this.out.push({ kind: 'attach', conn, channels: [...this.grants.values()] });
  }

  /** Asks the hub to carry what this observer wants (the last effect of its batch). */
  private ask(a: Asked<C>): void {
    const ref = this.nextRef++;
    this.asked.set(ref, a);
    this.out.push({ kind: 'ensure-channels', ref, wants: this.grants.wanted() });
  }

  /** The first frame on a channel is its current keyframe (AWP-OBS-004/005). */
  private startChannels(names: Iterable<string>): void {
    for (const name of names) {
      const g = this.grants.get(name);
      if (g !== undefined) this.out.push({ kind: 'start-channel', channel_id: g.channel_id });
    }
  }

  // ------------------------------------------------------------------ the observer's messages

  fromAgent(text: string, now: number): readonly ObserverEffect<C>[] {
    if (this.conn === null) return EMPTY;
    this.live.lastHeard = now;
    this.message(text, now);
    return this.flush();
  }

  private message(text: string, now: number): void {
    const msg = parseMessage(text, this.host.maxJsonDepth);
    if (msg.kind === 'invalid') {
      if (!msg.wasResponse) this.send(errorText(msg.id, msg.error));
      return;
    }
    const violation = findMessageIntegerRangeViolation(msg);
    if (violation !== null) {
      // AWP-CTL-009: answer, end the session, close with 1002.
      if (msg.kind === 'request')
        this.send(errorText(msg.id, awpError('AWP_INTEGER_RANGE', `${violation} exceeds 2^53 - 1`)));
      return this.end('protocol_error', now, 1002, 'AWP_INTEGER_RANGE');
    }
    // Notifications (obs.report and vendor ones are accepted, AWP-OBS-007; observers have no command
    // channels, so cmd.frame is ignored too) and pongs to the edge's pings (liveness only) need nothing.
    if (msg.kind !== 'request') return;
    const id = msg.id;
    const p = (msg.params ?? {}) as Record<string, unknown>;
    switch (msg.method) {
      case 'ping':
        if (p.last_status_seq !== undefined) {
          if (!isCount(p.last_status_seq))
            return this.send(errorText(id, invalidParams('last_status_seq must be a non-negative integer')));
          this.acknowledge(p.last_status_seq);
        }
        return this.send(pongText(id, { origin_ns: p.origin_ns }, this.clock(now)));
      case 'initialize':
      case 'world.manifest':
        return this.send(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${this.host.manifestJson()}}`);
      case 'session.close':
        // The result follows `session.state: closed` (AWP-SES-011), before the session lets go of the connection.
        return this.end('session_closed', now, 1000, 'session closed', resultText(id, {}));
      case 'obs.subscribe':
        return this.subscribe(id, p);
      case 'obs.unsubscribe':
        return this.unsubscribe(id, p);
      default:
        return this.send(errorText(id, refusal(msg.method)));
    }
  }

  /**
   * The observer processed everything up to `status_seq`. Clamped to what this session sent: an
   * acknowledgement beyond it would raise the journal's high-water mark, and the notifications that
   * follow would never be journaled (a resume could not replay them).
   */
  private acknowledge(status_seq: number): void {
    if (isCount(status_seq)) this.journal.acknowledge(Math.min(status_seq, this.seq));
  }

  private subscribe(id: JsonRpcId, p: Record<string, unknown>): void {
    const requested = requestedChannels(p.channels, this.host, this.modalities);
    if (!Array.isArray(requested)) return this.send(errorText(id, requested));
    if (this.asked.size >= MAX_SUBSCRIBES_IN_FLIGHT) {
      const detail = `${MAX_SUBSCRIBES_IN_FLIGHT} subscribes of this session are already waiting for the world`;
      return this.send(errorText(id, edgeError('BUDGET_EXCEEDED', detail)));
    }
    this.ask({ kind: 'subscribe', conn: this.conn!, id, added: this.grants.want(requested) });
  }

  private subscribed(id: JsonRpcId, ok: boolean, added: readonly string[]): void {
    if (!ok) return this.send(errorText(id, notGranted('subscribe')));
    this.regrant();
    this.send(resultText(id, { granted: this.grants.list() }));
    this.startChannels(added);
  }

  private unsubscribe(id: JsonRpcId, p: Record<string, unknown>): void {
    const names = unsubscribeNames(p.channels, this.host);
    if (!Array.isArray(names)) return this.send(errorText(id, names));
    this.grants.unwant(names);
    this.regrant();
    this.send(resultText(id, { granted: this.grants.list() }));
    this.out.push({ kind: 'subscriptions-changed' }); // other observers are unaffected (AWP-MA-004)
  }

  /** Recomputes the exact grant list (AWP-NEG-001) from what is wanted and what the hub holds. */
  private regrant(): void {
    const { removed, changed } = this.grants.regrant();
    if (changed) this.out.push({ kind: 'channels', grants: [...this.grants.values()], removed });
  }

  /** Channel ids and rates this observer needs from the hub. */
  needs(): IterableIterator<SubscribedChannel> {
    return this.grants.values();
  }

  // ------------------------------------------------------------------ world events, frames, timers

  /** A world.event of the shared upstream session, re-sequenced into this session (AWP-EVT-001). */
  worldEvent(event: Sequenced): readonly ObserverEffect<C>[] {
    if (this.state === 'closed' || this.state === 'opening') return EMPTY;
    this.stamp(event, true);
    return this.flush();
  }

  /** The reliable channel could not be delivered for longer than its stale_after_ms (AWP-SAF-009). */
  channelDegraded(channel: SubscribedChannel, now: number): readonly ObserverEffect<C>[] {
    if (this.state === 'closed') return EMPTY;
    const { name, channel_id } = channel;
    const detail = { channel: name, channel_id, cause: 'subscriber stream overflow' };
    this.notify('world.event', { event: 'channel_degraded', ts_mono_ns: this.clock(now), detail });
    return this.flush();
  }

  /** Called after a frame reached this observer: the first one makes the session active. */
  firstActivity(now: number): readonly ObserverEffect<C>[] {
    if (this.state !== 'ready') return EMPTY;
    this.state = 'active';
    this.notify('session.state', { state: 'active', ts_mono_ns: this.clock(now), reason: 'first_activity' });
    return this.flush();
  }

  tickTimers(now: number): readonly ObserverEffect<C>[] {
    if (this.state === 'closed' || this.state === 'opening') return EMPTY;
    if (this.conn === null) {
      if (this.live.windowExpired(now, this.host.readyFields().reconnect_window_ms))
        this.end('window_expired', now);
    } else if (this.live.silent(now)) {
      this.drop(1001, 'heartbeat lost', now);
    } else {
      if (this.live.pingDue(now)) this.send(heartbeatPing(now, this.clock(now)));
      // In streaming, over what this observer got.
      const window_ms = this.host.mode === 'streaming' ? this.live.telemetryDue(now) : null;
      if (window_ms !== null) this.out.push({ kind: 'telemetry', window_ms });
    }
    return this.flush();
  }

  /** A control connection closed: the session's, or one a resume replaced (then nothing changes). */
  connectionLost(conn: C, now: number): readonly ObserverEffect<C>[] {
    if (this.conn === null || this.conn !== conn) return EMPTY;
    this.detach('connection_lost', now);
    return this.flush();
  }

  /** The edge is going away (drain, shutdown): suspend the session and close its connection (1001). */
  moveOut(now: number): readonly ObserverEffect<C>[] {
    if (this.conn !== null) this.drop(1001, 'edge draining: reconnect and resume', now);
    return this.flush();
  }

  /** The shell could not queue a `send` (the control connection's queue is full): it is lost, closed 1008. */
  sendQueueFull(): readonly ObserverEffect<C>[] {
    if (this.conn === null) return EMPTY;
    this.drop(1008, 'send queue full', this.live.lastHeard);
    return this.flush();
  }

  /** Suspends the session and closes the connection it lost. */
  private drop(code: number, reason: string, now: number): void {
    const conn = this.conn!;
    this.detach('connection_lost', now);
    this.out.push({ kind: 'close-connection', conn, code, reason });
  }

  private detach(reason: 'connection_lost' | 'connection_replaced', now: number): void {
    if (this.state === 'closed') return;
    this.out.push({ kind: 'release', stream: { code: 1001, reason: 'session suspended' }, flush: false });
    this.conn = null;
    this.live.suspended(now);
    if (this.state === 'opening') return this.end('connection_lost', now);
    this.state = 'suspended';
    this.notify('session.state', { state: 'suspended', ts_mono_ns: this.clock(now), reason });
    this.out.push({ kind: 'note', event: 'suspended', detail: reason });
  }

  /** Ends the session (its hub's upstream session failed, the observer overflowed, shutdown). */
  close(
    reason: string,
    now: number,
    code = 1000,
    closeReason = 'session closed',
  ): readonly ObserverEffect<C>[] {
    this.end(reason, now, code, closeReason);
    return this.flush();
  }

  private end(
    reason: string,
    now: number,
    code = 1000,
    closeReason = 'session closed',
    finalText?: string,
  ): void {
    if (this.state === 'closed') return;
    if (this.conn !== null)
      this.notify('session.state', { state: 'closed', ts_mono_ns: this.clock(now), reason });
    if (finalText !== undefined) this.send(finalText);
    this.state = 'closed';
    // Nothing drains the control queue once the session lets go of it: hand the last messages to the engine.
    this.out.push({ kind: 'release', stream: { code: 1000, reason: 'session closed' }, flush: true });
    if (code !== 1000 && this.conn !== null)
      this.out.push({ kind: 'close-connection', conn: this.conn, code, reason: closeReason });
    this.conn = null;
    this.out.push({ kind: 'note', event: 'closed', detail: reason }, { kind: 'ended' });
  }

  // ------------------------------------------------------------------ plumbing

  private notify(method: string, params: Record<string, unknown>): void {
    this.stamp(sequencedNotification(method, params));
  }

  /** `shared`: the hub's text for all its observers, journaled as such (JournalEntry.share). */
  private stamp(notification: Sequenced, shared = false): void {
    const status_seq = ++this.seq;
    const text = notification(status_seq);
    // Durable once a shared store holds it (observer-persistence.ts).
    this.journal.append(status_seq, text, shared ? notification : undefined);
    this.send(shared ? notification(status_seq) : text); // a copy of its own to write out
  }

  private send(text: string): void {
    if (this.conn !== null) this.out.push({ kind: 'send', text });
  }

  private flush(): readonly ObserverEffect<C>[] {
    if (this.out.length === 0) return EMPTY;
    const out = this.out;
    this.out = [];
    return out;
  }

  private clock(now: number): number {
    return Math.max(0, Math.round(this.host.sessionNow(now) ?? 0));
  }
}
