import type { RelaySessionRecord, StoredSession } from '../session/session-store.js';
import { ClockEstimate } from '../protocol/clock-sync.js';
import { SessionAdmission } from '../policy/admission.js';
import { ReplayJournal } from '../session/journal.js';
import type { StreamEndpoint } from '../session/stream-endpoint.js';

/** What the edge knows of one granted channel (for latest-wins slots and stream relaying). */
export interface ChannelInfo {
  readonly name: string;
  readonly latest_wins: boolean;
  /** `rate_hz: null` in lockstep: one frame per tick, never dropped (AWP-TIM-003). */
  readonly per_tick: boolean;
  /** The granted rate (the agent's command frames are paced to it on latest-wins command channels). */
  readonly rate_hz: number | null;
}

/** The control connection serving a session, as what else the session opens sees it. */
export interface SessionAttachment {
  /** Charges one stream connection of the session to its credential's budget: false if spent. */
  admitStream(): boolean;
}

/**
 * A relay session as one replica holds it in memory: the stored record, its replay journal, and
 * the connection currently serving it (none while the agent is away).
 */
export class RelaySession {
  readonly journal: ReplayJournal;
  /** The world's endpoints from its latest session.ready (re-issued on every resume, AWP-TRN-008). */
  upstreamEndpoints: StreamEndpoint[] = [];
  /** The connection currently serving the session; null while suspended. */
  attachment: SessionAttachment | null = null;
  closed = false;
  /** The edge's estimate of the upstream session clock, from the agent's own pings. */
  readonly clock = new ClockEstimate();
  /** Admission state (limiters, admitted actions, lockstep clock): the policy layer's, held here. */
  readonly admission: SessionAdmission;
  /** This replica's fencing token for the session's store writes (see SessionStore). */
  fence = 1;
  /** Granted channels by channel_id (from session.ready and subscribe results). */
  channels = new Map<number, ChannelInfo>();
  /** Stream connections of this session whose world side is still being dialled (see StreamBridge). */
  private streamDials = 0;
  private readonly dialWaiters: (() => void)[] = [];

  constructor(
    readonly record: RelaySessionRecord,
    journal?: ReplayJournal,
  ) {
    this.journal = journal ?? new ReplayJournal(record.agent_ack);
    this.admission = new SessionAdmission(record.mode, record.reconnect_window_ms);
  }

  /**
   * The agent's stream connection is up and the edge is dialling the world's side: control messages the
   * agent sends meanwhile wait (`afterStreamDials`), so the world sees the stream before them, as the
   * agent did (AWP-TRN-012: a tick sent after the stream opened has its frames on the stream).
   */
  streamDialStarted(): void {
    this.streamDials++;
  }

  streamDialSettled(): void {
    if (--this.streamDials > 0) return;
    for (const w of this.dialWaiters.splice(0)) w();
  }

  get dialling(): boolean {
    return this.streamDials > 0;
  }

  afterStreamDials(then: () => void): void {
    if (this.streamDials === 0) then();
    else this.dialWaiters.push(then);
  }

  static fromStored(stored: StoredSession): RelaySession {
    const session = new RelaySession(
      { ...stored.record },
      new ReplayJournal(stored.record.agent_ack, stored.journal),
    );
    session.fence = stored.fence;
    return session;
  }

  get token(): string {
    return this.record.edge_token;
  }

  /**
   * Whether a frame on this channel may be replaced by a newer one while a socket is busy: only
   * streaming latest-wins channels; reliable and per-tick frames never drop (AWP-TIM-003, AWP-DAT-002).
   */
  latestWins(channel_id: number): boolean {
    return this.record.mode === 'streaming' && this.channels.get(channel_id)?.latest_wins === true;
  }
}
