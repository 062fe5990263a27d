/**
 * Action admission rate (AWP-ENV-004): at most `max_action_rate_hz` admissions per embodiment, measured
 * on the session clock. The edge answers excess submissions itself with AWP_ENVELOPE_EXCEEDED (4002,
 * retryable, retry_after_ms) so they never reach the world; it never queues or delays one instead.
 *
 * The world keeps its own limit; the edge only refuses what the world certainly would: it allows a
 * little clock jitter between the two hops, and in lockstep it refuses only while the simulated clock
 * has certainly not moved far enough (an advance it cannot time is left to the world to judge).
 */

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
