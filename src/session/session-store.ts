import type { JournalEntry } from './journal.js';

/**
 * What an observer session (the edge serves it itself) needs beyond the common record to resume at
 * another replica: what the observer declared and subscribed, and where each channel's stream stood.
 */
/**
 * Entries an observer's lists hold at most (channels it asks for, modalities it declares) and the longest
 * name it may use: far above any world's manifest. The observer session keeps no more
 * (fanout/observer-messages.ts), so a stored record never holds more (store/codec.ts checks it does not).
 */
export const MAX_OBSERVER_ITEMS = 1024;
export const MAX_OBSERVER_NAME_CHARS = 256;

export interface ObserverRecord {
  /** From the observer's initialize (AWP-AGM-001/002). */
  readonly modalities: readonly string[];
  readonly max_obs_rate_hz: number | null;
  /** The channels it subscribed, as `session.open` names them (`rate_hz` null: the channel's rate). */
  readonly wants: readonly { readonly channel: string; readonly rate_hz: number | null }[];
  /** The last seq delivered per channel name: a resumed stream continues above it (AWP-DAT-001). */
  readonly positions: readonly (readonly [channel: string, seq: number])[];
}

/** What the edge must remember about a session to resume it, on this replica or another. */
export interface RelaySessionRecord {
  /** The agent-facing token the edge minted (a credential: never logged, never a metric label). */
  readonly edge_token: string;
  /** The route (world) the session belongs to. */
  readonly route: string;
  /** The world's own session token (a credential of the upstream hop); '' for an observer session. */
  readonly upstream_token: string;
  readonly session_id: string;
  readonly mode: 'lockstep' | 'streaming';
  readonly reconnect_window_ms: number;
  readonly heartbeat_interval_ms: number;
  /** Highest status_seq the agent acknowledged. */
  agent_ack: number;
  /** Wall-clock ms when the agent's connection was lost; null while an agent is attached. */
  suspended_at_ms: number | null;
  /** Present for an observer session (no upstream session of its own: the route's hub serves it). */
  observer?: ObserverRecord;
}

export interface StoredSession {
  readonly record: RelaySessionRecord;
  /** Journal entries above `record.agent_ack`, in status_seq order. */
  readonly journal: readonly JournalEntry[];
  /** The current fencing token (see SessionStore.claim). */
  readonly fence: number;
}

/** A write carried a fencing token older than the session's: another replica now drives the session. */
export class FencedError extends Error {
  constructor() {
    super('the session is driven by another replica');
  }
}

/**
 * What a store returned for a session is not a record the edge wrote (corrupted, written by an
 * incompatible version, or tampered with): the session cannot be resumed, and the store is not down.
 */
export class CorruptRecordError extends Error {
  constructor(detail: string) {
    super(`the stored session record is unreadable: ${detail}`);
  }
}

/**
 * An append whose first new entry is not the next status_seq after what the store holds: an
 * earlier append was lost (the store was unreachable). Nothing of it is stored, so nothing above the
 * gap is taken for durable; the writer re-sends from `held + 1` (or the gap closes when the agent
 * acknowledges past it).
 */
export class JournalGapError extends Error {
  constructor(
    /** The highest status_seq the store holds (or the agent acknowledged). */
    readonly held: number,
    /** The first status_seq the refused append carried above it. */
    readonly first: number,
  ) {
    super(
      `journal gap: the store holds status_seq up to ${held}; an append starting at ${first} was refused`,
    );
  }
}

/**
 * How often the replica serving an attached session renews its lease in a shared store (whose keys
 * expire unless renewed): well inside any reconnect window, so a lease lapses only if the replica is gone.
 */
export const LEASE_RENEW_MS = 2_000;

/**
 * Where relay sessions live between an agent's connections. Every write resolves once it is durable
 * in the store: the edge acknowledges upstream only what a resolved write holds.
 *
 * Fencing: `create` starts a session at fence 1; each `claim` (a replica taking the session over to
 * serve a resume) returns a higher fence. Writes carry the writer's fence and are refused with
 * FencedError when it is stale, so two replicas never drive one upstream session at once.
 */
export interface SessionStore {
  readonly kind: string;
  /** Stores a new session; resolves with its fence (1). */
  create(record: RelaySessionRecord): Promise<number>;
  get(edge_token: string): Promise<StoredSession | null>;
  /** Takes the session over; resolves with the new fence, or null if the session is gone. */
  claim(edge_token: string): Promise<number | null>;
  /**
   * Adds entries above what the store holds (redeliveries are ignored). Rejects with JournalGapError,
   * storing nothing, if the first new entry does not follow the highest held status_seq.
   */
  append(edge_token: string, fence: number, entries: readonly JournalEntry[]): Promise<void>;
  /** Records the agent's acknowledgement and drops the entries at or below it. */
  acknowledge(edge_token: string, fence: number, status_seq: number): Promise<void>;
  setSuspended(edge_token: string, fence: number, suspended_at_ms: number | null): Promise<void>;
  /** Replaces an observer session's subscriptions and positions. */
  setObserver(edge_token: string, fence: number, observer: ObserverRecord): Promise<void>;
  /** Deletes the session; with a fence, only if no other replica has claimed it since. */
  delete(edge_token: string, fence?: number): Promise<void>;
  /** Whether new sessions can be stored now (a distributed store that is unreachable says no). */
  healthy(): boolean;
  /** A shared store's token epoch (6 bytes), the same for every replica; absent for a local store. */
  epoch?(): Promise<Buffer>;
  close(): Promise<void>;
}
