/**
 * `session.resume` through the relay (sans-IO): the agent's request is checked, the session looked up
 * (at any replica, with a shared store), and resumed upstream with the world's token after what the edge
 * can replay itself; the edge replays that from its journal after the result, the world the rest.
 */
import { awpError, jsonRpcError, type RpcErrorObject } from '../protocol/errors.js';
import { isCount } from '../protocol/integers.js';
import type { JsonRpcId } from '../protocol/jsonrpc.js';
import type { ResumeInFlight } from './pending-requests.js';
import type { RelayRoute } from './relay-effects.js';
import type { RelaySession } from './relay-session.js';

/** An agent's session.resume, waiting for the session lookup. */
export interface ResumeRequest {
  readonly id: JsonRpcId;
  readonly token: string;
  /** The agent's last_status_seq. */
  readonly agentLast: number;
  readonly params: Readonly<Record<string, unknown>>;
  readonly now: number;
}

/** The agent's request, or the -32602 to answer it with. */
export function resumeRequest(id: JsonRpcId, params: unknown, now: number): ResumeRequest | RpcErrorObject {
  const p = params as { session_token?: unknown; last_status_seq?: unknown } | undefined;
  if (typeof p?.session_token !== 'string' || p.session_token === '' || !isCount(p.last_status_seq)) {
    return invalidParams(
      'session.resume needs a session_token and a last_status_seq that is an integer from 0 to 2^53 - 1',
    );
  }
  return { id, token: p.session_token, agentLast: p.last_status_seq, params: p, now };
}

/** The resume to send upstream (the world's token, after what the edge replays) and what it owes the agent. */
export function resumeUpstream(
  req: ResumeRequest,
  session: RelaySession,
): { text: string; inFlight: ResumeInFlight } {
  const after = Math.max(req.agentLast, session.journal.safeAcknowledgement());
  const text = JSON.stringify({
    jsonrpc: '2.0',
    id: req.id,
    method: 'session.resume',
    params: { ...req.params, session_token: session.record.upstream_token, last_status_seq: after },
  });
  return {
    text,
    inFlight: {
      agentLast: req.agentLast,
      upstreamAfter: after,
      session,
      replay: session.journal.replay(req.agentLast, after),
    },
  };
}

/** The answer when no replica holds the session: expired if the edge minted the token, else unknown. */
export function noSuchSession(token: string, route: RelayRoute): RpcErrorObject {
  return route.ownsToken(token)
    ? awpError('AWP_SESSION_EXPIRED', 'unknown session token or reconnect window passed')
    : awpError('AWP_SESSION_UNKNOWN', 'the edge no longer holds this session');
}

/** Whether the world's refusal of a resume means the session is gone for good (AWP-SES-008). */
export function resumeRefusalEnds(code: number): boolean {
  return code === 2003 || code === 2005; // AWP_SESSION_EXPIRED, AWP_SESSION_UNKNOWN
}

export function invalidParams(detail: string): RpcErrorObject {
  return jsonRpcError('INVALID_PARAMS', { detail, data: { retryable: false } });
}
