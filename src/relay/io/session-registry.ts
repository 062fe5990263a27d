import { RelaySession } from '../relay-session.js';
import { timerDelay } from '../../protocol/timer-delay.js';
import {
  LEASE_RENEW_MS,
  type RelaySessionRecord,
  type SessionStore,
  type StoredSession,
} from '../../session/session-store.js';

/** An observer session the store holds, claimed for this replica (the route's hub serves it). */
export interface ObserverClaim {
  readonly kind: 'observer';
  readonly stored: StoredSession;
  readonly fence: number;
}

/** Something that must end with the session's control connection (its stream connections). */
export interface SessionBound {
  terminate(code: number, reason: string): void;
}

/** Kept a little longer than the world keeps a suspended session, so the world answers late resumes. */
const EXPIRY_MARGIN_MS = 2_000;
const DEFAULT_WINDOW_MS = 30_000;

/** How long the edge keeps a suspended session: the world's reconnect window, or a default if it gave none. */
export function reconnectWindow(record: Pick<RelaySessionRecord, 'reconnect_window_ms'>): number {
  return record.reconnect_window_ms > 0 ? record.reconnect_window_ms : DEFAULT_WINDOW_MS;
}

/**
 * The relay sessions this replica serves, in front of the session store: live sessions answer
 * lookups from memory; suspended ones expire when the world's reconnect window has passed.
 */
export class SessionRegistry {
  private readonly live = new Map<string, RelaySession>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly bound = new Map<string, Set<SessionBound>>();

  private readonly leaseTimer: NodeJS.Timeout;

  constructor(readonly store: SessionStore) {
    // A shared store's keys expire unless the replica serving a session renews its lease.
    this.leaseTimer = setInterval(() => this.renewLeases(), LEASE_RENEW_MS);
    this.leaseTimer.unref();
  }

  private renewLeases(): void {
    if (this.store.kind === 'memory') return;
    for (const s of this.live.values()) {
      if (s.attachment !== null) void this.store.setSuspended(s.token, s.fence, null).catch(() => undefined);
    }
  }

  get size(): number {
    return this.live.size;
  }

  sessions(): IterableIterator<RelaySession> {
    return this.live.values();
  }

  /** Sessions currently served by a connection on this replica. */
  get attachedCount(): number {
    let n = 0;
    for (const s of this.live.values()) if (s.attachment !== null) n++;
    return n;
  }

  /**
   * The session a resume on `route` names, taken over for this replica: its fence is raised in the store
   * so a replica that still serves it stops writing (AWP-SES-010 across replicas).
   */
  async claim(token: string, route: string): Promise<RelaySession | ObserverClaim | 'other-route' | null> {
    // A session attached here is current in memory; a suspended one may since have been served by
    // another replica, so the store's copy is the one to resume from.
    const live = this.live.get(token);
    const stored = live?.attachment != null ? null : await this.store.get(token);
    if (live?.attachment == null && stored === null) return null;
    // A session of another route is unknown here, and is not claimed: its world's own token must not
    // reach this route's world, nor its replica be fenced out (the token, or the store, may be hostile).
    if ((stored?.record ?? live!.record).route !== route) return 'other-route';
    const fence = await this.store.claim(token);
    if (fence === null) return null;
    if (stored?.record.observer !== undefined) return { kind: 'observer', stored, fence };
    const session = stored === null ? live! : RelaySession.fromStored(stored);
    session.fence = fence;
    this.live.set(token, session);
    return session;
  }

  /** The live session a stream connection's token names, if its control connection is up here. */
  attachedSession(token: string): RelaySession | undefined {
    const s = this.live.get(token);
    return s !== undefined && s.attachment !== null ? s : undefined;
  }

  async created(session: RelaySession): Promise<void> {
    this.live.set(session.token, session);
    session.fence = await this.store.create(session.record);
  }

  attached(session: RelaySession): void {
    this.live.set(session.token, session);
    this.clearTimer(session.token);
    session.record.suspended_at_ms = null;
    void this.store.setSuspended(session.token, session.fence, null).catch(() => undefined);
  }

  detached(session: RelaySession, nowMs: number): void {
    this.closeBound(session.token, 1001, 'session suspended');
    session.record.suspended_at_ms = nowMs;
    void this.store.setSuspended(session.token, session.fence, nowMs).catch(() => undefined);
    const window = reconnectWindow(session.record);
    this.clearTimer(session.token);
    // A window longer than the longest timer (about 24.8 days) is cut to it rather than fire at once.
    const timer = setTimeout(
      () => {
        if (session.attachment === null) this.ended(session);
      },
      timerDelay(window + EXPIRY_MARGIN_MS),
    );
    timer.unref();
    this.timers.set(session.token, timer);
  }

  ended(session: RelaySession): void {
    session.closed = true;
    this.clearTimer(session.token);
    this.closeBound(session.token, 1000, 'session ended');
    this.live.delete(session.token);
    void this.store.delete(session.token, session.fence).catch(() => undefined);
  }

  bind(token: string, thing: SessionBound): () => void {
    let set = this.bound.get(token);
    if (set === undefined) this.bound.set(token, (set = new Set()));
    set.add(thing);
    return () => {
      set.delete(thing);
      if (set.size === 0) this.bound.delete(token);
    };
  }

  /** Drops every live session (shutdown); the store keeps what it holds. */
  clear(): void {
    clearInterval(this.leaseTimer);
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    for (const token of [...this.bound.keys()]) this.closeBound(token, 1001, 'edge shutting down');
    this.live.clear();
  }

  private closeBound(token: string, code: number, reason: string): void {
    const set = this.bound.get(token);
    if (set === undefined) return;
    this.bound.delete(token);
    for (const thing of set) thing.terminate(code, reason);
  }

  private clearTimer(token: string): void {
    const t = this.timers.get(token);
    if (t !== undefined) clearTimeout(t);
    this.timers.delete(token);
  }
}
