/**
 * The world side of AWP Core as a sans-IO state machine, shared by the demo worlds. Every entry point takes the
 * current time (`now`, ns on the server's monotonic clock) and returns the outputs to perform. Nothing here reads
 * a clock, starts a timer or touches a socket; the server calls `advance(now)` every few milliseconds.
 */
import { randomBytes } from 'node:crypto';
import { awpError, jsonRpcError } from '../protocol/errors.js';
import type { RpcErrorObject } from '../protocol/errors.js';
import { encodeFrame } from '../protocol/frame.js';
import { frameToInline } from '../protocol/inline-frame.js';
import { notificationText, parseMessage } from '../protocol/jsonrpc.js';
import type { JsonRpcId } from '../protocol/jsonrpc.js';
import { findMessageIntegerRangeViolation } from '../protocol/integers.js';
import { getValidator } from '../protocol/schemas.js';
import { actionCancel, actionStatusPull, actionSubmit, finish, updateActions, worldTick } from './actions.js';
import type { CommonConfig } from './config.js';
import { RpcFailure, fail, failRpc } from './failure.js';
import { attachStream, receiveStreamBinary, streamFrames, streamLost } from './frames.js';
import { checkRetention, checkWatchdog, heartbeat, sendTelemetry } from './liveness.js';
import { worldReset } from './reset.js';
import { ParamsValidator } from './params-validator.js';
import {
  closeSession,
  initialize,
  obsSubscribe,
  obsUnsubscribe,
  ping,
  sessionClose,
  sessionOpen,
  sessionResume,
  suspend,
} from './session-methods.js';
import type { Session, SessionState } from './session.js';
import type { DemoSim } from './sim.js';
import type { ConnId, FrameOutput, JsonObject, Output } from './types.js';
import { MS, isPreExecution } from './types.js';

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

type Handler = (w: DemoWorld, c: ConnState, id: JsonRpcId, p: JsonObject) => void;

const HANDLERS: Readonly<Record<string, Handler>> = {
  initialize,
  'world.manifest': (w, c, id) => w.reply(c.id, id, w.manifest),
  ping,
  'session.open': sessionOpen,
  'session.resume': sessionResume,
  'session.close': sessionClose,
  'obs.subscribe': obsSubscribe,
  'obs.unsubscribe': obsUnsubscribe,
  'action.submit': actionSubmit,
  'action.cancel': actionCancel,
  'action.status': actionStatusPull,
  'world.tick': worldTick,
  'world.reset': worldReset,
};

const NEEDS_SESSION = new Set([
  'session.close',
  'obs.subscribe',
  'obs.unsubscribe',
  'action.submit',
  'action.cancel',
  'action.status',
  'world.tick',
  'world.reset',
]);
/** Refused with AWP_SESSION_EXPIRED while the session is closing (AWP-SES-011). */
const REFUSED_WHILE_CLOSING = new Set([
  'action.submit',
  'action.cancel',
  'obs.subscribe',
  'obs.unsubscribe',
  'world.tick',
  'world.reset',
]);

export class DemoWorld {
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
  private lastStepNs: number | null = null;
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

  // ------------------------------------------------------------------ entry points

  /** A control connection was accepted (after authentication). */
  connect(conn: ConnId, now: number): Output[] {
    this.now = now;
    this.conns.set(conn, {
      id: conn,
      initialized: false,
      consumes: new Set(),
      maxObsRateHz: undefined,
      session: null,
      lastRxNs: now,
      lastPingNs: now,
      nextPingId: 1,
    });
    return this.flush();
  }

  /** One text message on a control connection (or, illegally, on a stream connection). */
  receiveText(conn: ConnId, text: string, now: number): Output[] {
    this.now = now;
    if (this.streams.has(conn)) {
      this.emit({ kind: 'close', conn, code: 1002, reason: 'AWP_MALFORMED' }); // AWP-TRN-013: binary only
      return this.flush();
    }
    const c = this.conns.get(conn);
    if (c === undefined) return this.flush();
    c.lastRxNs = now;
    const msg = parseMessage(text);
    if (msg.kind === 'invalid') {
      if (!msg.wasResponse) this.sendError(conn, msg.id, msg.error);
      return this.flush();
    }
    const s = c.session;
    // Only messages the agent originates hold off the watchdog; answers to world pings do not (AWP-SAF-003).
    if (s !== null && (msg.kind === 'request' || msg.kind === 'notification')) s.lastAgentNs = now;
    // Results the world receives answer its own pings (AWP-CTL-009 covers their stamps too).
    const bad = findMessageIntegerRangeViolation(msg, 'ping');
    if (bad !== null) {
      this.integerRange(c, msg.kind === 'request' ? msg.id : null, bad);
      return this.flush();
    }
    if (msg.kind === 'request') this.request(c, msg.id, msg.method, msg.params);
    // Notifications (obs.report, cmd.frame: accepted, AWP-OBS-007; this world has no command channels) and
    // responses (pongs) need nothing beyond the liveness stamps above.
    return this.flush();
  }

  /** A stream connection presenting `token` as its bearer credential (AWP-TRN-013). */
  attachStream(conn: ConnId, token: string, now: number): Output[] {
    this.now = now;
    attachStream(this, conn, token);
    return this.flush();
  }

  /** One binary message on a stream connection. */
  receiveBinary(conn: ConnId, data: Uint8Array, now: number): Output[] {
    this.now = now;
    if (this.streams.has(conn)) receiveStreamBinary(this, conn, data);
    else if (this.conns.has(conn)) this.emit({ kind: 'close', conn, code: 1002, reason: 'AWP_MALFORMED' });
    return this.flush();
  }

  /** A control or stream connection closed. */
  disconnect(conn: ConnId, now: number): Output[] {
    this.now = now;
    if (this.streams.has(conn)) {
      streamLost(this, conn);
      return this.flush();
    }
    const c = this.conns.get(conn);
    this.conns.delete(conn);
    if (c?.session != null && c.session.conn === conn) suspend(this, c.session, 'connection_lost');
    return this.flush();
  }

  /** Run the simulation and every timer: call every few milliseconds. */
  advance(now: number): Output[] {
    this.now = now;
    if (!this.lockstep) {
      const last = this.lastStepNs ?? now;
      for (let dt = now - last; dt > 0; dt -= 5 * MS) this.sim.step(Math.min(dt, 5 * MS));
      this.lastStepNs = now;
    }
    for (const s of [...this.sessions.values()]) {
      if (!this.lockstep) {
        updateActions(this, s);
        checkWatchdog(this, s);
      }
      checkRetention(this, s);
    }
    if (!this.lockstep) {
      for (const s of [...this.sessions.values()]) {
        if (s.conn === null) continue;
        streamFrames(this, s);
        sendTelemetry(this, s);
      }
    }
    for (const c of [...this.conns.values()]) heartbeat(this, c);
    return this.flush();
  }

  /** E-stop (an operator's, for tests and demos): ends every non-terminal action (AWP-EVT-002). */
  engageEstop(now: number, source = 'operator'): Output[] {
    this.now = now;
    if (!this.estop) {
      this.estop = true;
      this.sim.halt();
      for (const s of [...this.sessions.values()]) {
        for (const e of this.embodimentChannels.keys())
          this.event(s, 'e_stop_engaged', { embodiment: e, source });
        for (const a of [...s.actions.values()]) {
          if (a.state === 'executing' || a.state === 'cancelling') {
            finish(this, s, a, 'failed', { reason: 'e_stop', aborted: true });
          } else if (isPreExecution(a.state)) {
            finish(this, s, a, 'cancelled', { reason: 'e_stop' });
          }
        }
      }
    }
    return this.flush();
  }

  releaseEstop(now: number): Output[] {
    this.now = now;
    if (this.estop) {
      this.estop = false;
      for (const s of [...this.sessions.values()]) {
        for (const e of this.embodimentChannels.keys()) this.event(s, 'e_stop_released', { embodiment: e });
      }
    }
    return this.flush();
  }

  /**
   * The bytes to write for a frame output, as it is handed to the transport: streaming frames get `ts_send_ns`
   * stamped now (AWP-OBS-006) and feed the pipeline-latency telemetry (AWP-TIM-006).
   */
  encodeFrame(o: FrameOutput, now: number): string | Buffer {
    let frame = o.frame;
    if (!this.lockstep) {
      const tsSend = Math.max(now - this.originNs, frame.ts_mono_ns);
      frame = { ...frame, ts_send_ns: tsSend };
      this.sessions.get(o.session)?.telemetry.frameSent(frame.channel_id, tsSend - frame.ts_mono_ns);
    }
    const full = { ...frame, vendor: [] };
    return o.binding === 'ws' ? encodeFrame(full) : notificationText('obs.frame', frameToInline(full));
  }

  /** Whether a stream connection presenting `token` would be accepted (for refusing the upgrade early). */
  streamTokenValid(token: string): boolean {
    const s = this.tokens.get(token);
    return (
      s !== undefined && s.conn !== null && s.closingReason === null && this.config.streamUrl !== undefined
    );
  }

  // ------------------------------------------------------------------ plumbing for the handler modules

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

  // ------------------------------------------------------------------ requests

  private request(c: ConnState, id: JsonRpcId, method: string, rawParams: unknown): void {
    try {
      const handler = HANDLERS[method];
      if (handler === undefined) throw failRpc('METHOD_NOT_FOUND', method);
      if (method !== 'initialize' && !c.initialized) throw failRpc('INVALID_REQUEST', 'initialize first');
      if (NEEDS_SESSION.has(method) && c.session === null) {
        throw failRpc('INVALID_REQUEST', 'no session on this connection');
      }
      if (REFUSED_WHILE_CLOSING.has(method) && c.session?.closingReason != null) {
        throw fail('AWP_SESSION_EXPIRED', 'the session is closing');
      }
      const checked = getValidator('received').params(method, rawParams ?? {}, 'request');
      if (!checked.ok) throw fail('AWP_MALFORMED', checked.issue.message);
      handler(this, c, id, (rawParams ?? {}) as JsonObject);
    } catch (err) {
      if (err instanceof RpcFailure) this.sendError(c.id, id, err.error);
      else this.sendError(c.id, id, jsonRpcError('INTERNAL_ERROR', { detail: String(err) }));
    }
  }

  /** AWP-CTL-009: answer 2006, end the session with `protocol_error`, close with 1002 AWP_INTEGER_RANGE. */
  integerRange(c: ConnState, id: JsonRpcId | null, where: string): void {
    if (id !== null)
      this.sendError(c.id, id, awpError('AWP_INTEGER_RANGE', { detail: `${where} exceeds 2^53-1` }));
    const s = c.session;
    if (s !== null && s.closingReason === null) closeSession(this, s, 'protocol_error', true);
    this.emit({ kind: 'close', conn: c.id, code: 1002, reason: 'AWP_INTEGER_RANGE' });
    this.conns.delete(c.id);
  }

  private flush(): Output[] {
    const out = this.out;
    this.out = [];
    return out;
  }
}
