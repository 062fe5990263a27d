/**
 * Action admission rate (AWP-ENV-004): at most `max_action_rate_hz` admissions per embodiment, measured
 * on the session clock. The edge answers excess submissions itself with AWP_ENVELOPE_EXCEEDED (4002,
 * retryable, retry_after_ms) so they never reach the world; it never queues or delays one instead.
 *
 * The world keeps its own limit; the edge only refuses what the world certainly would: it allows a
 * little clock jitter between the two hops, and in lockstep it refuses only while the simulated clock
 * has certainly not moved far enough (an advance it cannot time is left to the world to judge).
 */

import { awpError, type RpcErrorObject } from '../protocol/errors.js';
import { isTerminalState } from '../protocol/lifecycle.js';
import { AdmittedActions } from './admitted-actions.js';

/** Spacing the edge forgives between its receipt and the world's (ns). */
const JITTER_NS = 2_000_000;

export type AdmissionDecision = { ok: true } | { ok: false; retry_after_ms: number };

export class AdmissionLimiter {
  private readonly interval_ns: number;
  /** Session-clock ns of the last submission let through and not refused, with what it replaced. */
  private last: number | undefined;
  private readonly tentative = new Map<string, number | undefined>();

  constructor(max_action_rate_hz: number) {
    this.interval_ns = 1e9 / max_action_rate_hz;
  }

  /** `now_ns`: the session clock now, or undefined when the edge cannot tell (lockstep after an advance). */
  check(now_ns: number | undefined): AdmissionDecision {
    if (this.last === undefined || now_ns === undefined) return { ok: true };
    const elapsed = now_ns - this.last;
    if (elapsed >= this.interval_ns - JITTER_NS) return { ok: true };
    return { ok: false, retry_after_ms: Math.max(1, Math.ceil((this.interval_ns - elapsed) / 1e6)) };
  }

  /** A submission went to the world at `now_ns` (counted until the world refuses it). */
  forwarded(requestKey: string, now_ns: number): void {
    this.tentative.set(requestKey, this.last);
    this.last = now_ns;
  }

  /** The world answered: a refusal created no action and does not count (AWP-ACT-010). */
  answered(requestKey: string, admitted: boolean, received_ns?: number): void {
    if (this.tentative.has(requestKey)) {
      const previous = this.tentative.get(requestKey);
      this.tentative.delete(requestKey);
      if (!admitted) this.last = previous;
    }
    // In lockstep the world's own receipt stamp is the admission time on the simulated clock.
    if (admitted && received_ns !== undefined && (this.last === undefined || received_ns > this.last)) {
      this.last = received_ns;
    }
  }
}

/**
 * A session's admission state: the session owns one (a relay session holds it) and the gate and clock
 * functions below read and update it, so policy needs nothing else of the session.
 */
export class SessionAdmission {
  /** Admission limiters of the granted envelopes, by embodiment (AWP-ENV-004). */
  limiters = new Map<string, AdmissionLimiter>();
  /** Action ids the world admitted: identical resubmissions are not rate-limited (AWP-ACT-001). */
  readonly admitted: AdmittedActions;
  /** Lockstep: the newest session-clock value seen from the world, and whether an advance outran it. */
  simNow: number | undefined;
  simNowUncertain = false;

  constructor(
    readonly mode: 'lockstep' | 'streaming',
    /** The world's reconnect_window_ms: how long it keeps an ended action's id (AWP-ACT-006). */
    retentionMs: number,
  ) {
    this.admitted = new AdmittedActions(retentionMs);
  }
}

/** Limiters for a session's granted envelopes, by embodiment. */
export function limitersFor(envelopes: unknown): Map<string, AdmissionLimiter> {
  const out = new Map<string, AdmissionLimiter>();
  if (!Array.isArray(envelopes)) return out;
  for (const e of envelopes as { embodiment?: unknown; max_action_rate_hz?: unknown }[]) {
    if (
      typeof e.embodiment === 'string' &&
      typeof e.max_action_rate_hz === 'number' &&
      e.max_action_rate_hz > 0
    ) {
      out.set(e.embodiment, new AdmissionLimiter(e.max_action_rate_hz));
    }
  }
  return out;
}

/**
 * A connection's admission checks on its session's submissions: which limiter a submission counts
 * against, and the accounting when the world answers. Identical resubmissions of an admitted action
 * are the world's to answer and are never counted (AWP-ACT-001).
 */
export class AdmissionGate {
  /** Submissions in flight, by request key. */
  private readonly submits = new Map<string, { action_id: string; embodiment: string }>();

  /** null to forward the submission, or the error the edge answers it with (4002, retryable). */
  check(
    session: SessionAdmission | null,
    requestKey: string,
    params: unknown,
    nowMs: number,
  ): RpcErrorObject | null {
    const p = params as { action_id?: unknown; embodiment_id?: unknown } | undefined;
    if (session === null || typeof p?.action_id !== 'string' || session.admitted.has(p.action_id, nowMs))
      return null;
    const embodiment =
      typeof p.embodiment_id === 'string'
        ? p.embodiment_id
        : session.limiters.size === 1
          ? session.limiters.keys().next().value!
          : undefined;
    const limiter = embodiment === undefined ? undefined : session.limiters.get(embodiment);
    if (limiter === undefined) return null;
    const clock = sessionClock(session, nowMs);
    const decision = limiter.check(clock);
    // An id the edge had to forget early may be a resubmission: only the world can tell then.
    if (!decision.ok && !session.admitted.uncertain(nowMs)) {
      return awpError('AWP_ENVELOPE_EXCEEDED', {
        detail: 'max_action_rate_hz',
        retryable: true,
        retry_after_ms: decision.retry_after_ms,
      });
    }
    if (clock !== undefined) limiter.forwarded(requestKey, clock);
    this.submits.set(requestKey, { action_id: p.action_id, embodiment: embodiment! });
    return null;
  }

  /** The world answered a submission: `result` when admitted, undefined when refused. */
  answered(session: SessionAdmission | null, requestKey: string, result: unknown, nowMs: number): void {
    const submit = this.submits.get(requestKey);
    if (submit === undefined || session === null) return;
    this.submits.delete(requestKey);
    const admitted = result !== undefined;
    if (admitted) session.admitted.add(submit.action_id, nowMs);
    const received = (result as { received_ts_mono_ns?: unknown } | undefined)?.received_ts_mono_ns;
    session.limiters
      .get(submit.embodiment)
      ?.answered(
        requestKey,
        admitted,
        session.mode === 'lockstep' && typeof received === 'number' ? received : undefined,
      );
  }
}

/**
 * A state the world reported for an action (an action.status notification or pull result, an
 * action.submit or action.cancel result): a terminal one starts the id's retention.
 */
export function observeActionState(session: SessionAdmission | null, report: unknown, nowMs: number): void {
  const r = report as { action_id?: unknown; state?: unknown } | null | undefined;
  if (session === null || typeof r?.action_id !== 'string' || typeof r.state !== 'string') return;
  if (isTerminalState(r.state)) session.admitted.end(r.action_id, nowMs);
}

/** The session clock as the edge knows it: real time in streaming, the world's stamps in lockstep. */
function sessionClock(session: SessionAdmission, nowMs: number): number | undefined {
  if (session.mode === 'streaming') return Math.round(nowMs * 1e6);
  return session.simNowUncertain ? undefined : session.simNow;
}

/** Lockstep: follows the simulated clock in what the world stamps (AWP-TIM-013). */
export function observeSimClock(session: SessionAdmission | null, params: unknown): void {
  if (session === null || session.mode !== 'lockstep') return;
  const ts = (params as { ts_mono_ns?: unknown } | undefined)?.ts_mono_ns;
  if (typeof ts === 'number' && (session.simNow === undefined || ts > session.simNow)) {
    session.simNow = ts;
    session.simNowUncertain = false;
  }
}
