/**
 * What a relay connection writes to the session store, and what it waits for: a new session must be
 * durable before the agent hears of it (StoreBarrier), a journal goes to the store one bounded write at
 * a time (persistJournal), and a fenced write means another replica took the session (storeWriteFailed).
 */
import type { RelayEffect } from '../relay/relay-effects.js';
import type { RelaySession } from '../relay/relay-session.js';
import { FencedError } from '../session/session-store.js';
import type { EdgeContext } from './context.js';

/** Store write failures are logged at most this often (all connections of the process together). */
const STORE_FAILURE_LOG_INTERVAL_MS = 5_000;
const storeFailures = { loggedAt: -Infinity, suppressed: 0 };
/** Sessions with a journal write in flight (any connection of the process: a session can move). */
const journalWrites = new WeakSet<RelaySession>();

/**
 * A connection's effects held behind a store write that must be durable first (an agent must never hold
 * a token the store lacks): the agent's messages wait, and everything after them, in order. What waits
 * for the agent is bounded like its send queue: the write may take the store's command timeout while a
 * world sends fast. Past `maxChars`, `overflow` runs (the agent is closed) and nothing more for the
 * agent is kept.
 */
export class StoreBarrier {
  /** Holds begun; a write that settles after a later hold began leaves the waiting to the later one. */
  private holds = 0;
  private settled = 0;
  private readonly waiting: RelayEffect[] = [];
  private chars = 0;

  constructor(
    private readonly maxChars: number,
    private readonly overflow: () => void,
  ) {}

  /** Keeps `e` if it must wait for the write: true if kept (or dropped past the bound). */
  offer(e: RelayEffect): boolean {
    if (this.settled === this.holds) return false;
    if (e.kind === 'to-agent') {
      if (this.chars > this.maxChars) return true; // closing
      if ((this.chars += e.text.length) > this.maxChars) {
        this.overflow();
        return true;
      }
    } else if (this.waiting.length === 0) return false;
    this.waiting.push(e);
    return true;
  }

  /** Holds effects until `write` settles: then `done` with what waited, or `failed` (what waited is dropped). */
  hold(write: Promise<void>, done: (waited: RelayEffect[]) => void, failed: (err: unknown) => void): void {
    const n = ++this.holds;
    write.then(
      () => {
        if (n !== this.holds) return;
        this.settled = n;
        done(this.take());
      },
      (err: unknown) => {
        if (n === this.holds) this.settled = n;
        this.take();
        failed(err);
      },
    );
  }

  private take(): RelayEffect[] {
    this.chars = 0;
    return this.waiting.splice(0);
  }
}

/**
 * Writes what the session's journal holds that the store does not. One write per session at a time:
 * entries arriving meanwhile go in the next, so a slow store costs one write per round trip rather
 * than one per status, each carrying the whole growing tail. A write carries a bounded step of the
 * tail (ReplayJournal.notDurable); the next goes when it is done.
 */
export function persistJournal(
  ctx: EdgeContext,
  session: RelaySession,
  failed: (err: unknown) => void,
): void {
  if (journalWrites.has(session)) return;
  const entries = session.journal.notDurable();
  if (entries.length === 0) return;
  const last = entries.at(-1)!.status_seq;
  journalWrites.add(session);
  ctx.registry.store.append(session.token, session.fence, entries).then(
    () => {
      journalWrites.delete(session);
      session.journal.markDurable(last);
      persistJournal(ctx, session, failed);
    },
    (err: unknown) => {
      journalWrites.delete(session); // the next status writes the whole tail again
      failed(err);
    },
  );
}

/**
 * A fenced write means another replica resumed the session: the connection must stop driving it at once
 * (`letGo`: two replicas never drive one upstream session). Other failures leave the journal non-durable,
 * so nothing more is acknowledged upstream; an outage fails every write of every session, so they are
 * logged one line per interval, with the count since the last.
 */
export function storeWriteFailed(ctx: EdgeContext, route: string, err: unknown, letGo: () => void): void {
  if (err instanceof FencedError) {
    ctx.log.warn({ route, event: 'session_fenced' }, 'session resumed at another replica; letting go');
    return letGo();
  }
  const now = ctx.now();
  storeFailures.suppressed++;
  if (now - storeFailures.loggedAt < STORE_FAILURE_LOG_INTERVAL_MS) return;
  ctx.log.error(
    { route, event: 'store_write_failed', err: String(err), failures: storeFailures.suppressed },
    'session store writes failing',
  );
  storeFailures.loggedAt = now;
  storeFailures.suppressed = 0;
}
