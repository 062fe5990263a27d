/**
 * The relay state machine for one agent control connection (sans-IO).
 *
 * One agent connection maps to one upstream connection and at most one session (AWP-CTL-007).
 * Messages pass as the text they arrived in; the edge rewrites only session tokens,
 * `stream_endpoints` and the acknowledgement in the agent's own pings, and it never originates a
 * JSON-RPC message upstream (AWP-SAF-003): when a session ends for a protocol violation the edge
 * closes the upstream connection, so the world sees a transport loss and runs its watchdog.
 *
 * Every request id the agent has pending is unique (JSON-RPC): a duplicate is refused, never forwarded,
 * so each world response is matched to exactly one request and rewritten (tokens, endpoints) as it must.
 *
 * This file is the dispatch and the session's lifetime on the connection; the concerns it dispatches to
 * are beside it: the upstream link, requests in flight, the initialize cache, resume, status_seq
 * sequencing and the session.ready rewrite. Inputs are method calls; outputs are effects the I/O shell
 * carries out in order.
 */
import { pongText } from '../protocol/clock-sync.js';
import { awpError, edgeError, jsonRpcError } from '../protocol/errors.js';
import { findMessageIntegerRangeViolation, isCount, isOutOfIntegerRange } from '../protocol/integers.js';
import { errorText, parseMessage, type JsonRpcId, type ParsedMessage } from '../protocol/jsonrpc.js';
import { observeActionState, observeSimClock } from '../policy/admission.js';
import { channelTable } from './channels.js';
import { key, MAX_AGENT_REQUESTS } from './pending-requests.js';
import type { RelayEffect } from './relay-effects.js';
import { invalidParams } from './resume.js';
import { adoptGrant, frameRoute } from './session-ready.js';
import { SessionEstablishment } from './session-establishment.js';

const CLOSE_UPSTREAM_LOST = 1014; // "Bad Gateway" (RFC 6455 registry): the upstream hop failed.

type Response = Extract<ParsedMessage, { kind: 'result' | 'error' }>;

export class RelayConnection extends SessionEstablishment {
  // ------------------------------------------------------------------ agent side

  fromAgent(text: string, now: number): RelayEffect[] {
    if (this.ended || this.overflowed) return [];
    if (this.lookup !== null) {
      if (!this.agentBacklog.push(text)) this.queueFull();
      return this.flush();
    }
    this.handleAgent(text, now);
    return this.flush();
  }

  agentClosed(): RelayEffect[] {
    if (this.ended) return [];
    this.ended = true;
    // Mirror the drop at once so the world suspends and runs its watchdog and reconnect window
    // exactly as if the agent had dropped (AWP-SES-003, AWP-SAF-003).
    this.link.close(1001, 'agent connection lost');
    this.detach('agent connection lost');
    return this.flush();
  }

  protected handleAgent(text: string, now: number): void {
    const msg = parseMessage(text, this.route.maxJsonDepth);
    if (msg.kind === 'invalid') {
      if (!msg.wasResponse) this.toAgent(errorText(msg.id, msg.error));
      const reason = msg.tooDeep === true ? 'too_deep' : 'invalid';
      this.emit({ kind: 'dropped', from: 'agent', reason, detail: msg.error.message });
      return;
    }
    // Ids are compared as numbers: beyond 2^53 - 1 two ids could be the same number (AWP-CTL-009).
    const violation =
      msg.kind !== 'notification' && isOutOfIntegerRange(msg.id)
        ? '/id'
        : findMessageIntegerRangeViolation(msg);
    if (violation !== null) return this.integerRangeFromAgent(msg, violation);
    if (msg.kind === 'request') return this.agentRequest(msg.id, msg.method, msg.params, text, now);
    if (msg.kind === 'notification') {
      this.link.send(text, msg.method === 'cmd.frame' ? frameRoute(msg.params, this.session) : undefined);
      return;
    }
    // A response to a request of the world's (its pings): pass it on unchanged; one to an id the world
    // never sent would be a response the world cannot place, so it stays here.
    if (msg.id !== null && !this.pending.answersWorld(msg.id)) {
      this.emit({
        kind: 'dropped',
        from: 'agent',
        reason: 'unknown_response_id',
        detail: `response to id ${JSON.stringify(msg.id)}, which the world did not send`,
      });
      return;
    }
    this.link.send(text);
  }

  private agentRequest(id: JsonRpcId, method: string, params: unknown, text: string, now: number): void {
    if (this.pending.has(id) || this.init.isDeferred(id, this.link.state)) {
      const detail = `request id ${JSON.stringify(id)} is already pending on this connection`;
      this.toAgent(errorText(id, jsonRpcError('INVALID_REQUEST', { detail })));
      this.emit({ kind: 'rejected', reason: 'duplicate_id' });
      return;
    }
    if (this.pending.size >= MAX_AGENT_REQUESTS) {
      const detail = `${MAX_AGENT_REQUESTS} requests are already waiting for the world on this connection`;
      this.toAgent(errorText(id, edgeError('BUDGET_EXCEEDED', detail)));
      this.emit({ kind: 'rejected', reason: 'requests_in_flight' });
      return;
    }
    switch (method) {
      case 'initialize':
        return this.agentInitialize(id, params, text, now);
      case 'session.open':
        return this.agentOpen(id, params, text, now);
      case 'session.resume':
        return this.agentResume(id, params, now);
      case 'ping':
        if (this.link.state === 'none' && this.session === null) return this.sessionlessPing(id, params, now);
        return this.agentPing(id, params, text, now);
      case 'action.submit':
        if (!this.admit(id, params, now)) return;
        break;
      case 'safety.approval.respond':
        if (!this.route.approver) {
          // An agent never reaches approver power through the edge's credential (AWP-APR-007).
          this.toAgent(errorText(id, awpError('AWP_FORBIDDEN', 'this connection is not an approver')));
          this.emit({ kind: 'rejected', reason: 'not_an_approver' });
          return;
        }
        break;
      case 'world.manifest': {
        const cached = this.link.state === 'none' ? this.init.manifestReply(id) : undefined;
        if (cached !== undefined) return this.toAgent(cached);
        break;
      }
    }
    this.track(id, method, now);
    this.link.send(text);
  }

  private agentInitialize(id: JsonRpcId, params: unknown, text: string, now: number): void {
    // An approver must reach the world at once: it opens no session, and the world only sends approval
    // requests to connections it knows (AWP-APR-007).
    const cacheable = this.link.state === 'none' && !this.route.approver;
    const answer = this.init.fromAgent(id, params, text, cacheable);
    if ('reply' in answer) {
      this.manifest = channelTable(answer.manifest);
      this.toAgent(answer.reply);
      return;
    }
    this.pending.track(id, { method: 'initialize', sent_at: now, initializeKey: answer.key });
    this.link.send(text);
  }

  /**
   * A ping on a connection that has no upstream yet (its initialize came from the cache): answered by
   * the edge, on its own clock, which AWP-SES-012 says such pongs carry (they never feed an offset).
   */
  private sessionlessPing(id: JsonRpcId, params: unknown, now: number): void {
    this.toAgent(pongText(id, params, Math.round(now * 1e6)));
  }

  /** The edge's admission check (AWP-ENV-004); false when it answered the submission itself. */
  private admit(id: JsonRpcId, params: unknown, now: number): boolean {
    const refusal = this.admission.check(this.owned()?.admission ?? null, key(id), params, now);
    if (refusal === null) return true;
    this.toAgent(errorText(id, refusal));
    this.emit({ kind: 'rejected', reason: 'max_action_rate_hz' });
    return false;
  }

  private agentPing(id: JsonRpcId, params: unknown, text: string, now: number): void {
    const last = (params as { last_status_seq?: unknown } | undefined)?.last_status_seq;
    if (last !== undefined && !isCount(last)) {
      this.toAgent(
        errorText(id, invalidParams('ping last_status_seq must be an integer from 0 to 2^53 - 1')),
      );
      return;
    }
    const session = this.owned();
    if (session !== null && last !== undefined && last > session.journal.highWaterMark) {
      // Every status_seq reaches the agent through the edge's journal, so an acknowledgement above its
      // high-water mark names notifications nobody issued; taking it would drop the ones that follow.
      this.toAgent(
        errorText(
          id,
          invalidParams(
            `ping last_status_seq ${last} is beyond the highest status_seq issued in this session (${session.journal.highWaterMark})`,
          ),
        ),
      );
      return;
    }
    this.track(id, 'ping', now);
    this.link.send(session === null || last === undefined ? text : this.seq.ping(text, last, session));
  }

  private integerRangeFromAgent(msg: ParsedMessage, pointer: string): void {
    // AWP-CTL-009: answer the carrying request, end the session, close with 1002.
    if (msg.kind === 'request') {
      this.toAgent(errorText(msg.id, awpError('AWP_INTEGER_RANGE', `${pointer} exceeds 2^53 - 1`)));
    }
    this.endForProtocolError('AWP_INTEGER_RANGE', `agent sent an out-of-range integer at ${pointer}`);
  }

  // ------------------------------------------------------------------ upstream side

  upstreamOpened(): RelayEffect[] {
    if (this.ended || this.link.state !== 'dialing') return this.flush();
    // The agent's own initialize, answered earlier from the cache, goes first; its result is checked.
    this.link.opened(this.init.handshake);
    return this.flush();
  }

  /** The dial failed: answer what waits for the world with a clear, retryable error. */
  upstreamFailed(detail: string): RelayEffect[] {
    if (this.ended) return [];
    this.link.close();
    for (const text of this.link.takeQueued()) {
      const msg = parseMessage(text);
      if (msg.kind === 'request') {
        this.pending.take(msg.id);
        this.toAgent(errorText(msg.id, edgeError('UPSTREAM_UNAVAILABLE', detail)));
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
    this.link.close();
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
    const msg = parseMessage(text, this.route.maxJsonDepth);
    if (msg.kind === 'invalid') {
      const reason = msg.tooDeep === true ? 'too_deep' : 'invalid';
      this.emit({ kind: 'dropped', from: 'world', reason, detail: msg.error.message });
      return this.flush();
    }
    const requestMethod = msg.kind === 'result' ? this.pending.get(msg.id)?.method : undefined;
    const violation = findMessageIntegerRangeViolation(msg, requestMethod);
    if (violation !== null) {
      this.endForProtocolError('AWP_INTEGER_RANGE', `world sent an out-of-range integer at ${violation}`);
      return this.flush();
    }
    if (msg.kind === 'result' || msg.kind === 'error') this.upstreamResponse(msg, text, now);
    else if (msg.kind === 'notification') this.upstreamNotification(msg.method, msg.params, text, now);
    else {
      // The world's own requests (pings) go to the agent, which answers them.
      this.pending.fromWorld(msg.id);
      this.toAgent(text);
    }
    return this.flush();
  }

  private upstreamResponse(msg: Response, text: string, now: number): void {
    if (msg.id === null) {
      this.toAgent(text); // the world could not read something the agent sent: the agent should know
      return;
    }
    if (this.init.isDeferred(msg.id, this.link.state)) return this.deferredInitializeAnswered(msg);
    const req = this.pending.take(msg.id);
    if (req === undefined) {
      // Nothing the agent asked: a response the agent cannot place (and the edge cannot rewrite).
      this.emit({
        kind: 'dropped',
        from: 'world',
        reason: 'unknown_response_id',
        detail: `response to id ${JSON.stringify(msg.id)}, which the edge did not send`,
      });
      return;
    }
    const ok = msg.kind === 'result';
    this.emit({ kind: 'rpc-done', method: req.method, sent_at: req.sent_at, outcome: ok ? 'ok' : 'error' });
    const session = this.session;
    switch (req.method) {
      case 'initialize':
        if (ok) {
          this.init.remember(req.initializeKey, msg.result);
          this.manifest = channelTable(msg.result);
        }
        break;
      case 'session.open':
        return this.sessionOpened(msg, text);
      case 'session.resume':
        return this.sessionResumed(msg, text, req.resume!);
      case 'action.submit':
        this.admission.answered(session?.admission ?? null, key(msg.id), ok ? msg.result : undefined, now);
        if (ok) {
          observeSimClock(session?.admission ?? null, msg.result);
          observeActionState(session?.admission ?? null, msg.result, now);
          if (!this.seq.resultTransition(msg.result, this.owned())) return this.statusSeqGap();
        }
        break;
      case 'action.cancel':
        if (!ok) break;
        observeActionState(session?.admission ?? null, msg.result, now);
        if (!this.seq.resultTransition(msg.result, this.owned())) return this.statusSeqGap();
        break;
      case 'action.status':
        if (ok) observeActionState(session?.admission ?? null, msg.result, now);
        break;
      case 'world.tick':
        // The simulated clock moved by an amount the edge cannot see yet (AWP-TIM-013).
        if (ok && session !== null) session.admission.simNowUncertain = true;
        break;
      case 'session.close':
        this.toAgent(text);
        if (ok && session !== null) this.endSession(session, 'session closed');
        return;
      case 'obs.subscribe':
      case 'obs.unsubscribe':
        if (ok && session !== null) adoptGrant(session, this.manifest, msg.result);
        break;
      case 'ping':
        // The agent's own exchange doubles as the edge's sample of the upstream session clock.
        if (ok) this.clockSample(msg.result, req.sent_at, now);
        break;
    }
    this.toAgent(text);
  }

  /**
   * The world's status_seq is not a count, or jumped further than the journal holds: the world broke
   * the sequence (AWP-CTL-008).
   */
  private statusSeqGap(): void {
    // The agent is told the upstream failed (1014), the world that its peer saw a protocol error (1002).
    this.endForProtocolError(
      'AWP_STATUS_SEQ_GAP',
      'world status_seq broke the sequence (not an integer, or too far ahead)',
      CLOSE_UPSTREAM_LOST,
    );
  }

  private clockSample(result: unknown, sentAt: number, now: number): void {
    const r = (result ?? {}) as { receive_ns?: unknown; transmit_ns?: unknown };
    if (this.session === null || typeof r.receive_ns !== 'number' || typeof r.transmit_ns !== 'number')
      return;
    this.session.clock.add(Math.round(sentAt * 1e6), r.receive_ns, r.transmit_ns, Math.round(now * 1e6));
  }

  private deferredInitializeAnswered(msg: Response): void {
    if (this.init.settle(msg)) return this.link.ready();
    // MAN-003: the manifest the agent holds is no longer the world's; it must initialize again.
    const changed = edgeError(
      'MANIFEST_CHANGED',
      "the world's manifest changed since initialize: reconnect and initialize again",
    );
    for (const text of this.link.takeQueued()) {
      const queued = parseMessage(text);
      if (queued.kind === 'request') this.toAgent(errorText(queued.id, changed));
    }
    this.pending.clear();
    this.emit({ kind: 'close-agent', code: 1012, reason: 'world manifest changed; initialize again' });
    this.link.close(1000, 'world manifest changed');
    this.ended = true;
    this.detach('world manifest changed');
  }

  private upstreamNotification(method: string, params: unknown, text: string, now: number): void {
    observeSimClock(this.session?.admission ?? null, params);
    if (method === 'action.status') observeActionState(this.session?.admission ?? null, params, now);
    switch (method) {
      case 'obs.frame':
        this.toAgent(text, frameRoute(params, this.session));
        return;
      case 'action.status':
      case 'world.event':
      case 'session.state': {
        const p = params as { status_seq?: unknown; state?: unknown } | undefined;
        const session = this.owned();
        if (p?.status_seq === undefined || session === null) return this.toAgent(text);
        const outcome = this.seq.notification(method, p.status_seq, text, session);
        if (outcome === 'gap') return this.statusSeqGap();
        if (outcome === 'forwarded' && method === 'session.state' && p.state === 'closed')
          this.endSession(session, 'session closed upstream');
        return;
      }
      case 'safety.approval_requested':
        // Approval traffic never reaches agents (AWP-APR-007), only approver connections.
        if (this.route.approver) this.toAgent(text);
        else
          this.emit({
            kind: 'dropped',
            from: 'world',
            reason: 'approval_request',
            detail: 'approval requests are not forwarded to agents',
          });
        return;
      default:
        this.toAgent(text);
    }
  }
}
