/**
 * The world side of AWP Core as a sans-IO state machine, shared by the demo worlds. Every entry point takes the
 * current time (`now`, ns on the server's monotonic clock) and returns the outputs to perform. Nothing here reads
 * a clock, starts a timer or touches a socket; the server calls `advance(now)` every few milliseconds. The state
 * and the handlers' plumbing are in world-state.ts; this adds the entry points and request dispatch.
 */
import { awpError, jsonRpcError } from '../protocol/errors.js';
import { encodeFrame } from '../protocol/frame-encode.js';
import { frameToInline } from '../protocol/inline-frame.js';
import { notificationText, parseMessage } from '../protocol/jsonrpc.js';
import type { JsonRpcId } from '../protocol/jsonrpc.js';
import { findMessageIntegerRangeViolation } from '../protocol/integers.js';
import { getValidator } from '../protocol/schemas.js';
import { actionCancel, actionStatusPull, actionSubmit, updateActions, worldTick } from './actions.js';
import { RpcFailure, fail, failRpc } from './failure.js';
import { attachStream, receiveStreamBinary, streamFrames, streamLost } from './frames.js';
import { checkRetention, checkWatchdog, heartbeat, sendTelemetry } from './liveness.js';
import { worldReset } from './reset.js';
import {
  initialize,
  obsSubscribe,
  obsUnsubscribe,
  ping,
  sessionClose,
  sessionOpen,
  sessionResume,
} from './session-methods.js';
import { closeSession, finish, suspend } from './transitions.js';
import type { ConnId, FrameOutput, JsonObject, Output } from './types.js';
import { MS, isPreExecution } from './types.js';
import { WorldState, type ConnState } from './world-state.js';

type Handler = (w: WorldState, c: ConnState, id: JsonRpcId, p: JsonObject) => void;

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

export class DemoWorld extends WorldState {
  private lastStepNs: number | null = null;

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
}
