import type { JournalEntry } from '../session/journal.js';
import {
  FencedError,
  JournalGapError,
  type ObserverRecord,
  type RelaySessionRecord,
  type SessionStore,
  type StoredSession,
} from '../session/session-store.js';

interface Held {
  record: RelaySessionRecord;
  journal: JournalEntry[];
  fence: number;
}

/** The embedded default: sessions survive agent disconnects, not a restart of the edge (AWP-SES-008). */
export class MemorySessionStore implements SessionStore {
  readonly kind = 'memory';
  private readonly sessions = new Map<string, Held>();

  create(record: RelaySessionRecord): Promise<number> {
    this.sessions.set(record.edge_token, { record: { ...record }, journal: [], fence: 1 });
    return Promise.resolve(1);
  }

  get(edge_token: string): Promise<StoredSession | null> {
    const held = this.sessions.get(edge_token);
    return Promise.resolve(
      held ? { record: { ...held.record }, journal: [...held.journal], fence: held.fence } : null,
    );
  }

  claim(edge_token: string): Promise<number | null> {
    const held = this.sessions.get(edge_token);
    if (held === undefined) return Promise.resolve(null);
    held.fence += 1;
    return Promise.resolve(held.fence);
  }

  append(edge_token: string, fence: number, entries: readonly JournalEntry[]): Promise<void> {
    return this.write(edge_token, fence, (held) => {
      const last = Math.max(held.journal.at(-1)?.status_seq ?? 0, held.record.agent_ack);
      // Only entries above the highest held, and only if they follow it without a gap (as in Redis).
      const added: JournalEntry[] = [];
      let top = last;
      for (const e of entries) {
        if (e.status_seq <= top) continue;
        if (e.status_seq !== top + 1) throw new JournalGapError(last, e.status_seq);
        added.push(e);
        top = e.status_seq;
      }
      held.journal.push(...added);
    });
  }

  acknowledge(edge_token: string, fence: number, status_seq: number): Promise<void> {
    return this.write(edge_token, fence, (held) => {
      if (status_seq <= held.record.agent_ack) return;
      held.record.agent_ack = status_seq;
      // Entries are in seq order: drop the acknowledged head in place (a filter would copy the whole
      // journal of an agent acknowledging one entry at a time, per ping).
      let cut = 0;
      while (cut < held.journal.length && held.journal[cut]!.status_seq <= status_seq) cut++;
      held.journal.splice(0, cut);
    });
  }

  setSuspended(edge_token: string, fence: number, suspended_at_ms: number | null): Promise<void> {
    return this.write(edge_token, fence, (held) => {
      held.record.suspended_at_ms = suspended_at_ms;
    });
  }

  setObserver(edge_token: string, fence: number, observer: ObserverRecord): Promise<void> {
    return this.write(edge_token, fence, (held) => {
      held.record.observer = observer;
    });
  }

  delete(edge_token: string, fence?: number): Promise<void> {
    const held = this.sessions.get(edge_token);
    if (held !== undefined && (fence === undefined || fence >= held.fence)) this.sessions.delete(edge_token);
    return Promise.resolve();
  }

  /** Number of sessions held (for leak checks and metrics). */
  get size(): number {
    return this.sessions.size;
  }

  healthy(): boolean {
    return true;
  }

  close(): Promise<void> {
    this.sessions.clear();
    return Promise.resolve();
  }

  private write(edge_token: string, fence: number, apply: (held: Held) => void): Promise<void> {
    const held = this.sessions.get(edge_token);
    if (held === undefined) return Promise.resolve();
    if (fence < held.fence) return Promise.reject(new FencedError());
    try {
      apply(held);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    return Promise.resolve();
  }
}
