/**
 * The hub's own upstream observer session (sans-IO): the edge is this session's agent, so its pings
 * and subscriptions upstream are legitimate (an observer session binds no embodiment and runs no
 * watchdog). One per route and time model, however many observers the edge serves from it.
 */
import { ClockEstimate, pongText } from '../protocol/clock-sync.js';
import { findMessageIntegerRangeViolation, isCount } from '../protocol/integers.js';
import {
  DEFAULT_MAX_JSON_DEPTH,
  parseMessage,
  sequencedNotification,
  type JsonRpcId,
  type Sequenced,
} from '../protocol/jsonrpc.js';
import { isRecord } from '../protocol/json-object.js';
import type { StreamEndpoint } from '../session/stream-endpoint.js';
import { field, readChannelDecls, readGrants, type ChannelDecl, type UpstreamGrant } from './hub-channels.js';
import type { ObserverHost } from './observer-effects.js';

/** Modalities the hub declares before it knows the world's (re-declared after the manifest if needed). */
const STANDARD_MODALITIES = [
  'image/jpeg',
  'image/raw',
  'audio/pcm',
  'text/event+json',
  'proprio/json',
  'servo/json',
  'pointcloud/xyz32',
  'tensor/raw',
];

export type HubUpstreamEffect =
  | { kind: 'dial' }
  | { kind: 'send'; text: string }
  | { kind: 'close'; code: number; reason: string }
  /** The session is open (or resumed): grants, endpoints and clock are known. */
  | { kind: 'ready'; resumed: boolean }
  | { kind: 'grants'; grants: UpstreamGrant[] }
  /** The world answered the `subscribe` carrying `ref` (its grants, if ok, came just before). */
  | { kind: 'subscribed'; ref: number; ok: boolean }
  /** A world.event, serialised once for every observer (each stamps its own status_seq). */
  | { kind: 'event'; status_seq: number; event: Sequenced }
  | { kind: 'frame'; params: Record<string, unknown> }
  /** The upstream session is gone for good (closed, or not resumable): observers must end. */
  | { kind: 'failed'; reason: string };

type Phase = 'idle' | 'dialing' | 'initializing' | 'opening' | 'resuming' | 'ready' | 'closed';

/**
 * Heartbeat pings the world may leave unanswered: past them the hub sends none until it answers, so a
 * world that stops answering (its connection alive) does not grow the hub's requests by one per beat.
 */
export const MAX_UNANSWERED_PINGS = 16;

interface Pending {
  readonly method: string;
  /** The request's number (its id's suffix): the world runs requests in the order they were sent. */
  readonly n: number;
  readonly sent_at: number;
  /** The caller's correlation of an `obs.subscribe`, returned in its `subscribed` effect. */
  readonly ref?: number;
}

export class HubUpstream {
  private phase: Phase = 'idle';
  private nextId = 1;
  private readonly pending = new Map<JsonRpcId, Pending>();
  private out: HubUpstreamEffect[] = [];
  manifest: Record<string, unknown> | null = null;
  /** The manifest's text, serialised once: every observer's `initialize` is answered with it. */
  private manifestText = '{}';
  channels = new Map<string, ChannelDecl>();
  grants = new Map<string, UpstreamGrant>();
  /**
   * Channels an `obs.unsubscribe` takes away, by its request number, until an answer the world gave after
   * running it says what it holds. They are not granted from the moment it is sent: an observer asking for
   * one makes the hub subscribe it again, after the unsubscribe on the same connection, instead of being
   * told it is carried while the world stops it; and an older answer naming one does not bring it back.
   */
  private readonly leaving = new Map<string, number>();
  /** The request whose answer the grants were last taken from: an answer to an older one is older news. */
  private grantsFrom = 0;
  token: string | null = null;
  endpoints: StreamEndpoint[] = [];
  heartbeat_interval_ms = 5000;
  reconnect_window_ms = 30000;
  clock_anchor: string | undefined;
  /** Lockstep: the world's current tick and simulated clock, as its stamps show them (AWP-TIM-013). */
  tick: number | undefined;
  simNow: number | undefined;
  readonly clock = new ClockEstimate();
  /** Highest status_seq of the hub's session seen (acknowledged in its pings and on resume). */
  private lastSeq = 0;
  private lastPingAt = -Infinity;
  /** Why the session failed, once it has. */
  failure: string | null = null;
  /** When the control connection came up, while the session is not open on it yet. */
  private connectedAt: number | null = null;

  constructor(
    readonly mode: 'streaming' | 'lockstep',
    /** The channels and rates to subscribe when the session opens. */
    private readonly wanted: () => { channel: string; rate_hz?: number }[],
    /** Messages from the world nesting deeper are refused before they are parsed (transport.max_json_depth). */
    private readonly maxJsonDepth = DEFAULT_MAX_JSON_DEPTH,
    /** How long the world may take to open (or resume) the session once connected. */
    private readonly openTimeoutMs = 5_000,
  ) {}

  get isReady(): boolean {
    return this.phase === 'ready' && this.readyAfterPing === null;
  }

  /**
   * Streaming: the session is open but the clock has no sample yet; observers are answered once the
   * first ping returns, so nothing they see is stamped before the edge knows the session clock (AWP-CLK-007).
   */
  private readyAfterPing: { resumed: boolean } | null = null;

  get isClosed(): boolean {
    return this.phase === 'closed';
  }

  start(): HubUpstreamEffect[] {
    if (this.phase === 'idle') {
      this.phase = 'dialing';
      this.out.push({ kind: 'dial' });
    }
    return this.flush();
  }

  connected(now: number): HubUpstreamEffect[] {
    this.phase = 'initializing';
    this.connectedAt = now;
    this.initialize(STANDARD_MODALITIES, now);
    return this.flush();
  }

  /** The control connection dropped: resume if the session may still be held, else fail. */
  lost(): HubUpstreamEffect[] {
    if (this.phase === 'closed') return [];
    this.pending.clear();
    this.connectedAt = null;
    this.leaving.clear(); // unanswered: the resumed session's grants say what the world kept
    this.readyAfterPing = null;
    if (this.token === null) {
      this.phase = 'closed';
      this.failed('world connection lost before the session opened');
    } else {
      this.phase = 'dialing';
      this.out.push({ kind: 'dial' });
    }
    return this.flush();
  }

  dialFailed(detail: string): HubUpstreamEffect[] {
    this.phase = 'closed';
    this.failed(detail);
    return this.flush();
  }

  /** Ends the session (the last observer left). */
  close(now: number): HubUpstreamEffect[] {
    if (this.phase === 'ready') {
      this.request('session.close', {}, now); // its answer closes the connection
    } else if (this.phase !== 'closed') {
      this.out.push({ kind: 'close', code: 1000, reason: 'hub idle' });
    }
    this.phase = 'closed';
    return this.flush();
  }

  /** Heartbeats of the hub's own session (AWP-SAF-001): it is this session's agent. */
  tickTimers(now: number): HubUpstreamEffect[] {
    if (this.isReady || this.phase === 'closed') this.connectedAt = null;
    else if (this.connectedAt !== null && now - this.connectedAt > this.openTimeoutMs) {
      // A world that took the connection but does not answer: waiting observers are refused, not left.
      this.connectedAt = null;
      this.fail(`world did not open the session within ${this.openTimeoutMs} ms`);
    }
    this.heartbeat(now);
    return this.flush();
  }

  private heartbeat(now: number): void {
    if (
      this.phase === 'ready' &&
      now - this.lastPingAt >= this.heartbeat_interval_ms / 2 &&
      this.unansweredPings() < MAX_UNANSWERED_PINGS
    ) {
      this.lastPingAt = now;
      this.request('ping', { origin_ns: Math.round(now * 1e6), last_status_seq: this.lastSeq }, now);
    }
  }

  private unansweredPings(): number {
    let n = 0;
    for (const p of this.pending.values()) if (p.method === 'ping') n++;
    return n;
  }

  /**
   * Adds or re-rates channels. The world's answer becomes a `subscribed` effect carrying `ref` (after a
   * `grants` effect with its complete grant list); a connection lost before the answer drops the request.
   */
  subscribe(
    channels: { channel: string; rate_hz?: number }[],
    now: number,
    ref: number,
  ): HubUpstreamEffect[] {
    this.request('obs.subscribe', { channels }, now, ref);
    return this.flush();
  }

  /** Drops channels; they are no longer granted from now on (see `leaving`). */
  unsubscribe(names: string[], now: number): HubUpstreamEffect[] {
    const n = this.request('obs.unsubscribe', { channels: names }, now);
    for (const name of names) {
      this.leaving.set(name, n);
      this.grants.delete(name);
    }
    return this.flush();
  }

  fromUpstream(text: string, now: number): HubUpstreamEffect[] {
    const msg = parseMessage(text, this.maxJsonDepth);
    const method = msg.kind === 'result' ? this.pending.get(msg.id)?.method : undefined;
    if (msg.kind !== 'invalid' && findMessageIntegerRangeViolation(msg, method) !== null) {
      // AWP-CTL-009: the hub (the world's agent here) ends the session; its observers hear world_shutdown.
      this.fail('world sent an out-of-range integer', 1002, 'AWP_INTEGER_RANGE');
      return this.flush();
    }
    switch (msg.kind) {
      case 'result':
      case 'error': {
        if (msg.id === null) break;
        const p = this.pending.get(msg.id);
        if (p === undefined) break;
        this.pending.delete(msg.id);
        this.answered(p, msg.kind === 'result', msg.kind === 'result' ? msg.result : msg.error, now);
        break;
      }
      case 'request':
        if (msg.method === 'ping') {
          // Answered on the hub's own clock (an agent clock, AWP-CLK-006).
          this.send(pongText(msg.id, msg.params, Math.round(now * 1e6)));
        } else {
          this.send(
            JSON.stringify({
              jsonrpc: '2.0',
              id: msg.id,
              error: { code: -32601, message: 'Method not found' },
            }),
          );
        }
        break;
      case 'notification':
        this.notification(msg.method, msg.params);
        break;
      case 'invalid':
        break;
    }
    return this.flush();
  }

  /**
   * The upstream session clock now: in streaming the offset estimate from the hub's pings; in lockstep
   * simulated time, which moves only with advances, so the newest stamp the world sent (AWP-TIM-013).
   */
  sessionNow(localNs: number): number | undefined {
    return this.mode === 'lockstep' ? this.simNow : this.clock.sessionNow(localNs);
  }

  /**
   * What observer sessions served from this session read of it (the world's channels and grants, the
   * session clock, the fields of their session.ready), live; `endpoints` gives the edge's own.
   */
  observerHost(endpoints: (publicBase: string) => StreamEndpoint[]): ObserverHost {
    return {
      mode: this.mode,
      maxJsonDepth: this.maxJsonDepth,
      manifestJson: () => this.manifestText,
      failure: () => this.failure,
      channelDecl: (name) => this.channels.get(name),
      upstreamGrant: (name) => this.grants.get(name),
      sessionNow: (nowMs) => this.sessionNow(Math.round(nowMs * 1e6)),
      readyFields: () => ({
        heartbeat_interval_ms: this.heartbeat_interval_ms,
        reconnect_window_ms: this.reconnect_window_ms,
        ...(this.clock_anchor !== undefined ? { clock_anchor: this.clock_anchor } : {}),
        ...(this.tick !== undefined ? { tick: this.tick } : {}),
      }),
      endpoints,
    };
  }

  /** Lockstep: follows the world's tick and simulated clock in what it stamps (reset may move them back). */
  observeStamp(tick: unknown, ts_mono_ns: unknown): void {
    if (this.mode !== 'lockstep') return;
    if (typeof tick === 'number') this.tick = tick;
    if (typeof ts_mono_ns === 'number' && (this.simNow === undefined || ts_mono_ns > this.simNow))
      this.simNow = ts_mono_ns;
  }

  private notification(method: string, params: unknown): void {
    const p = isRecord(params) ? params : {};
    this.observeStamp(p.tick, p.ts_mono_ns);
    if (method === 'obs.frame') {
      this.out.push({ kind: 'frame', params: p });
      return;
    }
    const seq = p.status_seq;
    if (typeof seq !== 'number') return;
    if (seq <= this.lastSeq) return; // a replayed notification the hub already handled
    this.lastSeq = seq;
    if (method === 'world.event')
      this.out.push({ kind: 'event', status_seq: seq, event: sequencedNotification(method, p) });
    else if (method === 'session.state' && p.state === 'closed') {
      this.phase = 'closed';
      // Never String() a world's value: an object whose toString is not a function throws.
      const reason = typeof p.reason === 'string' ? p.reason : 'no reason given';
      this.failed(`world closed the hub session (${reason})`);
    }
  }

  private answered(p: Pending, ok: boolean, result: unknown, now: number): void {
    switch (p.method) {
      case 'initialize': {
        if (!ok) return this.fail(`world refused initialize: ${JSON.stringify(result)}`);
        if (!isRecord(result)) return this.fail('world answered initialize without a manifest');
        this.manifest = result;
        this.manifestText = JSON.stringify(result);
        this.channels = readChannelDecls(result);
        const needed = [...new Set([...this.channels.values()].map((c) => c.modality))];
        if (needed.some((m) => !STANDARD_MODALITIES.includes(m)) && !this.reinitialized) {
          this.reinitialized = true; // declare the world's own modalities too (AWP-AGM-001)
          this.initialize([...new Set([...STANDARD_MODALITIES, ...needed])], now);
          return;
        }
        if (this.token !== null) {
          this.phase = 'resuming';
          this.request('session.resume', { session_token: this.token, last_status_seq: this.lastSeq }, now);
        } else {
          this.phase = 'opening';
          this.request('session.open', { mode: this.mode, subscribe: this.wanted() }, now);
        }
        return;
      }
      case 'session.open':
      case 'session.resume': {
        if (!ok) {
          this.token = null;
          return this.fail(`world refused ${p.method}: ${JSON.stringify(result)}`);
        }
        // A session.ready without a token is no session: nothing could resume it.
        if (!isRecord(result) || typeof result.session_token !== 'string')
          return this.fail(`world answered ${p.method} without a session_token`);
        const r = result;
        this.token = r.session_token as string;
        this.endpoints = Array.isArray(r.stream_endpoints) ? (r.stream_endpoints as StreamEndpoint[]) : [];
        // Counts only: they pace the hub's heartbeats and every observer's, and a store keeps them.
        if (isCount(r.heartbeat_interval_ms) && r.heartbeat_interval_ms > 0)
          this.heartbeat_interval_ms = r.heartbeat_interval_ms;
        if (isCount(r.reconnect_window_ms)) this.reconnect_window_ms = r.reconnect_window_ms;
        if (typeof r.clock_anchor === 'string') this.clock_anchor = r.clock_anchor;
        if (typeof r.tick === 'number') this.tick = r.tick;
        this.observeStamp(r.tick, undefined);
        this.adoptGrants(field(r.granted, 'channels'), p.n);
        this.phase = 'ready';
        this.lastPingAt = -Infinity;
        const resumed = p.method === 'session.resume';
        if (this.mode === 'streaming' && this.clock.sample === null) this.readyAfterPing = { resumed };
        else this.out.push({ kind: 'ready', resumed });
        this.heartbeat(now); // a first clock sample right away (AWP-CLK-008)
        return;
      }
      case 'ping': {
        const r = isRecord(result) ? result : {};
        if (ok && typeof r.receive_ns === 'number' && typeof r.transmit_ns === 'number') {
          this.clock.add(Math.round(p.sent_at * 1e6), r.receive_ns, r.transmit_ns, Math.round(now * 1e6));
          this.observeStamp(undefined, r.transmit_ns);
        }
        if (this.readyAfterPing !== null && this.phase === 'ready') {
          this.out.push({ kind: 'ready', resumed: this.readyAfterPing.resumed });
          this.readyAfterPing = null;
        }
        return;
      }
      case 'obs.subscribe':
        if (ok) this.adoptGrants(field(result, 'granted'), p.n);
        if (p.ref !== undefined) this.out.push({ kind: 'subscribed', ref: p.ref, ok });
        return;
      case 'obs.unsubscribe':
        if (ok) this.adoptGrants(field(result, 'granted'), p.n);
        return;
      case 'session.close':
        this.out.push({ kind: 'close', code: 1000, reason: 'hub idle' });
        return;
    }
  }

  private reinitialized = false;

  private initialize(modalities: string[], now: number): void {
    this.request(
      'initialize',
      {
        protocol_versions: ['0.1'],
        agent: { name: 'awp-edge', version: '0.1.0', vendor: 'awp-edge' },
        consumes_modalities: modalities,
        time_models: [this.mode],
      },
      now,
    );
  }

  /** The world's complete grant list (AWP-NEG-004) in its answer to request `n`. */
  private adoptGrants(list: unknown, n: number): void {
    const grants = readGrants(list);
    if (grants === null || n < this.grantsFrom) return;
    this.grantsFrom = n;
    // An unsubscribe sent up to request n is in this answer; a later one is not yet.
    for (const [name, sent] of this.leaving) {
      if (sent <= n) this.leaving.delete(name);
      else grants.delete(name);
    }
    this.grants = grants;
    this.out.push({ kind: 'grants', grants: [...grants.values()] });
  }

  /** The session is lost for good: `failure` says why, to observers arriving after. */
  private failed(reason: string): void {
    this.failure = reason;
    this.out.push({ kind: 'failed', reason });
  }

  private fail(reason: string, code = 1000, closeReason = 'hub session failed'): void {
    this.phase = 'closed';
    this.failed(reason);
    this.out.push({ kind: 'close', code, reason: closeReason });
  }

  private request(method: string, params: unknown, now: number, ref?: number): number {
    const n = this.nextId++;
    const id = `awp-edge-hub:${n}`;
    this.pending.set(id, { method, n, sent_at: now, ...(ref !== undefined ? { ref } : {}) });
    this.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    return n;
  }

  private send(text: string): void {
    this.out.push({ kind: 'send', text });
  }

  private flush(): HubUpstreamEffect[] {
    const out = this.out;
    this.out = [];
    return out;
  }
}
