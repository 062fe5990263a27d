/** Per-session state: grants, the status_seq log, actions, liveness stamps and telemetry samples. */
import { Telemetry } from './telemetry.js';
import type { ActionState, ConnId, JsonObject, TimeModel } from './types.js';
import { isPreExecution } from './types.js';

export type SessionState = 'ready' | 'active' | 'suspended' | 'closed';

export interface ChannelGrant {
  readonly name: string;
  readonly channel_id: number;
  /** Granted rate; null for per-tick lockstep channels. */
  rate_hz: number | null;
  readonly lossClass: 'reliable' | 'latest-wins';
  seq: number;
  /** Engine time the next frame is due (rate-driven channels). */
  nextDueNs: number;
  /** The next frame must be a keyframe carrying `resync` (AWP-DAT-009, AWP-TRN-008/012). */
  resync: boolean;
  /** Frames since the last keyframe, and the state it describes, for delta channels (AWP-OBS-004). */
  sinceKeyframe: number;
  lastState: JsonObject | null;
}

export interface ActionRecord {
  readonly action_id: string;
  /** The submission as received: compared member-wise on resubmission (AWP-ACT-009). */
  readonly content: JsonObject;
  readonly type: string;
  readonly duration: 'instant' | 'extended' | 'streaming';
  readonly group: string;
  readonly params: JsonObject;
  /** `replace` (or `blend`) preempts the group's running action when this one starts (AWP-PRE-003). */
  readonly replaces: boolean;
  /** Session-clock receipt time (the origin of `deadline_ms`). */
  readonly received_ts_mono_ns: number;
  /** Session-clock deadline (streaming: binding, AWP-ACT-004/008); undefined when none. */
  readonly deadlineNs: number | undefined;
  state: ActionState;
  /** The most recent status object (what a pull returns and an idempotent resubmission reports). */
  status: JsonObject;
  /** Set while an abort runs: the reason the terminal status will carry, and which terminal it is. */
  abort: {
    readonly terminal: 'cancelled' | 'failed';
    readonly reason: string;
    readonly startedNs: number;
  } | null;
  /** Lockstep: started at this advance but its `executing` status is not reported yet. */
  startedThisAdvance: boolean;
  lastProgressNs: number;
  terminalNs: number | null;
}

export interface RetainedNotification {
  readonly method: string;
  readonly params: JsonObject;
}

export class Session {
  state: SessionState = 'ready';
  conn: ConnId | null;
  streamConn: ConnId | null = null;
  /** Engine time the stream connection was lost while control stayed up; null when none is missing. */
  streamLostNs: number | null = null;
  degradedReported = false;
  suspendedNs: number | null = null;
  /** Engine time of the last message the agent originated on this session (AWP-SAF-003). */
  lastAgentNs: number;
  safeState = false;
  /** Session-clock time of the last admission, for `max_action_rate_hz` (AWP-ENV-004). */
  lastAdmittedNs: number | null = null;
  /** `session.close` requests to answer once closed (AWP-SES-011); `closingReason` set while closing. */
  readonly closeRequests: { conn: ConnId; id: string | number }[] = [];
  closingReason: string | null = null;

  readonly grants = new Map<string, ChannelGrant>();
  nextChannelId = 1;

  readonly actions = new Map<string, ActionRecord>();
  /** Admitted actions that were pre-execution when last looked at (preExecution). */
  private readonly notStarted = new Set<ActionRecord>();
  /** The executing (or cancelling) action per concurrency group. */
  readonly running = new Map<string, ActionRecord>();
  readonly queues = new Map<string, ActionRecord[]>();
  /** Lockstep: accepted actions waiting for the next advance (AWP-TIM-010). */
  readonly staged: ActionRecord[] = [];

  statusSeq = 0;
  /** Every sequenced item above `acked`, kept for replay (AWP-CTL-010). */
  private readonly log = new Map<number, RetainedNotification>();
  acked = 0;

  telemetry = new Telemetry();
  lastTelemetryNs: number;
  /** Engine time terminal actions were last swept out of `actions` (AWP-ACT-006). */
  lastPruneNs = 0;

  constructor(
    readonly id: string,
    readonly token: string,
    readonly mode: TimeModel,
    /** The bound embodiment; null for an observer session (AWP-EMB-004). */
    readonly embodiment: string | null,
    readonly actionTypes: readonly string[],
    readonly admin: readonly string[],
    conn: ConnId,
    now: number,
  ) {
    this.conn = conn;
    this.lastAgentNs = now;
    this.lastTelemetryNs = now;
  }

  /** Assign the next status_seq and retain the notification that carries it. */
  sequence(method: string, params: JsonObject): JsonObject {
    this.statusSeq += 1;
    const full: JsonObject = {};
    for (const [k, v] of Object.entries(params)) {
      full[k] = v;
      if (k === 'state' || k === 'event') full.status_seq = this.statusSeq; // where the traces put it
    }
    full.status_seq = this.statusSeq;
    this.log.set(this.statusSeq, { method, params: full });
    return full;
  }

  /** The agent has processed everything through `seq`: drop it (AWP-CTL-010). */
  acknowledge(seq: number): void {
    const upTo = Math.min(seq, this.statusSeq);
    if (upTo <= this.acked) return;
    for (const s of this.log.keys()) if (s <= upTo) this.log.delete(s);
    this.acked = upTo;
  }

  /** Retained notifications with status_seq > `after`, in order (AWP-CTL-008). */
  replayAfter(after: number): RetainedNotification[] {
    return [...this.log.entries()]
      .filter(([s]) => s > after)
      .sort(([a], [b]) => a - b)
      .map(([, n]) => n);
  }

  get retainedCount(): number {
    return this.log.size;
  }

  queue(group: string): ActionRecord[] {
    let q = this.queues.get(group);
    if (q === undefined) {
      q = [];
      this.queues.set(group, q);
    }
    return q;
  }

  /** Busy = something executing, queued or staged in the group. */
  busy(group: string): boolean {
    return (
      this.running.has(group) || this.queue(group).length > 0 || this.staged.some((a) => a.group === group)
    );
  }

  /** Records an admitted action (see preExecution). */
  admit(a: ActionRecord): void {
    this.actions.set(a.action_id, a);
    this.notStarted.add(a);
  }

  /**
   * Actions not yet executing. Read on every replacing submit: a scan of all actions (terminal ones are kept
   * for the reconnect window) made a flood of submits quadratic. An action never returns to pre-execution,
   * so one that left it is dropped from the set as it is met.
   */
  preExecution(): ActionRecord[] {
    const out: ActionRecord[] = [];
    for (const a of this.notStarted) {
      if (isPreExecution(a.state)) out.push(a);
      else this.notStarted.delete(a);
    }
    return out;
  }

  /** Remove a pre-execution action from the queue and the staging list. */
  unqueue(a: ActionRecord): void {
    const q = this.queue(a.group);
    const i = q.indexOf(a);
    if (i >= 0) q.splice(i, 1);
    const j = this.staged.indexOf(a);
    if (j >= 0) this.staged.splice(j, 1);
  }

  grantList(): { channel: string; rate_hz: number | null; channel_id: number }[] {
    return [...this.grants.values()].map((g) => ({
      channel: g.name,
      rate_hz: g.rate_hz,
      channel_id: g.channel_id,
    }));
  }
}
