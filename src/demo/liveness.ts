/**
 * Liveness and safe state (spec/safety/safe-state): heartbeats, connection loss by silence, the watchdog, the
 * reconnect window, retention, and streaming telemetry.
 */
import type { Session } from './session.js';
import { closeSession, enterSafeState, reportDegraded, safeStatePolicy, suspend } from './transitions.js';
import { MS } from './types.js';
import type { ConnState, WorldState } from './world-state.js';

/**
 * The world pings every heartbeat_interval_ms (AWP-SAF-001); three silent intervals mean the connection is lost
 * and the session suspends (AWP-SAF-002). Sessionless connections are closed after a long silence (AWP-SES-012).
 */
export function heartbeat(w: WorldState, c: ConnState): void {
  const interval = w.config.heartbeatIntervalMs * MS;
  if (c.session === null) {
    if (w.now - c.lastRxNs > w.config.sessionlessIdleMs * MS) {
      w.emit({ kind: 'close', conn: c.id, code: 1000, reason: 'idle' });
      w.conns.delete(c.id);
    }
    return;
  }
  if (w.now - c.lastRxNs > 3 * interval) {
    w.emit({ kind: 'close', conn: c.id, code: 1001, reason: 'heartbeat lost' });
    w.conns.delete(c.id);
    if (c.session.conn === c.id) suspend(w, c.session, 'connection_lost');
    c.session = null;
    return;
  }
  if (w.now - c.lastPingNs >= interval) {
    c.lastPingNs = w.now;
    const id = `w${c.nextPingId}`;
    c.nextPingId += 1;
    w.send(c.id, { jsonrpc: '2.0', id, method: 'ping', params: { origin_ns: w.clock() } });
  }
}

/** AWP-SAF-003: watchdog_ms without a message the agent originated, whether Active or Suspended. */
export function checkWatchdog(w: WorldState, s: Session): void {
  const policy = safeStatePolicy(w);
  if (policy === undefined || s.embodiment === null || s.safeState || s.closingReason !== null) return;
  if (w.now - s.lastAgentNs > policy.watchdog_ms * MS) enterSafeState(w, s);
}

/** Terminal actions are kept for the window (AWP-ACT-006); a suspended session closes when it passes (AWP-SES-005). */
export function checkRetention(w: WorldState, s: Session): void {
  const window = w.config.reconnectWindowMs * MS;
  if (w.now - s.lastPruneNs >= 100 * MS) {
    s.lastPruneNs = w.now; // ten sweeps a second is plenty, and keeps advance() cheap with many actions
    for (const [id, a] of s.actions) {
      if (a.terminalNs !== null && w.now - a.terminalNs > window) s.actions.delete(id);
    }
  }
  if (s.suspendedNs === null) return;
  if (!s.degradedReported) reportDegraded(w, s, s.suspendedNs); // reliable channels undeliverable (AWP-SAF-009)
  if (w.now - s.suspendedNs > window) {
    if (!w.lockstep && s.embodiment !== null && !s.safeState) enterSafeState(w, s);
    closeSession(w, s, 'window_expired', true);
  }
}

/** AWP-TIM-006: at least once a second on a connected streaming session. */
export function sendTelemetry(w: WorldState, s: Session): void {
  const interval = w.config.telemetryIntervalMs * MS;
  if (w.now - s.lastTelemetryNs < interval) return;
  const windowMs = Math.round((w.now - s.lastTelemetryNs) / MS);
  s.lastTelemetryNs = w.now;
  w.toSession(s, 'session.telemetry', s.telemetry.params(windowMs));
  s.telemetry.reset();
}
