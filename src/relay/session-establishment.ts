/**
 * How a relay connection comes to carry a session (sans-IO): `session.open` relayed and its
 * session.ready taken (the session stored before the agent hears of it), `session.resume` looked up (at
 * any replica) and resumed upstream, with the journal's replay after the result; or the connection handed
 * to an observer session at the hub. Refusals (a session already here, the store unreachable, the
 * session budget spent) are answered here.
 */
import { awpError, edgeError, EDGE_ERROR_CODES, type RpcErrorObject } from '../protocol/errors.js';
import { errorText, type JsonRpcId, type ParsedMessage } from '../protocol/jsonrpc.js';
import type { ResumeInFlight } from './pending-requests.js';
import type { RelayEffect } from './relay-effects.js';
import { RelaySession } from './relay-session.js';
import { RelayState } from './relay-state.js';
import { noSuchSession, resumeRefusalEnds, resumeRequest, resumeUpstream } from './resume.js';
import { adoptReady, recordFromReady, rewriteReady } from './session-ready.js';

type Response = Extract<ParsedMessage, { kind: 'result' | 'error' }>;

export abstract class SessionEstablishment extends RelayState {
  /** Relays one agent message (the dispatch, in relay-connection.ts). */
  protected abstract handleAgent(text: string, now: number): void;

  private waiting(): boolean {
    return this.lookup !== null || this.ended || this.overflowed;
  }

  protected agentOpen(id: JsonRpcId, params: unknown, text: string, now: number): void {
    if (this.refusedSession(id)) return;
    const p = (params ?? {}) as Record<string, unknown>;
    if (this.route.fanOutObservers && p.embodiment === undefined && p.embodiments === undefined) {
      // Observers are served by the hub from one shared upstream session (AWP-EMB-004).
      this.stop();
      this.emit({ kind: 'observer-open', id, params: p, initialize: this.init.params });
      return;
    }
    this.mode = p.mode === 'lockstep' ? 'lockstep' : 'streaming';
    this.opening = true;
    this.track(id, 'session.open', now);
    this.link.send(text);
  }

  protected agentResume(id: JsonRpcId, params: unknown, now: number): void {
    if (this.refusedSession(id)) return;
    const req = resumeRequest(id, params, now);
    if (!('token' in req)) return this.toAgent(errorText(id, req));
    // A token this edge's store could not have minted is unknown without asking the store: it may be
    // megabytes long, or break the store's key (a Redis cluster hash tag).
    if (!this.route.ownsToken(req.token)) return this.unknownSession(id, req.token);
    this.opening = true;
    this.lookup = req;
    this.emit({ kind: 'lookup-session', token: req.token, id, last_status_seq: req.agentLast });
  }

  /**
   * The connection now belongs to an observer session (opened, or resumed by its token): the relay
   * stops, and an upstream connection opened only for initialize is closed (it holds no session).
   */
  handOff(): RelayEffect[] {
    this.stop();
    return this.flush();
  }

  protected stop(): void {
    this.ended = true;
    this.lookup = null;
    this.opening = false;
    this.link.close(1000, 'observer served by the edge hub');
  }

  /** The store could not answer a lookup: the agent may retry; the session is not known to be gone. */
  sessionLookupFailed(detail: string): RelayEffect[] {
    return this.lookupRefused(edgeError('STORE_UNAVAILABLE', detail));
  }

  /** The token names a session of another route: unknown here (the agent may not be allowed there). */
  sessionOfAnotherRoute(): RelayEffect[] {
    this.emit({ kind: 'resume-unknown' });
    return this.lookupRefused(awpError('AWP_SESSION_UNKNOWN', 'this token names no session of this route'));
  }

  /** No session here for `token`: expired if this edge could have minted it, else unknown (AWP-SES-008). */
  private unknownSession(id: JsonRpcId, token: string): void {
    this.emit({ kind: 'resume-unknown' });
    this.toAgent(errorText(id, noSuchSession(token, this.route)));
  }

  /** The store answered with a record the edge cannot read: the session cannot be resumed, anywhere. */
  sessionUnreadable(): RelayEffect[] {
    return this.lookupRefused(
      awpError(
        'AWP_SESSION_UNKNOWN',
        "the edge cannot read this session's stored record; open a new session",
      ),
    );
  }

  private lookupRefused(refusal: RpcErrorObject): RelayEffect[] {
    const req = this.lookup;
    this.lookup = null;
    this.opening = false;
    if (req !== null && !this.ended) this.toAgent(errorText(req.id, refusal));
    return this.flush();
  }

  /** The shell's answer to `lookup-session`: the live or stored session, or null if none. */
  sessionLookedUp(found: RelaySession | null, now: number): RelayEffect[] {
    const req = this.lookup;
    this.lookup = null;
    if (req === null || this.ended || this.overflowed) return this.flush(); // closed, or being closed
    if (found === null) {
      this.opening = false;
      this.unknownSession(req.id, req.token);
    } else {
      const session = found;
      this.session = session;
      session.attachment = this;
      this.emit({ kind: 'session-attached', session });
      if (session.journal.acknowledge(req.agentLast)) {
        this.emit({ kind: 'journal-ack', session, status_seq: req.agentLast });
      }
      const { text, inFlight } = resumeUpstream(req, session);
      this.pending.track(req.id, { method: 'session.resume', sent_at: req.now, resume: inFlight });
      this.link.send(text);
    }
    // Messages the agent sent while its session was being looked up, in order.
    // Until another lookup begins, or the connection ends or is being closed.
    while (this.agentBacklog.length > 0 && !this.waiting()) {
      this.handleAgent(this.agentBacklog.shift()!, now);
    }
    return this.flush();
  }

  /**
   * Answers a session.open/resume the edge cannot take now: the connection carries a session already,
   * the store is unreachable, or the credential's session budget is spent.
   */
  protected refusedSession(id: JsonRpcId): boolean {
    if (this.session !== null || this.opening) {
      this.toAgent(
        errorText(id, awpError('AWP_SESSION_EXISTS', 'this connection already carries a session')),
      );
      return true;
    }
    const refused = this.route.admitSession();
    if (refused === undefined) return false;
    this.toAgent(errorText(id, refused));
    this.emit({
      kind: 'rejected',
      reason: refused.code === EDGE_ERROR_CODES.BUDGET_EXCEEDED ? 'budget_sessions' : 'store_unavailable',
    });
    return true;
  }

  protected sessionOpened(msg: Response, text: string): void {
    this.opening = false;
    const ready = msg.kind === 'result' ? (msg.result as Record<string, unknown>) : null;
    const record = ready !== null ? recordFromReady(ready, this.route, this.mode) : null;
    if (msg.kind !== 'result') return this.toAgent(text); // the world refused: its error, as it is
    if (ready === null || record === null) return this.malformedReady(msg.id, 'session.open');
    const session = new RelaySession(record);
    this.session = session;
    session.attachment = this;
    this.seq.reset(); // a connection may carry a new session after session.close: seqs start again
    this.emit({ kind: 'session-created', session });
    adoptReady(session, ready, this.manifest);
    this.toAgent(rewriteReady(msg.id, ready, session, this.route));
  }

  protected sessionResumed(msg: Response, text: string, resume: ResumeInFlight): void {
    this.opening = false;
    const session = resume.session;
    if (msg.kind === 'error') {
      // The world no longer holds the session (expired, or restarted: AWP-SES-008).
      const code = msg.error.code;
      if (resumeRefusalEnds(code)) this.endSession(session, `resume refused upstream (${code})`);
      else this.detach('resume refused upstream');
      this.toAgent(text);
      return;
    }
    const ready = msg.result;
    if (typeof ready !== 'object' || ready === null || Array.isArray(ready))
      return this.malformedReady(msg.id, 'session.resume'); // found by test/property (result: null)
    adoptReady(session, ready as Record<string, unknown>, this.manifest);
    this.toAgent(rewriteReady(msg.id, ready as Record<string, unknown>, session, this.route));
    // Replay from the journal what the world was told the edge holds; the world replays the rest.
    for (const text of resume.replay) this.emit({ kind: 'to-agent', text, journaled: true });
    this.seq.resumed(resume.agentLast, resume.upstreamAfter);
    this.emit({ kind: 'resumed', session, replayed: resume.replay.length });
  }

  /**
   * A result that is no session.ready: the world may hold a session the edge cannot, and its text may
   * carry the world's own token or URLs, so it is not relayed (found by test/fuzz); the session ends on
   * both hops, as for any protocol error of the world's.
   */
  private malformedReady(id: JsonRpcId, method: 'session.open' | 'session.resume'): void {
    this.emit({
      kind: 'dropped',
      from: 'world',
      reason: 'invalid',
      detail: `${method} result is no session.ready`,
    });
    this.toAgent(errorText(id, edgeError('UPSTREAM_UNAVAILABLE', "the world's session.ready was malformed")));
    this.endForProtocolError('world sent a malformed session.ready', 'malformed session.ready', 1014);
  }
}
