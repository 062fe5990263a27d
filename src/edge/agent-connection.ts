/**
 * An agent's control connection: the one handler every engine's socket events reach. It enforces the
 * credential's budget on each message, starts as a relay (the relay shell answers `initialize` and
 * opens or resumes relay sessions) and routes the connection to an observer session once one is opened
 * or resumed on it (the hub's session then takes its messages).
 */
import type { ObserverConnection, ObserverShell } from '../fanout/observer-shell.js';
import { closeFor, type AgentBudget } from '../policy/budgets.js';
import type { ConnectionHandlers, ServerConnection } from '../transport/engine.js';
import type { EdgeContext } from './context.js';
import { RelayDriver } from './relay-driver.js';
import { observerRecording } from './observer-recording.js';
import type { RouteRuntime } from './route.js';

export class AgentConnection implements ConnectionHandlers {
  private readonly relay: RelayDriver;
  /** Set once the connection carries an observer session, with this connection as the session sees it. */
  private observer: ObserverShell | null = null;
  private readonly asObserver: ObserverConnection;
  /** Whether this connection's session counts against its credential's session budget. */
  private counted = false;

  constructor(
    private readonly ctx: EdgeContext,
    private readonly route: RouteRuntime,
    private readonly agent: ServerConnection,
    publicBase: string,
    private readonly budget: AgentBudget,
    approverCredential?: string,
  ) {
    this.asObserver = {
      sink: agent,
      close: (code, reason) => agent.close(code, reason),
      publicBase,
      tap: observerRecording(ctx, route, agent), // the flight recorder's, if the route records observers
      budget,
    };
    this.relay = new RelayDriver(
      ctx,
      route,
      agent,
      publicBase,
      budget,
      {
        observe: (open) => {
          this.observer = open(this.asObserver);
          this.holdsSession(true);
        },
        holdsSession: (on) => this.holdsSession(on),
      },
      approverCredential,
    );
    ctx.connections.add(this);
    ctx.metrics.agentCensus.open(this, route.name, 'control');
  }

  message(data: string | Uint8Array, binary: boolean): void {
    const over = this.budget.message(typeof data === 'string' ? data.length : data.byteLength);
    if (over !== null) {
      const { code, reason } = closeFor(over);
      this.ctx.metrics.rejections.labels(this.route.name, `budget_${over}`).inc();
      this.agent.close(code, reason);
      return;
    }
    const observer = this.observer;
    if (observer === null || binary) {
      this.relay.message(data, binary); // binary: the relay shell closes with 1003 (AWP-TRN-001)
      return;
    }
    if (observer.state === 'closed') {
      // The observer session ended on this connection (session.close): a new session needs a new one.
      this.agent.close(1000, 'session closed');
      return;
    }
    observer.fromAgent(data as string, this.ctx.now());
  }

  drain(): void {
    this.relay.drain();
    this.observer?.drain();
  }

  close(): void {
    this.budget.closeConnection();
    this.holdsSession(false);
    this.ctx.connections.delete(this);
    this.ctx.metrics.agentCensus.close(this, this.route.name, 'control');
    // After a resume on another connection this one is no longer the session's: its close changes nothing.
    this.observer?.connectionLost(this.asObserver, this.ctx.now());
    this.relay.close();
  }

  /** Shutdown: drop the agent (the store keeps the session for a resume elsewhere). */
  terminate(code: number, reason: string): void {
    this.relay.terminate(code, reason);
  }

  /** Drain: an observer session moves out through the shared store (undefined: it cannot; terminate). */
  moveOut(): Promise<void> | undefined {
    return this.observer?.moveOut(this.ctx.now());
  }

  private holdsSession(on: boolean): void {
    if (on === this.counted) return;
    this.counted = on;
    if (on) this.budget.sessionStarted();
    else this.budget.sessionEnded();
  }
}
