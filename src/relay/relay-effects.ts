/**
 * What the relay state machine needs from its route, and the effects it asks its I/O shell to carry
 * out, in order (see relay-connection.ts).
 */
import type { RpcErrorObject } from '../protocol/errors.js';
import type { JsonRpcId } from '../protocol/jsonrpc.js';
import type { JournalEntry } from '../session/journal.js';
import type { RelaySession } from './relay-session.js';
import type { StreamEndpoint } from '../session/stream-endpoint.js';

/** What the relay needs from its route (world). */
export interface RelayRoute {
  readonly name: string;
  /** Cached `initialize` results by the agent's params, so sessionless connections need no upstream. */
  manifestFor(paramsKey: string): string | undefined;
  rememberManifest(paramsKey: string, resultJson: string): void;
  /** The world may have restarted: cached manifests are no longer trusted. */
  forgetManifests(): void;
  /** The edge's own stream endpoints for a session, given the world's (inline always last). */
  edgeEndpoints(world: readonly StreamEndpoint[]): StreamEndpoint[];
  mintToken(): string;
  /** Whether a token could have been minted by this edge's session store (else: AWP_SESSION_UNKNOWN). */
  ownsToken(token: string): boolean;
  /** Whether observer sessions are served by the edge's hub rather than relayed one to one. */
  readonly fanOutObservers: boolean;
  /**
   * Whether this connection may start a session now: undefined, or the error to answer with (an
   * unreachable shared store, the credential's session budget).
   */
  admitSession(): RpcErrorObject | undefined;
  /**
   * Whether a stream connection of this connection's session may open now: each is charged as one message
   * to the credential's budget, since each makes the edge dial the world (default: always).
   */
  admitStream?(): boolean;
  /**
   * This connection authenticated as an approver (deployment-configured, AWP-APR-005): it receives
   * `safety.approval_requested` and may answer `safety.approval.respond`; agents may do neither.
   */
  readonly approver: boolean;
  /** Control messages nesting deeper are refused before they are parsed (default: DEFAULT_MAX_JSON_DEPTH). */
  readonly maxJsonDepth?: number;
  /**
   * What an agent's messages waiting for the world's connection, or for a session lookup, may add up to
   * (transport.max_queued_bytes; default: unbounded): past it the agent is closed, 1008.
   */
  readonly maxQueuedBytes?: number;
}

export type RelayEffect =
  /** `journaled`: a replay from the session's journal, which holds the text anyway. */
  | { kind: 'to-agent'; text: string; frame?: FrameRoute; journaled?: true }
  | { kind: 'to-upstream'; text: string; frame?: FrameRoute }
  | { kind: 'dial-upstream' }
  | { kind: 'close-agent'; code: number; reason: string }
  | { kind: 'close-upstream'; code: number; reason: string }
  | { kind: 'lookup-session'; token: string; id: JsonRpcId; last_status_seq: number }
  /** An observer session.open: the connection now belongs to the route's hub (the relay is done). */
  | {
      kind: 'observer-open';
      id: JsonRpcId;
      params: Record<string, unknown>;
      initialize: Record<string, unknown> | undefined;
    }
  /** A new session: store it durably before any later `to-agent` effect is written. */
  | { kind: 'session-created'; session: RelaySession }
  | { kind: 'session-attached'; session: RelaySession }
  | { kind: 'session-detached'; session: RelaySession; reason: string }
  | { kind: 'session-ended'; session: RelaySession; reason: string }
  | { kind: 'journal-append'; session: RelaySession; entries: JournalEntry[] }
  | { kind: 'journal-ack'; session: RelaySession; status_seq: number }
  | { kind: 'rpc-done'; method: string; sent_at: number; outcome: 'ok' | 'error' }
  | { kind: 'resumed'; session: RelaySession; replayed: number }
  /** A session.resume the edge answered AWP_SESSION_UNKNOWN or _EXPIRED: no session here for the token. */
  | { kind: 'resume-unknown' }
  | { kind: 'rejected'; reason: string }
  /** A message not relayed: counted by `reason` (a bounded label), `detail` for the debug log. */
  | { kind: 'dropped'; from: 'agent' | 'world'; reason: DropReason; detail: string };

export type DropReason =
  'invalid' | 'too_deep' | 'unknown_response_id' | 'redelivered' | 'approval_request' | 'integer_range';

/** How an inline frame is scheduled (latest-wins frames may be replaced while the socket is busy), and what it is. */
export interface FrameRoute {
  readonly channel_id: number;
  readonly latest_wins: boolean;
  /** The channel's name, for metric labels ('unknown' if the grant does not list it). */
  readonly channel: string;
  readonly ts_mono_ns: number;
  readonly ts_send_ns: number | undefined;
  /** The channel's granted rate, if any. */
  readonly rate_hz: number | null;
}
