/**
 * The demo world's state and the plumbing every handler module uses (outputs, replies, sequenced
 * notifications, the session clock). It imports no handler module: handlers and the shared state transitions
 * (`transitions.ts`) take a `WorldState`, and `DemoWorld` (world.ts) adds the entry points on top, so the
 * demo's modules form no import cycle.
 */
import { randomBytes } from 'node:crypto';
import type { RpcErrorObject } from '../protocol/errors.js';
import type { JsonRpcId } from '../protocol/jsonrpc.js';
import type { CommonConfig } from './config.js';
import { ParamsValidator } from './params-validator.js';
import type { Session, SessionState } from './session.js';
import type { DemoSim } from './sim.js';
import type { ConnId, JsonObject, Output } from './types.js';
import { MS } from './types.js';

export interface DemoWorldOptions {
  /** Randomness for session tokens (256 bits each); inject a deterministic source in tests. */
  readonly random?: (bytes: number) => Uint8Array;
  /** Engine time of session-clock 0 for streaming sessions (default 0). */
  readonly originNs?: number;
}

export interface ConnState {
  readonly id: ConnId;
  initialized: boolean;
  consumes: ReadonlySet<string>;
  maxObsRateHz: number | undefined;
  session: Session | null;
  /** Engine time of the last message received (any kind, AWP-SAF-002). */
  lastRxNs: number;
  lastPingNs: number;
  nextPingId: number;
}

export interface ChannelDecl {
  readonly id: string;
  readonly modality: string;
  readonly rate_hz: number | null;
  readonly loss_class: 'reliable' | 'latest-wins';
  readonly keyframe_interval?: number;
  readonly stale_after_ms?: number;
}

export interface ActionDecl {
  readonly type: string;
  readonly duration: 'instant' | 'extended' | 'streaming';
  readonly preemption: string | string[];
  readonly concurrency_group?: string;
  readonly max_queue?: number;
  readonly max_abort_ms?: number;
  readonly max_duration_ms?: number;
}

export class WorldState {
  readonly manifest: JsonObject;
  readonly channels: ReadonlyMap<string, ChannelDecl>;
  readonly decls: ReadonlyMap<string, ActionDecl>;
  readonly embodimentChannels: ReadonlyMap<string, readonly string[]>;
  readonly embodimentTypes: ReadonlyMap<string, readonly string[]>;
  readonly params: ParamsValidator;
  readonly random: (bytes: number) => Uint8Array;
  readonly originNs: number;

  readonly conns = new Map<ConnId, ConnState>();
  /** Stream connection -> its session. */
  readonly streams = new Map<ConnId, Session>();
  readonly sessions = new Map<string, Session>();
  readonly tokens = new Map<string, Session>();
  /** Tokens of closed sessions: a resume names them with 2003, not 2005 (bounded). */
  readonly closedTokens = new Set<string>();
  /** Embodiment -> the session bound to it (AWP-EMB-001). */
  readonly bound = new Map<string, Session>();

  estop = false;
  /** Lockstep: the world's tick, and the advances ever made (the session clock, AWP-TIM-013). */
  tick = 0;
  advances = 0;
  /** The `now` of the call being handled. */
  now = 0;
  private sessionCounter = 0;
  private out: Output[] = [];

  constructor(
    readonly sim: DemoSim,
    readonly config: CommonConfig,
    opts: DemoWorldOptions = {},
  ) {
    this.manifest = { protocol_version: '0.1', ...sim.manifest };
    this.channels = new Map(
      (this.manifest.observation_channels as ChannelDecl[]).map((c) => [c.id, c] as const),
    );
    this.decls = new Map((this.manifest.action_schemas as ActionDecl[]).map((d) => [d.type, d] as const));
    const embodiments = this.manifest.embodiments as {
      id: string;
      channels: string[];
      action_types: string[];
    }[];
    this.embodimentChannels = new Map(embodiments.map((e) => [e.id, e.channels] as const));
    this.embodimentTypes = new Map(embodiments.map((e) => [e.id, e.action_types] as const));
    this.params = new ParamsValidator(this.manifest);
    this.random = opts.random ?? ((n) => randomBytes(n));
    this.originNs = opts.originNs ?? 0;
  }

  get lockstep(): boolean {
    return this.sim.mode === 'lockstep';
  }

  /** Whether a stream connection presenting `token` would be accepted (for refusing the upgrade early). */
  streamTokenValid(token: string): boolean {
    const s = this.tokens.get(token);
    return (
      s !== undefined && s.conn !== null && s.closingReason === null && this.config.streamUrl !== undefined
    );
  }

  /** Session clock (AWP-CLK-001): simulated time in lockstep (AWP-TIM-013), else ns since the origin. */
  clock(): number {
    return this.lockstep ? this.advances * (this.sim.tickNs ?? MS) : this.now - this.originNs;
  }

  emit(o: Output): void {
    this.out.push(o);
  }

  send(conn: ConnId, msg: JsonObject): void {
    this.out.push({ kind: 'text', conn, msg });
  }

  reply(conn: ConnId, id: JsonRpcId, result: unknown): void {
    this.send(conn, { jsonrpc: '2.0', id, result });
  }

  sendError(conn: ConnId, id: JsonRpcId | null, error: RpcErrorObject): void {
    this.send(conn, { jsonrpc: '2.0', id, error });
  }

  /** A notification to the session's control connection, if it has one. */
  toSession(s: Session, method: string, params: JsonObject): void {
    if (s.conn !== null) this.send(s.conn, { jsonrpc: '2.0', method, params });
  }

  /** A status_seq-carrying notification: sequenced, retained for replay, delivered if connected (AWP-CTL-008). */
  sequenced(s: Session, method: string, params: JsonObject): JsonObject {
    const full = s.sequence(method, params);
    this.toSession(s, method, full);
    return full;
  }

  event(s: Session, event: string, detail?: JsonObject): void {
    const params: JsonObject = { event, ts_mono_ns: this.clock() };
    if (this.lockstep) params.tick = this.tick;
    if (detail !== undefined) params.detail = detail;
    this.sequenced(s, 'world.event', params);
  }

  setState(s: Session, state: SessionState, reason: string): void {
    s.state = state;
    this.sequenced(s, 'session.state', { state, ts_mono_ns: this.clock(), reason });
  }

  /** Ready -> Active on the first observation or action (AWP-SES-002). */
  activate(s: Session): void {
    if (s.state === 'ready') this.setState(s, 'active', 'first_activity');
  }

  nextSessionId(): string {
    this.sessionCounter += 1;
    return `sess_${this.sessionCounter}`;
  }

  /** 256 bits, unpadded base64url: RFC 6455 token characters (AWP-SEC-003/005). */
  newToken(): string {
    return Buffer.from(this.random(32)).toString('base64url');
  }

  /** The outputs gathered since the last call, handed back by each entry point. */
  protected flush(): Output[] {
    const out = this.out;
    this.out = [];
    return out;
  }
}
