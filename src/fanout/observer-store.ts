/**
 * Observer sessions in a shared session store (issue 13): the record a hub writes when one opens, and
 * the session a hub rebuilds from the store when an observer resumes at this replica.
 */
import { ReplayJournal } from '../session/journal.js';
import type { SessionStore, StoredSession } from '../session/session-store.js';
import type { ObserverHost } from './observer-effects.js';
import { ObserverPersistence, type PersistenceEvents } from './observer-persistence.js';
import { ObserverSession } from './observer-session.js';
import { ObserverShell, type ObserverConnection, type ObserverHubSide } from './observer-shell.js';

/** What a hub tells its observers' store writers. */
export interface ObserverStoreContext {
  readonly route: string;
  /** Shared: only hubs with a shared store persist their sessions. */
  readonly store?: SessionStore | undefined;
  now(): number;
  log(level: 'info' | 'warn', fields: Record<string, unknown>, message: string): void;
}

/** A session stored at another replica (or this one, earlier), claimed for this replica at `fence`. */
export interface ClaimedObserver {
  readonly stored: StoredSession;
  readonly fence: number;
}

/** The store record of a session that just opened at this hub. */
export function persistOpened(
  ctx: ObserverStoreContext,
  mode: 'streaming' | 'lockstep',
  host: ObserverHost,
  shell: ObserverShell,
): ObserverPersistence {
  const f = host.readyFields();
  const record = {
    edge_token: shell.token,
    route: ctx.route,
    upstream_token: '',
    session_id: shell.session_id,
    mode,
    reconnect_window_ms: f.reconnect_window_ms,
    heartbeat_interval_ms: f.heartbeat_interval_ms,
    agent_ack: 0,
    suspended_at_ms: null,
    observer: shell.record(),
  };
  return ObserverPersistence.create(
    shared(ctx),
    record,
    events(ctx, () => shell),
  );
}

/** The session a claimed record describes, served by this hub from now on. */
export function restoredShell(
  ctx: ObserverStoreContext,
  host: ObserverHost,
  side: ObserverHubSide,
  claimed: ClaimedObserver,
): ObserverShell {
  const { record, journal } = claimed.stored;
  const o = record.observer!;
  const session = new ObserverSession<ObserverConnection>(
    record.session_id,
    record.edge_token,
    host,
    o.modalities,
    o.max_obs_rate_hz ?? undefined,
    { journal: new ReplayJournal(record.agent_ack, journal), wants: o.wants },
  );
  const ref: { shell?: ObserverShell } = {};
  const persistence = ObserverPersistence.claimed(
    shared(ctx),
    record.edge_token,
    claimed.fence,
    record.agent_ack,
    events(ctx, () => ref.shell),
  );
  return (ref.shell = new ObserverShell(session, side, { persistence, positions: o.positions }));
}

function shared(ctx: ObserverStoreContext): SessionStore {
  if (ctx.store === undefined) throw new Error('observer sessions are stored only in a shared store');
  return ctx.store;
}

function events(ctx: ObserverStoreContext, shell: () => ObserverShell | undefined): PersistenceEvents {
  let warned = false;
  return {
    fenced: () => {
      const s = shell();
      if (s === undefined) return;
      ctx.log(
        'info',
        { route: ctx.route, event: 'observer_resumed_elsewhere', session_id: s.session_id },
        'observer session resumed at another replica; letting go',
      );
      s.fenced(ctx.now());
    },
    failed: (op, err) => {
      if (warned) return; // once per session: an unreachable store fails every write
      warned = true;
      ctx.log(
        'warn',
        { route: ctx.route, event: 'observer_store_write_failed', op, err: String(err) },
        'observer session not fully stored (it may not resume at another replica)',
      );
    },
  };
}
