/**
 * An observer session's clocks (sans-IO): when it last heard the observer on its control connection,
 * when its heartbeat ping (AWP-SAF-001) and its session.telemetry (AWP-TIM-006) are due, when silence
 * means the connection is lost (AWP-SAF-002), and when a suspended session's reconnect window ends.
 */
/** session.telemetry's period (AWP-TIM-006: at least once a second). */
export const TELEMETRY_MS = 1000;

export class ObserverLiveness {
  /** The session's heartbeat interval (ms) as its session.ready announced it; 0: none yet. */
  heartbeatMs = 0;
  /** When the observer last sent anything (local ms). */
  lastHeard = 0;
  private lastPing = 0;
  private lastTelemetry = 0;
  private suspendedAt = 0;

  attached(now: number): void {
    this.lastHeard = this.lastPing = this.lastTelemetry = now;
  }

  suspended(now: number): void {
    this.suspendedAt = now;
  }

  windowExpired(now: number, reconnectWindowMs: number): boolean {
    return now - this.suspendedAt >= reconnectWindowMs;
  }

  /** Three heartbeat intervals without a message: the connection is lost. */
  silent(now: number): boolean {
    return this.heartbeatMs > 0 && now - this.lastHeard >= 3 * this.heartbeatMs;
  }

  /** Whether the edge's heartbeat ping is due now (then it counts as sent). */
  pingDue(now: number): boolean {
    if (this.heartbeatMs <= 0 || now - this.lastPing < this.heartbeatMs) return false;
    this.lastPing = now;
    return true;
  }

  /** The window (ms) of a session.telemetry due now (at least once a second), else null. */
  telemetryDue(now: number): number | null {
    if (now - this.lastTelemetry < TELEMETRY_MS) return null;
    const window_ms = Math.max(1, Math.round(now - this.lastTelemetry));
    this.lastTelemetry = now;
    return window_ms;
  }
}
