/**
 * The hub's own upstream observer session (sans-IO): the edge is this session's agent, so its pings
 * and subscriptions upstream are legitimate (an observer session binds no embodiment and runs no
 * watchdog). One per route and time model, however many observers the edge serves from it.
 */
import { ClockEstimate } from '../protocol/clock-sync.js';
import { parseMessage, type JsonRpcId } from '../protocol/jsonrpc.js';
import type { StreamEndpoint } from '../relay/relay-session.js';

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

export interface ChannelDecl {
  readonly id: string;
  readonly modality: string;
  readonly rate_hz: number | null;
  readonly loss_class: 'reliable' | 'latest-wins';
  readonly stale_after_ms?: number;
}

export interface UpstreamGrant {
  readonly channel: string;
  readonly channel_id: number;
  readonly rate_hz: number | null;
}

export type HubUpstreamEffect =
  | { kind: 'dial' }
  | { kind: 'send'; text: string }
  | { kind: 'close'; code: number; reason: string }
  /** The session is open (or resumed): grants, endpoints and clock are known. */
  | { kind: 'ready'; resumed: boolean }
  | { kind: 'grants'; grants: UpstreamGrant[] }
  | { kind: 'event'; status_seq: number; text: string; params: Record<string, unknown> }
  | { kind: 'frame'; params: Record<string, unknown> }
  /** The upstream session is gone for good (closed, or not resumable): observers must end. */
  | { kind: 'failed'; reason: string };

type Phase = 'idle' | 'dialing' | 'initializing' | 'opening' | 'resuming' | 'ready' | 'closed';

interface Pending {
  readonly method: string;
  readonly sent_at: number;
  readonly then?: (ok: boolean, result: unknown) => void;
}

export class HubUpstream {
  private phase: Phase = 'idle';
  private nextId = 1;
  private readonly pending = new Map<JsonRpcId, Pending>();
  private out: HubUpstreamEffect[] = [];
  manifest: Record<string, unknown> | null = null;
  channels = new Map<string, ChannelDecl>();
  grants = new Map<string, UpstreamGrant>();
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

  constructor(
    readonly mode: 'streaming' | 'lockstep',
    /** The channels and rates to subscribe when the session opens. */
    private readonly wanted: () => { channel: string; rate_hz?: number }[],
    private readonly agentName = 'awp-edge',
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
    this.initialize(STANDARD_MODALITIES, now);
    return this.flush();
  }

  /** The control connection dropped: resume if the session may still be held, else fail. */
  lost(): HubUpstreamEffect[] {
    if (this.phase === 'closed') return [];
    this.pending.clear();
    this.readyAfterPing = null;
    if (this.token === null) {
      this.phase = 'closed';
      this.out.push({ kind: 'failed', reason: 'world connection lost before the session opened' });
    } else {
      this.phase = 'dialing';
      this.out.push({ kind: 'dial' });
    }
    return this.flush();
  }

  dialFailed(detail: string): HubUpstreamEffect[] {
    this.phase = 'closed';
    this.out.push({ kind: 'failed', reason: detail });
    return this.flush();
  }

  /** Ends the session (the last observer left). */
  close(now: number): HubUpstreamEffect[] {
    if (this.phase === 'ready') {
      this.request('session.close', {}, now, () =>
        this.out.push({ kind: 'close', code: 1000, reason: 'hub idle' }),
      );
    } else if (this.phase !== 'closed') {
      this.out.push({ kind: 'close', code: 1000, reason: 'hub idle' });
    }
    this.phase = 'closed';
    return this.flush();
  }

  /** Heartbeats of the hub's own session (AWP-SAF-001): it is this session's agent. */
  tickTimers(now: number): HubUpstreamEffect[] {
    this.heartbeat(now);
    return this.flush();
  }

  private heartbeat(now: number): void {
    if (this.phase === 'ready' && now - this.lastPingAt >= this.heartbeat_interval_ms / 2) {
      this.lastPingAt = now;
      this.request('ping', { origin_ns: Math.round(now * 1e6), last_status_seq: this.lastSeq }, now);
    }
  }

  /** Adds or re-rates channels; `done` gets the world's complete grant list. */
  subscribe(
    channels: { channel: string; rate_hz?: number }[],
    now: number,
    done: (ok: boolean) => void,
  ): HubUpstreamEffect[] {
    this.request('obs.subscribe', { channels }, now, (ok, result) => {
      if (ok) this.adoptGrants((result as { granted?: unknown }).granted);
      done(ok);
    });
    return this.flush();
  }

  unsubscribe(names: string[], now: number): HubUpstreamEffect[] {
    this.request('obs.unsubscribe', { channels: names }, now, (ok, result) => {
      if (ok) this.adoptGrants((result as { granted?: unknown }).granted);
    });
    return this.flush();
  }

  fromUpstream(text: string, now: number): HubUpstreamEffect[] {
    const msg = parseMessage(text);
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
          const stamp = Math.round(now * 1e6);
          const origin = (msg.params as { origin_ns?: unknown } | undefined)?.origin_ns;
          this.send(
            JSON.stringify({
              jsonrpc: '2.0',
              id: msg.id,
              result: { origin_ns: origin ?? 0, receive_ns: stamp, transmit_ns: stamp },
            }),
          );
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
        this.notification(msg.method, msg.params, text);
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

  /** Lockstep: follows the world's tick and simulated clock in what it stamps (reset may move them back). */
  observeStamp(tick: unknown, ts_mono_ns: unknown): void {
    if (this.mode !== 'lockstep') return;
    if (typeof tick === 'number') this.tick = tick;
    if (typeof ts_mono_ns === 'number' && (this.simNow === undefined || ts_mono_ns > this.simNow))
      this.simNow = ts_mono_ns;
  }

  private notification(method: string, params: unknown, text: string): void {
    const p = (params ?? {}) as Record<string, unknown>;
    this.observeStamp(p.tick, p.ts_mono_ns);
    if (method === 'obs.frame') {
      this.out.push({ kind: 'frame', params: p });
      return;
    }
    const seq = p.status_seq;
    if (typeof seq !== 'number') return;
    if (seq <= this.lastSeq) return; // a replayed notification the hub already handled
    this.lastSeq = seq;
    if (method === 'world.event') this.out.push({ kind: 'event', status_seq: seq, text, params: p });
    else if (method === 'session.state' && p.state === 'closed') {
      this.phase = 'closed';
      this.out.push({ kind: 'failed', reason: `world closed the hub session (${String(p.reason)})` });
    }
  }

  private answered(p: Pending, ok: boolean, result: unknown, now: number): void {
    switch (p.method) {
      case 'initialize': {
        if (!ok) return this.fail(`world refused initialize: ${JSON.stringify(result)}`);
        this.manifest = result as Record<string, unknown>;
        this.readChannels();
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
        const r = result as Record<string, unknown>;
        this.token = typeof r.session_token === 'string' ? r.session_token : null;
        this.endpoints = Array.isArray(r.stream_endpoints) ? (r.stream_endpoints as StreamEndpoint[]) : [];
        if (typeof r.heartbeat_interval_ms === 'number') this.heartbeat_interval_ms = r.heartbeat_interval_ms;
        if (typeof r.reconnect_window_ms === 'number') this.reconnect_window_ms = r.reconnect_window_ms;
        if (typeof r.clock_anchor === 'string') this.clock_anchor = r.clock_anchor;
        if (typeof r.tick === 'number') this.tick = r.tick;
        this.observeStamp(r.tick, undefined);
        this.adoptGrants((r.granted as { channels?: unknown } | undefined)?.channels);
        this.phase = 'ready';
        this.lastPingAt = -Infinity;
        const resumed = p.method === 'session.resume';
        if (this.mode === 'streaming' && this.clock.sample === null) this.readyAfterPing = { resumed };
        else this.out.push({ kind: 'ready', resumed });
        this.heartbeat(now); // a first clock sample right away (AWP-CLK-008)
        return;
      }
      case 'ping': {
        const r = result as { receive_ns?: unknown; transmit_ns?: unknown };
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
      default:
        p.then?.(ok, result);
    }
  }

  private reinitialized = false;

  private initialize(modalities: string[], now: number): void {
    this.request(
      'initialize',
      {
        protocol_versions: ['0.1'],
        agent: { name: this.agentName, version: '0.1.0', vendor: 'awp-edge' },
        consumes_modalities: modalities,
        time_models: [this.mode],
      },
      now,
    );
  }

  private readChannels(): void {
    this.channels.clear();
    const list = this.manifest?.observation_channels;
    if (!Array.isArray(list)) return;
    for (const c of list as Record<string, unknown>[]) {
      if (typeof c.id !== 'string' || typeof c.modality !== 'string') continue;
      this.channels.set(c.id, {
        id: c.id,
        modality: c.modality,
        rate_hz: typeof c.rate_hz === 'number' ? c.rate_hz : null,
        loss_class: c.loss_class === 'latest-wins' ? 'latest-wins' : 'reliable',
        ...(typeof c.stale_after_ms === 'number' ? { stale_after_ms: c.stale_after_ms } : {}),
      });
    }
  }

  private adoptGrants(list: unknown): void {
    if (!Array.isArray(list)) return;
    const grants = new Map<string, UpstreamGrant>();
    for (const g of list as Record<string, unknown>[]) {
      if (typeof g.channel === 'string' && typeof g.channel_id === 'number') {
        grants.set(g.channel, {
          channel: g.channel,
          channel_id: g.channel_id,
          rate_hz: typeof g.rate_hz === 'number' ? g.rate_hz : null,
        });
      }
    }
    this.grants = grants;
    this.out.push({ kind: 'grants', grants: [...grants.values()] });
  }

  private fail(reason: string): void {
    this.phase = 'closed';
    this.out.push({ kind: 'failed', reason });
    this.out.push({ kind: 'close', code: 1000, reason: 'hub session failed' });
  }

  private request(method: string, params: unknown, now: number, then?: Pending['then']): void {
    const id = `awp-edge-hub:${this.nextId++}`;
    this.pending.set(id, { method, sent_at: now, ...(then ? { then } : {}) });
    this.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
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
