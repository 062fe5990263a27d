/**
 * `status_seq` on a relay connection (sans-IO): every status-bearing notification is journaled and
 * forwarded once, in order (redeliveries after a resume are dropped); transitions first reported in a
 * result are journaled as partial entries the world replays; and the agent's own pings carry the edge's
 * acknowledgement upstream, so the world may drop what the edge holds durably (AWP-CTL-008, AWP-CTL-010).
 */
import { isCount } from '../protocol/integers.js';
import type { RelayEffect } from './relay-effects.js';
import type { RelaySession } from './relay-session.js';

export class StatusSequencer {
  /** Highest status_seq forwarded to the agent on this connection (redeliveries are dropped). */
  private delivered = 0;

  constructor(private readonly emit: (e: RelayEffect) => void) {}

  /** A new session on the connection: its status_seq starts again. */
  reset(): void {
    this.delivered = 0;
  }

  /** After a resume: what the agent held, and what the edge and the world replay, is delivered. */
  resumed(agentLast: number, upstreamAfter: number): void {
    this.delivered = Math.max(agentLast, upstreamAfter);
  }

  /**
   * A notification of `method` with `status_seq` from the world: journaled and forwarded if new,
   * dropped if a redelivery; 'gap' if it is not a count or too far ahead to hold (the world broke the
   * sequence: a journal of non-integer seqs could not be replayed in order).
   */
  notification(
    method: string,
    seq: unknown,
    text: string,
    session: RelaySession,
  ): 'forwarded' | 'redelivered' | 'gap' {
    if (!isCount(seq) || session.journal.tooFarAhead(seq)) return 'gap';
    if (seq <= this.delivered) {
      this.emit({
        kind: 'dropped',
        from: 'world',
        reason: 'redelivered',
        detail: `${method} redelivered status_seq ${seq}`,
      });
      return 'redelivered';
    }
    const added = session.journal.append(seq, text);
    if (added !== null) this.emit({ kind: 'journal-append', session, entries: added });
    this.delivered = seq;
    this.emit({ kind: 'to-agent', text });
    return 'forwarded';
  }

  /**
   * A transition first reported in a submit/cancel result (the world replays it as `action.status`);
   * false if its status_seq is not a count or too far ahead to hold.
   */
  resultTransition(result: unknown, session: RelaySession | null): boolean {
    const seq = (result as { status_seq?: unknown } | null)?.status_seq;
    if (session === null || seq === undefined) return true;
    if (!isCount(seq) || session.journal.tooFarAhead(seq)) return false;
    const r = { status_seq: seq };
    // Idempotent resubmissions repeat an earlier seq and consume none (AWP-ACT-001).
    const added = session.journal.append(r.status_seq, null);
    if (added !== null) {
      this.emit({ kind: 'journal-append', session, entries: added });
      this.delivered = Math.max(this.delivered, r.status_seq);
    }
    return true;
  }

  /**
   * The agent's ping with its acknowledgement `last`: the journal is trimmed, and the ping goes upstream
   * carrying the edge's acknowledgement (never a message of the edge's own). Returns the text to send.
   */
  ping(text: string, last: number, session: RelaySession): string {
    if (session.journal.acknowledge(last)) this.emit({ kind: 'journal-ack', session, status_seq: last });
    const ack = Math.max(last, session.journal.safeAcknowledgement());
    if (ack === last) return text;
    const msg = JSON.parse(text) as { params: Record<string, unknown> };
    msg.params.last_status_seq = ack;
    return JSON.stringify(msg);
  }
}
