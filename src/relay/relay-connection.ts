/**
 * The relay state machine for one agent control connection (sans-IO).
 *
 * One agent connection maps to one upstream connection and at most one session (AWP-CTL-007).
 * Messages pass as the text they arrived in; the edge rewrites only session tokens,
 * `stream_endpoints` and the acknowledgement in the agent's own pings, and it never originates a
 * JSON-RPC message upstream while the agent is in control (AWP-SAF-003): the only exception is the
 * `session.close` that ends a session the agent broke with an out-of-range integer (AWP-CTL-009).
 *
 * Inputs are method calls; outputs are effects the I/O shell carries out in order.
 */
import { awpError, edgeError, EDGE_ERROR_CODES, type RpcErrorObject } from '../protocol/errors.js';
import { findMessageIntegerRangeViolation } from '../protocol/integers.js';
import { errorText, parseMessage, type JsonRpcId, type ParsedMessage } from '../protocol/jsonrpc.js';
import type { RelaySessionRecord } from '../store/session-store.js';
import { RelaySession, type StreamEndpoint } from './relay-session.js';
import { channelTable, grantedChannels, type ManifestChannels } from './channels.js';
import type { FrameRoute, RelayEffect, RelayRoute } from './relay-effects.js';
import { AdmissionGate, limitersFor, observeSimClock } from '../policy/admission.js';

type UpstreamState = 'none' | 'dialing' | 'handshake' | 'ready' | 'closed';

interface Pending {
  readonly method: string;
  readonly sent_at: number;
  /** For session.resume: the agent's last_status_seq and what the edge asked the world to replay after. */
  readonly resume?: {
    readonly agentLast: number;
    readonly upstreamAfter: number;
    readonly session: RelaySession;
    /** What the edge replays itself, taken when the resume went upstream: acknowledgements the agent
     *  sends before the result (e.g. in a ping) must not trim what this resume still owes it. */
    readonly replay: readonly string[];
  };
}

/** Ids of the edge's own requests upstream: a namespace agents' ids cannot collide with in practice. */
const EDGE_CLOSE_ID = 'awp-edge:session.close';
const CLOSE_UPSTREAM_LOST = 1014; // "Bad Gateway" (RFC 6455 registry): the upstream hop failed.

export class RelayConnection {
  private upstream: UpstreamState = 'none';
  private readonly upstreamQueue: string[] = [];
  private readonly agentBacklog: string[] = [];
  private lookupPending = false;
  /** The agent's `initialize` answered from the cache, to be sent when the upstream is dialled. */
  private deferredInitialize: { id: JsonRpcId; text: string; paramsKey: string; answered: string } | null =
    null;
  private readonly pending = new Map<string, Pending>();
  private session: RelaySession | null = null;
  private opening = false;
  private manifest: ManifestChannels | null = null;
  private mode: 'lockstep' | 'streaming' | null = null;
  /** Highest status_seq forwarded to the agent on this connection (redeliveries are dropped). */
  private delivered = 0;
  private ended = false;
  private out: RelayEffect[] = [];
  private readonly admission = new AdmissionGate();

  constructor(private readonly route: RelayRoute) {}

  get currentSession(): RelaySession | null {
    return this.session;
  }

  get isClosed(): boolean {
    return this.ended;
  }

  // ------------------------------------------------------------------ agent side

  fromAgent(text: string, now: number): RelayEffect[] {
    if (this.ended) return [];
    if (this.lookupPending) {
      this.agentBacklog.push(text);
      return [];
    }
    this.handleAgent(text, now);
    return this.flush();
  }

  agentClosed(): RelayEffect[] {
    if (this.ended) return [];
    this.ended = true;
    // Mirror the drop at once so the world suspends and runs its watchdog and reconnect window
    // exactly as if the agent had dropped (AWP-SES-003, AWP-SAF-003).
    if (this.upstream !== 'none' && this.upstream !== 'closed') {
      this.emit({ kind: 'close-upstream', code: 1001, reason: 'agent connection lost' });
    }
    this.upstream = 'closed';
    this.detach('agent connection lost');
    return this.flush();
  }

  private handleAgent(text: string, now: number): void {
    const msg = parseMessage(text);
    if (msg.kind === 'invalid') {
      if (!msg.wasResponse) this.toAgent(errorText(msg.id, msg.error));
      return;
    }
    const violation = findMessageIntegerRangeViolation(msg);
    if (violation !== null) {
      this.integerRangeFromAgent(msg, violation);
      return;
    }
    if (msg.kind === 'request') {
      switch (msg.method) {
        case 'initialize':
          return this.agentInitialize(msg.id, msg.params, text, now);
        case 'session.open':
          return this.agentOpen(msg.id, msg.params, text, now);
        case 'session.resume':
          return this.agentResume(msg.id, msg.params, now);
        case 'ping':
          if (this.upstream === 'none' && this.session === null)
            return this.sessionlessPing(msg.id, msg.params, now);
          return this.agentPing(msg.id, msg.params, text, now);
        case 'action.submit':
          if (!this.admit(msg.id, msg.params, now)) return;
          break;
        case 'safety.approval.respond':
          if (!this.route.approver) {
            // An agent never reaches approver power through the edge's credential (AWP-APR-007).
            this.toAgent(errorText(msg.id, awpError('AWP_FORBIDDEN', 'this connection is not an approver')));
            this.emit({ kind: 'rejected', reason: 'not_an_approver' });
            return;
          }
          break;
        case 'world.manifest':
          if (this.upstream === 'none' && this.deferredInitialize !== null) {
            this.toAgent(
              `{"jsonrpc":"2.0","id":${JSON.stringify(msg.id)},"result":${this.deferredInitialize.answered}}`,
            );
            return;
          }
          break;
      }
      this.track(msg.id, msg.method, now);
      this.toUpstream(text);
      return;
    }
    if (msg.kind === 'notification') {
      if (msg.method === 'cmd.frame') {
        this.toUpstream(text, this.frameRoute(msg.params));
        return;
      }
      this.toUpstream(text);
      return;
    }
    // A response to a request of the world's (its pings): pass it on unchanged.
    this.toUpstream(text);
  }

  /** The agent's initialize params (its manifest: modalities and rates matter to an observer hub). */
  private initializeParams: Record<string, unknown> | undefined;

  private agentInitialize(id: JsonRpcId, params: unknown, text: string, now: number): void {
    this.initializeParams = (params ?? undefined) as Record<string, unknown> | undefined;
    const key = JSON.stringify(params ?? null);
    // An approver must reach the world at once: it opens no session, and the world only sends approval
    // requests to connections it knows (AWP-APR-007).
    const cached = this.upstream === 'none' && !this.route.approver ? this.route.manifestFor(key) : undefined;
    if (cached !== undefined) {
      // Sessionless connections (observers-to-be, probes) cost the world nothing; the agent's own
      // initialize is sent upstream, unchanged, if and when this connection opens a relay session.
      this.deferredInitialize = { id, text, paramsKey: key, answered: cached };
      this.manifest = channelTable(JSON.parse(cached));
      this.toAgent(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${cached}}`);
      return;
    }
    this.track(id, 'initialize', now, key);
    this.toUpstream(text);
  }

  private agentOpen(id: JsonRpcId, params: unknown, text: string, now: number): void {
    if (this.session !== null || this.opening) {
      this.toAgent(
        errorText(id, awpError('AWP_SESSION_EXISTS', 'this connection already carries a session')),
      );
      return;
    }
    if (this.refusedSession(id)) return;
    const p = (params ?? {}) as Record<string, unknown>;
    if (this.route.fanOutObservers && p.embodiment === undefined && p.embodiments === undefined) {
      // Observers are served by the hub from one shared upstream session (AWP-EMB-004).
      this.stop();
      this.emit({ kind: 'observer-open', id, params: p, initialize: this.initializeParams });
      return;
    }
    const mode = p.mode;
    this.mode = mode === 'lockstep' ? 'lockstep' : 'streaming';
    this.opening = true;
    this.track(id, 'session.open', now);
    this.toUpstream(text);
  }

  private agentResume(id: JsonRpcId, params: unknown, now: number): void {
    if (this.session !== null || this.opening) {
      this.toAgent(
        errorText(id, awpError('AWP_SESSION_EXISTS', 'this connection already carries a session')),
      );
      return;
    }
    if (this.refusedSession(id)) return;
    const p = params as { session_token?: unknown; last_status_seq?: unknown } | undefined;
    if (typeof p?.session_token !== 'string' || !Number.isSafeInteger(p.last_status_seq)) {
      this.toAgent(
        errorText(id, {
          code: -32602,
          message: 'Invalid params',
          data: { retryable: false, detail: 'session.resume needs session_token and last_status_seq' },
        }),
      );
      return;
    }
    this.opening = true;
    this.lookupPending = true;
    this.resumeRequest = { id, agentLast: p.last_status_seq as number, params: p, now };
    this.emit({
      kind: 'lookup-session',
      token: p.session_token,
      id,
      last_status_seq: p.last_status_seq as number,
    });
  }

  private resumeRequest: {
    id: JsonRpcId;
    agentLast: number;
    params: Record<string, unknown>;
    now: number;
  } | null = null;

  /**
   * The connection now belongs to an observer session (opened, or resumed by its token): the relay
   * stops, and an upstream connection opened only for initialize is closed (it holds no session).
   */
  handOff(): RelayEffect[] {
    this.stop();
    return this.flush();
  }

  private stop(): void {
    this.ended = true;
    this.lookupPending = false;
    this.resumeRequest = null;
    this.opening = false;
    if (this.upstream !== 'none' && this.upstream !== 'closed') {
      this.emit({ kind: 'close-upstream', code: 1000, reason: 'observer served by the edge hub' });
    }
    this.upstream = 'closed';
  }

  /** The store could not answer a lookup: the agent may retry; the session is not known to be gone. */
  sessionLookupFailed(detail: string): RelayEffect[] {
    const req = this.resumeRequest;
    this.resumeRequest = null;
    this.lookupPending = false;
    this.opening = false;
    if (req !== null && !this.ended) this.toAgent(errorText(req.id, edgeError('STORE_UNAVAILABLE', detail)));
    return this.flush();
  }

  /** The shell's answer to `lookup-session`: the live or stored session, or null if none. */
  sessionLookedUp(found: RelaySession | null, now: number): RelayEffect[] {
    const req = this.resumeRequest;
    this.resumeRequest = null;
    this.lookupPending = false;
    if (req === null || this.ended) return this.flush();
    if (found === null) {
      this.opening = false;
      const token = req.params.session_token as string;
      this.toAgent(
        errorText(
          req.id,
          this.route.ownsToken(token)
            ? awpError('AWP_SESSION_EXPIRED', 'unknown session token or reconnect window passed')
            : awpError('AWP_SESSION_UNKNOWN', 'the edge no longer holds this session'),
        ),
      );
    } else {
      const session = found;
      this.session = session;
      session.attachment = this;
      this.emit({ kind: 'session-attached', session });
      if (session.journal.acknowledge(req.agentLast)) {
        this.emit({ kind: 'journal-ack', session, status_seq: req.agentLast });
      }
      const after = Math.max(req.agentLast, session.journal.safeAcknowledgement());
      this.pending.set(key(req.id), {
        method: 'session.resume',
        sent_at: req.now,
        resume: {
          agentLast: req.agentLast,
          upstreamAfter: after,
          session,
          replay: session.journal.replay(req.agentLast, after),
        },
      });
      this.toUpstream(
        JSON.stringify({
          jsonrpc: '2.0',
          id: req.id,
          method: 'session.resume',
          params: { ...req.params, session_token: session.record.upstream_token, last_status_seq: after },
        }),
      );
    }
    this.drainBacklog(now);
    return this.flush();
  }

  /**
   * A ping on a connection that has no upstream yet (its initialize came from the cache): answered by
   * the edge, on its own clock, which AWP-SES-012 says such pongs carry (they never feed an offset).
   */
  private sessionlessPing(id: JsonRpcId, params: unknown, now: number): void {
    const origin = (params as { origin_ns?: unknown } | undefined)?.origin_ns;
    const stamp = Math.round(now * 1e6);
    this.toAgent(
      JSON.stringify({
        jsonrpc: '2.0',
        id,
        result: { origin_ns: typeof origin === 'number' ? origin : 0, receive_ns: stamp, transmit_ns: stamp },
      }),
    );
  }

  /** The edge's admission check (AWP-ENV-004); false when it answered the submission itself. */
  private admit(id: JsonRpcId, params: unknown, now: number): boolean {
    const refusal = this.admission.check(this.owned(), key(id), params, now);
    if (refusal === null) return true;
    this.toAgent(errorText(id, refusal));
    this.emit({ kind: 'rejected', reason: 'max_action_rate_hz' });
    return false;
  }

  /** Answers a session.open/resume the edge cannot take now (store unreachable, session budget spent). */
  private refusedSession(id: JsonRpcId): boolean {
    const refused = this.route.admitSession();
    if (refused === undefined) return false;
    this.toAgent(errorText(id, refused));
    this.emit({
      kind: 'rejected',
      reason: refused.code === EDGE_ERROR_CODES.BUDGET_EXCEEDED ? 'budget_sessions' : 'store_unavailable',
    });
    return true;
  }

  /** Messages the agent sent while its session was being looked up, in order. */
  private drainBacklog(now: number): void {
    for (let text = this.agentBacklog.shift(); text !== undefined; text = this.agentBacklog.shift()) {
      this.handleAgent(text, now);
      if (this.isWaiting()) return;
    }
  }

  private isWaiting(): boolean {
    return this.lookupPending || this.ended;
  }

  private agentPing(id: JsonRpcId, params: unknown, text: string, now: number): void {
    this.track(id, 'ping', now);
    const session = this.owned();
    const p = params as { last_status_seq?: number } | undefined;
    if (session === null || p?.last_status_seq === undefined) {
      this.toUpstream(text);
      return;
    }
    if (session.journal.acknowledge(p.last_status_seq)) {
      this.emit({ kind: 'journal-ack', session, status_seq: p.last_status_seq });
    }
    // The agent's own ping carries the edge's acknowledgement: the world may drop what the edge
    // holds durably, and the edge never sends a message of its own to say so (AWP-CTL-010).
    const ack = Math.max(p.last_status_seq, session.journal.safeAcknowledgement());
    if (ack === p.last_status_seq) {
      this.toUpstream(text);
      return;
    }
    const msg = JSON.parse(text) as { params: Record<string, unknown> };
    msg.params.last_status_seq = ack;
    this.toUpstream(JSON.stringify(msg));
  }

  private integerRangeFromAgent(msg: ParsedMessage, pointer: string): void {
    // AWP-CTL-009: answer the carrying request, end the session, close with 1002.
    if (msg.kind === 'request') {
      this.toAgent(errorText(msg.id, awpError('AWP_INTEGER_RANGE', `${pointer} exceeds 2^53 - 1`)));
    }
    this.endForProtocolError('AWP_INTEGER_RANGE', `agent sent an out-of-range integer at ${pointer}`);
  }

  private endForProtocolError(reason: string, detail: string): void {
    const session = this.session;
    if (session !== null && this.upstream === 'ready') {
      this.emit({
        kind: 'to-upstream',
        text: JSON.stringify({ jsonrpc: '2.0', id: EDGE_CLOSE_ID, method: 'session.close', params: {} }),
      });
    }
    if (session !== null) this.endSession(session, detail);
    this.emit({ kind: 'close-agent', code: 1002, reason });
    if (this.upstream !== 'none' && this.upstream !== 'closed') {
      this.emit({ kind: 'close-upstream', code: 1000, reason: 'session ended: protocol error' });
    }
    this.upstream = 'closed';
    this.ended = true;
  }

  // ------------------------------------------------------------------ upstream side

  upstreamOpened(): RelayEffect[] {
    if (this.ended || this.upstream !== 'dialing') return this.flush();
    const deferred = this.deferredInitialize;
    if (deferred !== null) {
      // The agent's own initialize, answered earlier from the cache; its result is checked, not relayed.
      this.upstream = 'handshake';
      this.pending.set(key(deferred.id), { method: 'initialize:deferred', sent_at: 0 });
      this.emit({ kind: 'to-upstream', text: deferred.text });
    } else {
      this.upstream = 'ready';
      this.drainUpstreamQueue();
    }
    return this.flush();
  }

  /** The dial failed: answer what waits for the world with a clear, retryable error. */
  upstreamFailed(detail: string): RelayEffect[] {
    if (this.ended) return [];
    this.upstream = 'closed';
    for (const text of this.upstreamQueue.splice(0)) {
      const msg = parseMessage(text);
      if (msg.kind === 'request') {
        this.pending.delete(key(msg.id));
        this.toAgent(errorText(msg.id, upstreamUnavailable(detail)));
      }
    }
    if (this.session !== null && this.session.attachment === this) this.detach('upstream unavailable');
    this.opening = false;
    this.emit({ kind: 'close-agent', code: CLOSE_UPSTREAM_LOST, reason: 'upstream world unavailable' });
    this.ended = true;
    return this.flush();
  }

  upstreamClosed(): RelayEffect[] {
    if (this.ended) return [];
    this.upstream = 'closed';
    this.ended = true;
    this.route.forgetManifests();
    // Mirror the loss to the agent: it reconnects and resumes, and the world answers for the
    // session (resumed, or AWP_SESSION_UNKNOWN after a restart).
    this.detach('upstream connection lost');
    this.emit({ kind: 'close-agent', code: CLOSE_UPSTREAM_LOST, reason: 'upstream connection lost' });
    return this.flush();
  }

  fromUpstream(text: string, now: number): RelayEffect[] {
    if (this.ended) return [];
    const msg = parseMessage(text);
    if (msg.kind === 'invalid') {
      this.emit({ kind: 'dropped', what: 'upstream message', detail: msg.error.message });
      return this.flush();
    }
    const requestMethod = msg.kind === 'result' ? this.pending.get(key(msg.id))?.method : undefined;
    const violation = findMessageIntegerRangeViolation(msg, requestMethod);
    if (violation !== null) {
      this.endForProtocolError('AWP_INTEGER_RANGE', `world sent an out-of-range integer at ${violation}`);
      return this.flush();
    }
    if (msg.kind === 'result' || msg.kind === 'error') this.upstreamResponse(msg, text, now);
    else if (msg.kind === 'notification') this.upstreamNotification(msg.method, msg.params, text);
    else this.toAgent(text); // the world's own requests (pings) go to the agent, which answers them
    return this.flush();
  }

  private upstreamResponse(
    msg: Extract<ParsedMessage, { kind: 'result' | 'error' }>,
    text: string,
    now: number,
  ): void {
    if (msg.id === EDGE_CLOSE_ID) return;
    if (msg.id === null) {
      this.toAgent(text);
      return;
    }
    const k = key(msg.id);
    const req = this.pending.get(k);
    if (req === undefined) {
      this.toAgent(text);
      return;
    }
    this.pending.delete(k);
    this.emit({
      kind: 'rpc-done',
      method: req.method,
      sent_at: req.sent_at,
      outcome: msg.kind === 'result' ? 'ok' : 'error',
    });
    switch (req.method) {
      case 'initialize:deferred':
        return this.deferredInitializeAnswered(msg);
      case 'initialize':
        if (msg.kind === 'result') {
          const json = JSON.stringify(msg.result);
          this.route.rememberManifest(this.initializeKeys.get(k) ?? 'null', json);
          this.manifest = channelTable(msg.result);
        }
        this.initializeKeys.delete(k);
        this.toAgent(text);
        return;
      case 'session.open':
        return this.sessionOpened(msg, text);
      case 'session.resume':
        return this.sessionResumed(msg, text, req.resume!);
      case 'action.submit':
        this.admission.answered(this.session, k, msg.kind === 'result' ? msg.result : undefined);
        if (msg.kind === 'result') {
          observeSimClock(this.session, msg.result);
          this.resultTransition(msg.result);
        }
        this.toAgent(text);
        return;
      case 'action.cancel':
        if (msg.kind === 'result') this.resultTransition(msg.result);
        this.toAgent(text);
        return;
      case 'world.tick':
        // The simulated clock moved by an amount the edge cannot see yet.
        if (msg.kind === 'result' && this.session !== null) this.session.simNowUncertain = true; // AWP-TIM-013
        this.toAgent(text);
        return;
      case 'session.close':
        this.toAgent(text);
        if (msg.kind === 'result' && this.session !== null) this.endSession(this.session, 'session closed');
        return;
      case 'obs.subscribe':
      case 'obs.unsubscribe':
        if (msg.kind === 'result') this.updateChannels(msg.result);
        this.toAgent(text);
        return;
      case 'ping':
        // The agent's own exchange doubles as the edge's sample of the upstream session clock.
        if (msg.kind === 'result') this.clockSample(msg.result, req.sent_at, now);
        this.toAgent(text);
        return;
      default:
        this.toAgent(text);
    }
  }

  private readonly initializeKeys = new Map<string, string>();

  private clockSample(result: unknown, sentAt: number, now: number): void {
    const r = result as { receive_ns?: unknown; transmit_ns?: unknown };
    if (this.session === null || typeof r.receive_ns !== 'number' || typeof r.transmit_ns !== 'number')
      return;
    this.session.clock.add(Math.round(sentAt * 1e6), r.receive_ns, r.transmit_ns, Math.round(now * 1e6));
  }

  private deferredInitializeAnswered(msg: Extract<ParsedMessage, { kind: 'result' | 'error' }>): void {
    const deferred = this.deferredInitialize!;
    this.deferredInitialize = null;
    const now = msg.kind === 'result' ? JSON.stringify(msg.result) : null;
    if (now !== deferred.answered) {
      // MAN-003: the manifest the agent holds is no longer the world's; it must initialize again.
      if (now !== null) this.route.rememberManifest(deferred.paramsKey, now);
      for (const text of this.upstreamQueue.splice(0)) {
        const queued = parseMessage(text);
        if (queued.kind === 'request') {
          this.toAgent(
            errorText(
              queued.id,
              edgeError(
                'MANIFEST_CHANGED',
                "the world's manifest changed since initialize: reconnect and initialize again",
              ),
            ),
          );
        }
      }
      this.pending.clear();
      this.emit({ kind: 'close-agent', code: 1012, reason: 'world manifest changed; initialize again' });
      this.emit({ kind: 'close-upstream', code: 1000, reason: 'world manifest changed' });
      this.upstream = 'closed';
      this.ended = true;
      this.detach('world manifest changed');
      return;
    }
    this.upstream = 'ready';
    this.drainUpstreamQueue();
  }

  private sessionOpened(msg: Extract<ParsedMessage, { kind: 'result' | 'error' }>, text: string): void {
    this.opening = false;
    if (msg.kind === 'error') {
      this.toAgent(text);
      return;
    }
    const ready = msg.result as Record<string, unknown>;
    const upstreamToken = ready.session_token;
    if (typeof upstreamToken !== 'string' || typeof ready.session_id !== 'string') {
      this.toAgent(text); // not a session.ready; nothing to hold
      return;
    }
    const record: RelaySessionRecord = {
      edge_token: this.route.mintToken(),
      route: this.route.name,
      upstream_token: upstreamToken,
      session_id: ready.session_id,
      mode: this.mode ?? 'streaming',
      reconnect_window_ms: numberOr(ready.reconnect_window_ms, 0),
      heartbeat_interval_ms: numberOr(ready.heartbeat_interval_ms, 0),
      agent_ack: 0,
      suspended_at_ms: null,
    };
    const session = new RelaySession(record);
    this.session = session;
    session.attachment = this;
    this.emit({ kind: 'session-created', session });
    this.adoptReady(session, ready);
    this.toAgent(this.rewriteReady(msg.id, ready, session));
  }

  private sessionResumed(
    msg: Extract<ParsedMessage, { kind: 'result' | 'error' }>,
    text: string,
    resume: NonNullable<Pending['resume']>,
  ): void {
    this.opening = false;
    const session = resume.session;
    if (msg.kind === 'error') {
      // The world no longer holds the session (expired, or restarted: AWP-SES-008).
      const code = msg.error.code;
      if (code === 2003 || code === 2005) this.endSession(session, `resume refused upstream (${code})`);
      else this.detach('resume refused upstream');
      this.toAgent(text);
      return;
    }
    const ready = msg.result as Record<string, unknown>;
    this.adoptReady(session, ready);
    this.toAgent(this.rewriteReady(msg.id, ready, session));
    // Replay from the journal what the world was told the edge holds; the world replays the rest.
    const replay = resume.replay;
    for (const t of replay) this.toAgent(t);
    this.delivered = Math.max(resume.agentLast, resume.upstreamAfter);
    this.emit({ kind: 'resumed', session, replayed: replay.length });
  }

  private adoptReady(session: RelaySession, ready: Record<string, unknown>): void {
    session.upstreamEndpoints = Array.isArray(ready.stream_endpoints)
      ? (ready.stream_endpoints as StreamEndpoint[])
      : [];
    this.mode = session.record.mode;
    this.updateChannels(ready.granted);
    session.limiters = limitersFor((ready.granted as { envelopes?: unknown } | undefined)?.envelopes);
  }

  private rewriteReady(id: JsonRpcId, ready: Record<string, unknown>, session: RelaySession): string {
    const result = {
      ...ready,
      session_token: session.token,
      stream_endpoints: this.route.edgeEndpoints(session.upstreamEndpoints),
    };
    return JSON.stringify({ jsonrpc: '2.0', id, result });
  }

  private updateChannels(granted: unknown): void {
    if (this.manifest === null || this.session === null) return;
    this.session.channels = grantedChannels(this.manifest, granted);
  }

  private resultTransition(result: unknown): void {
    const r = result as { status_seq?: unknown };
    const session = this.owned();
    if (session === null || typeof r.status_seq !== 'number') return;
    // Idempotent resubmissions repeat an earlier seq and consume none (AWP-ACT-001).
    const added = session.journal.append(r.status_seq, null);
    if (added !== null) {
      this.emit({ kind: 'journal-append', session, entries: added });
      this.delivered = Math.max(this.delivered, r.status_seq);
    }
  }

  private upstreamNotification(method: string, params: unknown, text: string): void {
    observeSimClock(this.session, params);
    switch (method) {
      case 'obs.frame':
        this.toAgent(text, this.frameRoute(params));
        return;
      case 'action.status':
      case 'world.event':
      case 'session.state':
        return this.sequenced(method, params, text);
      case 'safety.approval_requested':
        // Approval traffic never reaches agents (AWP-APR-007), only approver connections.
        if (this.route.approver) this.toAgent(text);
        else
          this.emit({
            kind: 'dropped',
            what: method,
            detail: 'approval requests are not forwarded to agents',
          });
        return;
      default:
        this.toAgent(text);
    }
  }

  private sequenced(method: string, params: unknown, text: string): void {
    const p = params as { status_seq?: unknown; state?: unknown } | undefined;
    const seq = p?.status_seq;
    const session = this.owned();
    if (typeof seq !== 'number' || session === null) {
      this.toAgent(text);
      return;
    }
    if (seq <= this.delivered) {
      this.emit({ kind: 'dropped', what: method, detail: `redelivered status_seq ${seq}` });
      return;
    }
    const added = session.journal.append(seq, text);
    if (added !== null) this.emit({ kind: 'journal-append', session, entries: added });
    this.delivered = seq;
    this.toAgent(text);
    if (method === 'session.state' && p?.state === 'closed')
      this.endSession(session, 'session closed upstream');
  }

  // ------------------------------------------------------------------ plumbing

  private frameRoute(params: unknown): FrameRoute | undefined {
    const p = params as { channel_id?: unknown; ts_mono_ns?: unknown; ts_send_ns?: unknown } | undefined;
    const id = p?.channel_id;
    if (typeof id !== 'number' || this.session === null) return undefined;
    // Only streaming latest-wins frames may be replaced; reliable and per-tick frames keep their
    // place among control messages (AWP-TIM-003, AWP-TRN-009).
    return {
      channel_id: id,
      latest_wins: this.session.latestWins(id),
      channel: this.session.channels.get(id)?.name ?? 'unknown',
      ts_mono_ns: typeof p?.ts_mono_ns === 'number' ? p.ts_mono_ns : 0,
      ts_send_ns: typeof p?.ts_send_ns === 'number' ? p.ts_send_ns : undefined,
      rate_hz: this.session.channels.get(id)?.rate_hz ?? null,
    };
  }

  private track(id: JsonRpcId, method: string, now: number, initializeKey?: string): void {
    const k = key(id);
    this.pending.set(k, { method, sent_at: now });
    if (initializeKey !== undefined) this.initializeKeys.set(k, initializeKey);
  }

  private toUpstream(text: string, frame?: FrameRoute): void {
    if (this.upstream === 'ready') {
      this.emit(frame ? { kind: 'to-upstream', text, frame } : { kind: 'to-upstream', text });
      return;
    }
    if (this.upstream === 'closed') return;
    this.upstreamQueue.push(text);
    if (this.upstream === 'none') {
      this.upstream = 'dialing';
      this.emit({ kind: 'dial-upstream' });
    }
  }

  private drainUpstreamQueue(): void {
    for (const text of this.upstreamQueue.splice(0)) this.emit({ kind: 'to-upstream', text });
  }

  private toAgent(text: string, frame?: FrameRoute): void {
    this.emit(frame ? { kind: 'to-agent', text, frame } : { kind: 'to-agent', text });
  }

  private endSession(session: RelaySession, reason: string): void {
    if (session.closed) return;
    session.closed = true;
    session.attachment = null;
    if (this.session === session) this.session = null;
    this.emit({ kind: 'session-ended', session, reason });
  }

  private detach(reason: string): void {
    const session = this.session;
    if (session === null) return;
    this.session = null;
    if (session.attachment === this && !session.closed) {
      session.attachment = null;
      this.emit({ kind: 'session-detached', session, reason });
    }
  }

  /** The session, while this connection serves it (a resume elsewhere takes it over, AWP-SES-010). */
  private owned(): RelaySession | null {
    const s = this.session;
    return s !== null && s.attachment === this ? s : null;
  }

  private emit(effect: RelayEffect): void {
    this.out.push(effect);
  }

  private flush(): RelayEffect[] {
    const out = this.out;
    this.out = [];
    return out;
  }
}

function key(id: JsonRpcId): string {
  return typeof id === 'string' ? `s:${id}` : `n:${id}`;
}

function numberOr(v: unknown, fallback: number): number {
  return typeof v === 'number' ? v : fallback;
}

function upstreamUnavailable(detail: string): RpcErrorObject {
  return edgeError('UPSTREAM_UNAVAILABLE', detail);
}
