/**
 * An observer session in a shared session store, so it resumes at any replica (issue 13): its record
 * (subscriptions, channel positions), its journal of status_seq notifications and its suspension.
 * Writes are issued in order, one at a time, behind the session (write-behind: a notification is sent
 * before it is durable; a drain waits for `flushed()` before it closes the observer, so nothing is lost
 * when a replica is taken out; a replica that dies loses at most the writes of its last moments).
 * A fenced write means another replica resumed the session: this one lets go of it.
 *
 * Writes are coalesced so a slow store holds a bounded queue: the journal in one pending append, and the
 * acknowledgement, observer record and suspension in one pending round carrying the latest value of
 * each, written in that order (a suspension after the positions it goes with).
 */
import { entryText, type ReplayJournal } from '../session/journal.js';
import {
  FencedError,
  LEASE_RENEW_MS,
  type ObserverRecord,
  type RelaySessionRecord,
  type SessionStore,
} from '../session/session-store.js';

export interface PersistenceEvents {
  /** Another replica took the session over. */
  fenced(): void;
  /** A write failed (the store is unreachable); later writes carry what it did not. */
  failed(op: string, err: unknown): void;
}

/** The latest value of each record write not yet issued (undefined: none). */
interface RecordWrites {
  acknowledged?: number;
  observer?: ObserverRecord;
  /** suspended_at_ms, or null: attached (a lease renewal). */
  suspendedAt?: number | null;
}

export class ObserverPersistence {
  private chain: Promise<void> = Promise.resolve();
  private journalQueued = false;
  /** A round of record writes waits in the chain; until it starts, later values join it. */
  private recordQueued = false;
  private pending: RecordWrites = {};
  private acked = 0;
  private renewedAt = -Infinity;
  /** No more writes are issued (the session ended here). */
  private closed = false;
  /** Another replica took over: nothing more is written, not even what was issued. */
  private fencedOut = false;

  private constructor(
    private readonly store: SessionStore,
    private readonly token: string,
    private fence: number,
    private readonly events: PersistenceEvents,
  ) {}

  /** A new session: its record is created (fence 1) before any other write. */
  static create(
    store: SessionStore,
    record: RelaySessionRecord,
    events: PersistenceEvents,
  ): ObserverPersistence {
    const p = new ObserverPersistence(store, record.edge_token, 0, events);
    p.enqueue('create', async () => {
      p.fence = await store.create(record);
    });
    return p;
  }

  /** A session this replica claimed from the store (at `fence`). */
  static claimed(
    store: SessionStore,
    token: string,
    fence: number,
    acked: number,
    events: PersistenceEvents,
  ): ObserverPersistence {
    const p = new ObserverPersistence(store, token, fence, events);
    p.acked = acked;
    return p;
  }

  /**
   * Writes the journal entries not yet durable (one write per burst of notifications, in bounded
   * steps: ReplayJournal.notDurable).
   */
  journal(journal: ReplayJournal): void {
    if (this.journalQueued || this.closed) return;
    this.journalQueued = true;
    this.enqueue('append', async () => {
      this.journalQueued = false;
      for (let entries = journal.notDurable(); entries.length > 0; entries = journal.notDurable()) {
        const written = entries.map((e) => (e.share ? { status_seq: e.status_seq, text: entryText(e) } : e));
        await this.store.append(this.token, this.fence, written);
        journal.markDurable(entries.at(-1)!.status_seq);
      }
    });
  }

  /** Attached: renews the lease now and then, with the observer's acknowledgement. */
  renew(nowMs: number, acknowledged: number): void {
    if (nowMs - this.renewedAt < LEASE_RENEW_MS) return;
    this.renewedAt = nowMs;
    this.attached(acknowledged);
  }

  attached(acknowledged: number): void {
    this.acknowledge(acknowledged);
    this.pending.suspendedAt = null;
    this.queueRecord();
  }

  /** The observer's connection is gone: where its channels stood, and since when. */
  suspended(atMs: number, acknowledged: number, observer: ObserverRecord): void {
    this.acknowledge(acknowledged);
    this.pending.observer = observer;
    this.pending.suspendedAt = atMs;
    this.queueRecord();
  }

  /** The session ended here: its record goes (unless another replica claimed it since). */
  ended(): void {
    this.enqueue('delete', () => this.store.delete(this.token, this.fence));
    this.closed = true;
  }

  /** Resolves once every write issued so far is done (or failed). */
  flushed(): Promise<void> {
    return this.chain;
  }

  private acknowledge(status_seq: number): void {
    if (status_seq <= this.acked) return;
    this.acked = status_seq;
    this.pending.acknowledged = status_seq;
    this.queueRecord();
  }

  /**
   * Queues a round of record writes unless one is waiting. The round takes the pending values when it
   * starts (later ones go in the next round), and writes each in its own step, so one failing does not
   * drop the others.
   */
  private queueRecord(): void {
    if (this.recordQueued || this.closed || this.fencedOut) return;
    this.recordQueued = true;
    let round: RecordWrites = {};
    this.enqueue('acknowledge', async () => {
      round = this.pending;
      this.pending = {};
      this.recordQueued = false;
      if (round.acknowledged !== undefined)
        await this.store.acknowledge(this.token, this.fence, round.acknowledged);
    });
    this.enqueue('setObserver', async () => {
      if (round.observer !== undefined) await this.store.setObserver(this.token, this.fence, round.observer);
    });
    this.enqueue('setSuspended', async () => {
      if (round.suspendedAt !== undefined)
        await this.store.setSuspended(this.token, this.fence, round.suspendedAt);
    });
  }

  private enqueue(op: string, write: () => Promise<void>): void {
    if (this.closed || this.fencedOut) return;
    this.chain = this.chain
      .then(() => (this.fencedOut ? undefined : write()))
      .catch((err: unknown) => {
        if (!(err instanceof FencedError)) return this.events.failed(op, err);
        if (this.fencedOut) return;
        this.fencedOut = true;
        this.events.fenced();
      })
      // Contained: what the handlers do must not become an unhandled rejection (it would end the process).
      .catch((err: unknown) => {
        try {
          this.events.failed('handler', err);
        } catch {
          // nothing more to do: the write chain goes on
        }
      });
  }
}
