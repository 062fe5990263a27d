/**
 * The relay shell of an agent's control connection (see agent-connection.ts): carries out the sans-IO
 * relay core's effects on the agent's socket, the upstream socket and the session store, in order.
 * When the connection turns out to carry an observer session it hands the connection to its owner.
 */
import { TextQueue } from '../protocol/text-queue.js';
import { Outbox } from '../transport/outbox.js';
import { RelayConnection } from '../relay/relay-connection.js';
import type { FrameRoute, RelayEffect } from '../relay/relay-effects.js';
import type { RelaySession } from '../relay/relay-session.js';
import { FrameMetrics } from '../telemetry/frame-metrics.js';
import { redact } from '../telemetry/redact.js';
import { dialUpstream, DialError, type UpstreamConnection } from '../transport/upstream.js';
import { CorruptRecordError } from '../session/session-store.js';
import type { AgentBudget } from '../policy/budgets.js';
import type { ServerConnection } from '../transport/engine.js';
import type { EdgeContext } from './context.js';
import { PacedWriter } from '../relay/io/paced-writer.js';
import { recordRelayEffect, type TelemetryEffect } from './relay-telemetry.js';
import { relayRecording, type RelayRecording } from './relay-recording.js';
import { persistJournal, StoreBarrier, storeWriteFailed } from './relay-store-writes.js';
import type { ObserverConnection, ObserverShell } from '../fanout/observer-shell.js';
import type { RouteRuntime } from './route.js';

/** What the relay shell tells the connection that owns it. */
export interface RelayOwner {
  /** The connection now carries an observer session (opened at the hub, or resumed by its token). */
  observe(open: (conn: ObserverConnection) => ObserverShell): void;
  /** Whether the connection holds a session (it counts against the credential's session budget). */
  holdsSession(on: boolean): void;
}

export class RelayDriver {
  private readonly core: RelayConnection;
  private readonly agentOut: Outbox;
  private upstream: UpstreamConnection | null = null;
  private upstreamOut: Outbox | null = null;
  /** Effects waiting for a store write that must be durable before the agent hears of it. */
  private readonly barrier: StoreBarrier;
  private agentGone = false;
  /** Control messages waiting for a stream connection's dial (see message). */
  private readonly held: TextQueue;
  private readonly frames: FrameMetrics;
  private readonly commandFrames: FrameMetrics;
  private readonly tap: RelayRecording | undefined; // the flight recorder's, if the route records relay
  /** Telemetry effects of the batch being applied (see recordTelemetry). */
  private telemetry: TelemetryEffect[] = [];

  constructor(
    private readonly ctx: EdgeContext,
    private readonly route: RouteRuntime,
    private readonly agent: ServerConnection,
    private readonly publicBase: string,
    budget: AgentBudget,
    private readonly owner: RelayOwner,
    /** An approver's own credential, presented upstream in place of the edge's (AWP-APR-005). */
    private readonly approverCredential?: string,
  ) {
    this.tap = relayRecording(ctx, route, agent);
    this.core = new RelayConnection(
      route.forConnection(publicBase, budget, approverCredential !== undefined),
    );
    const t = ctx.config.transport;
    this.frames = FrameMetrics.for(ctx.metrics, route.name, 'inline', 'world_to_agent', ctx.now);
    this.commandFrames = FrameMetrics.for(ctx.metrics, route.name, 'inline', 'agent_to_world', ctx.now);
    this.agentOut = new Outbox(agent, t.high_water_bytes, t.max_queued_bytes, this.frames);
    this.held = new TextQueue(t.max_queued_bytes);
    this.barrier = new StoreBarrier(t.max_queued_bytes, () => this.agentOverflow());
  }

  // ---------------------------------------------------------------- agent socket events

  message(data: string | Uint8Array, binary: boolean): void {
    if (binary) {
      // The control channel carries JSON-RPC text only (AWP-TRN-001).
      this.agent.close(1003, 'control connection carries text messages only');
      return;
    }
    this.tap?.fromAgent(data as string);
    const session = this.core.currentSession;
    if (this.held.length > 0 || session?.dialling === true) {
      // A stream connection of the session is being dialled: the world must see it first (RelaySession).
      // What waits is bounded like any queue for a peer (transport.max_queued_bytes).
      if (this.held.overflowed) return; // closing (below)
      if (!this.held.push(data as string)) {
        this.ctx.log.warn(
          { route: this.route.name, event: 'agent_overflow' },
          'agent sent more than the edge holds while a stream connection is dialled; closing',
        );
        this.ctx.metrics.rejections.labels(this.route.name, 'held_queue_full').inc();
        this.agent.close(1008, 'send queue full');
        return;
      }
      if (this.held.length === 1) session?.afterStreamDials(() => this.releaseHeld());
      return;
    }
    this.run(this.core.fromAgent(data as string, this.ctx.now()));
  }

  /** Relays the control messages that waited for a stream dial, in order (all of them if the agent left). */
  private releaseHeld(): void {
    while (this.held.length > 0) {
      const session = this.core.currentSession;
      if (!this.agentGone && session?.dialling === true)
        return session.afterStreamDials(() => this.releaseHeld());
      this.run(this.core.fromAgent(this.held.shift()!, this.ctx.now()));
    }
  }

  drain(): void {
    this.agentOut.drain();
  }

  close(): void {
    this.agentGone = true;
    this.releaseHeld(); // what the agent sent before it left comes before its leaving
    this.paced.stop();
    this.run(this.core.agentClosed());
    this.tap?.agentLost();
  }

  private toUpstream(text: string, f?: FrameRoute): void {
    if (
      this.upstreamOut?.push(text, false, f?.latest_wins === true ? f.channel_id : undefined) === 'overflow'
    ) {
      this.upstream?.close(1008, 'send queue full');
    }
  }

  /** The agent's inline command frames on latest-wins channels, within their granted rate (AWP-DAT-003). */
  private readonly paced = new PacedWriter<{ text: string; frame: FrameRoute }>(
    () => this.ctx.now(),
    (f) => {
      this.commandFrames.count(f.frame.channel, 'forwarded', f.text.length);
      this.toUpstream(f.text, f.frame);
      return true;
    },
  );

  // ---------------------------------------------------------------- effects

  private run(effects: readonly RelayEffect[]): void {
    for (const e of effects) if (!this.barrier.offer(e)) this.apply(e);
    this.recordTelemetry();
  }

  /**
   * Metrics and debug logs of the effects just applied. They wait until the batch's writes are done so
   * that a response reaches its socket before the edge spends time on bookkeeping (prom-client's
   * histogram observe costs about as much as parsing the message): the agent reads its answer while
   * the edge records it.
   */
  private recordTelemetry(): void {
    const later = this.telemetry;
    if (later.length === 0) return;
    this.telemetry = [];
    for (const e of later) recordRelayEffect(this.ctx, this.route.name, e);
  }

  private apply(e: RelayEffect): void {
    this.tap?.effect(e);
    const ctx = this.ctx;
    switch (e.kind) {
      case 'to-agent': {
        if (this.agentGone || this.agentOut.overflowed) return; // closing: said once, below
        const f = e.frame;
        let note;
        if (f !== undefined) {
          const now = ctx.now();
          note = { received_at: now, channel: f.channel };
          const sessionNow = this.core.currentSession?.clock.sessionNow(Math.round(now * 1e6));
          this.frames.observeAge(f.channel, f.ts_mono_ns, f.ts_send_ns, sessionNow);
        }
        // A replay from the journal waits for the agent however long it is (the journal holds it anyway).
        const lw = f?.latest_wins ? f.channel_id : undefined;
        if (this.agentOut.push(e.text, false, lw, note, e.journaled === true) === 'overflow')
          this.agentOverflow();
        return;
      }
      case 'to-upstream': {
        const f = e.frame;
        if (f?.latest_wins === true && f.rate_hz !== null) {
          // The agent's command frames stay within the channel's granted rate, newest first (AWP-DAT-003).
          const paced = this.paced.offer(f.channel_id, f.rate_hz, { text: e.text, frame: f });
          if (paced === 'replaced') this.commandFrames.count(f.channel, 'replaced', e.text.length);
          if (paced !== 'send') return;
          this.commandFrames.count(f.channel, 'forwarded', e.text.length);
        }
        this.toUpstream(e.text, f);
        return;
      }
      case 'dial-upstream':
        return this.dial();
      case 'close-agent':
        this.agentOut.flushAll();
        this.agent.close(e.code, e.reason);
        return;
      case 'close-upstream':
        this.upstreamOut?.flushAll();
        this.upstream?.close(e.code, e.reason);
        return;
      case 'observer-open': {
        const mode = e.params.mode === 'lockstep' ? 'lockstep' : 'streaming';
        this.agentOut.flushAll(); // what the relay answered (initialize) goes first
        const hub = ctx.hubFor(this.route, mode);
        this.owner.observe((conn) => hub.open(conn, e.id, e.params, e.initialize));
        return;
      }
      case 'lookup-session': {
        const obs = this.route.observer(e.token);
        if (obs !== undefined) {
          return this.toObserver((conn) => {
            const replayed = obs.session.resume(conn, e.id, e.last_status_seq, ctx.now());
            ctx.metrics.replayLength.labels(this.route.name, 'observer').observe(replayed);
            return obs.session;
          });
        }
        ctx.registry.claim(e.token, this.route.name).then(
          (found) => {
            if (found === 'other-route') return this.run(this.core.sessionOfAnotherRoute());
            // An observer session another replica served: this replica's hub serves it from now on.
            if (found !== null && 'stored' in found) {
              if (this.agentGone) return; // not restored (nor counted) on a closed connection
              const hub = ctx.hubFor(this.route, found.stored.record.mode);
              return this.toObserver((conn) => hub.restore(conn, e.id, e.last_status_seq, found));
            }
            this.run(this.core.sessionLookedUp(found, ctx.now()));
            // Claimed but not taken (the agent left during the lookup, or is being closed): the session
            // is suspended here, its reconnect window running, rather than held for good.
            if (found !== null && found.attachment === null && !found.closed)
              ctx.registry.detached(found, Date.now());
          },
          (err: unknown) => {
            if (err instanceof CorruptRecordError) {
              // Hostile or damaged store contents: this session cannot resume; the store itself is up.
              ctx.log.error({ route: this.route.name, err: err.message }, 'stored session record unreadable');
              ctx.metrics.resumes.labels(this.route.name, 'relay', 'record_unreadable').inc();
              this.run(this.core.sessionUnreadable());
              return;
            }
            ctx.log.error({ route: this.route.name, err: String(err) }, 'session store lookup failed');
            ctx.metrics.resumes.labels(this.route.name, 'relay', 'store_unavailable').inc();
            this.run(this.core.sessionLookupFailed('the session store is unavailable; retry'));
          },
        );
        return;
      }
      case 'session-created':
        this.owner.holdsSession(true);
        this.barrier.hold(
          ctx.registry.created(e.session),
          (waited) => this.run(waited),
          (err) => this.notStored(err, e.session),
        );
        this.logSession(e.session, 'session_opened', 'opened');
        return;
      case 'session-attached':
        this.owner.holdsSession(true);
        ctx.registry.attached(e.session);
        this.logSession(e.session, 'session_resumed', 'resumed');
        return;
      case 'session-detached':
        this.owner.holdsSession(false);
        ctx.registry.detached(e.session, Date.now());
        this.logSession(e.session, 'session_suspended', e.reason);
        return;
      case 'session-ended':
        this.owner.holdsSession(false);
        ctx.registry.ended(e.session);
        this.logSession(e.session, 'session_ended', e.reason);
        return;
      case 'journal-append':
        return persistJournal(ctx, e.session, (err) => this.storeWriteFailed(err));
      case 'journal-ack':
        ctx.registry.store
          .acknowledge(e.session.token, e.session.fence, e.status_seq)
          .catch((err: unknown) => this.storeWriteFailed(err));
        return;
      case 'rpc-done':
      case 'rejected':
      case 'resumed':
      case 'resume-unknown':
      case 'dropped':
        this.telemetry.push(e); // after the batch's writes (recordTelemetry)
        return;
    }
  }

  private storeWriteFailed(err: unknown): void {
    storeWriteFailed(this.ctx, this.route.name, err, () => {
      this.upstream?.close(1000, 'session moved to another edge replica');
      this.terminate(1001, 'session resumed elsewhere');
    });
  }

  private agentOverflow(): void {
    this.ctx.log.warn({ route: this.route.name, event: 'agent_overflow' }, 'agent stopped reading; closing');
    this.ctx.metrics.rejections.labels(this.route.name, 'send_queue_full').inc();
    this.agent.close(1008, 'send queue full');
  }

  /** The store refused a new session: it ends, and the agent never hears its token. */
  private notStored(err: unknown, session: RelaySession): void {
    this.ctx.log.error({ route: this.route.name, err: String(err) }, 'session store refused a new session');
    this.ctx.registry.ended(session);
    this.upstream?.close(1000, 'session could not be stored');
    this.agent.close(1011, 'session store unavailable');
  }

  private dial(): void {
    const cfg = this.route.config;
    const t = this.ctx.config;
    dialUpstream(
      {
        url: cfg.upstream,
        credential: this.approverCredential ?? cfg.upstream_token,
        connectTimeoutMs: t.timing.upstream_connect_timeout_ms,
        maxMessageBytes: t.transport.max_message_bytes,
        pingIntervalMs: t.timing.hop_ping_interval_ms,
        onFault: this.ctx.fault,
      },
      {
        message: (data, binary) => {
          if (binary) return; // control connections carry text only
          this.tap?.fromWorld(data as string);
          this.run(this.core.fromUpstream(data as string, this.ctx.now()));
        },
        drain: () => this.upstreamOut?.drain(),
        close: () => {
          this.upstream = null;
          this.ctx.metrics.upstreamCensus.close(this, this.route.name, 'control');
          this.run(this.core.upstreamClosed());
        },
      },
    ).then(
      (conn) => {
        if (this.agentGone || this.core.isClosed) {
          conn.close(1001, 'agent connection lost');
          return;
        }
        this.upstream = conn;
        this.ctx.metrics.upstreamCensus.open(this, this.route.name, 'control');
        const tr = this.ctx.config.transport;
        this.upstreamOut = new Outbox(conn, tr.high_water_bytes, tr.max_queued_bytes);
        this.run(this.core.upstreamOpened());
      },
      (err: unknown) => {
        const detail = err instanceof DialError ? err.message : String(err);
        this.ctx.log.warn(
          { route: this.route.name, event: 'upstream_unavailable', detail },
          'cannot reach the world',
        );
        this.ctx.metrics.upstreamFailures
          .labels(
            this.route.name,
            'control',
            err instanceof DialError && err.status !== undefined ? 'refused' : 'unreachable',
          )
          .inc();
        this.run(this.core.upstreamFailed(detail));
      },
    );
  }

  private logSession(session: RelaySession, event: string, reason?: string): void {
    this.ctx.log.info({
      route: this.route.name,
      event,
      session_id: session.record.session_id,
      token: redact(session.token),
      ...(reason !== undefined ? { reason } : {}),
    });
  }

  /** The connection carries an observer session from now on (resumed by its token). */
  private toObserver(resume: (conn: ObserverConnection) => ObserverShell): void {
    this.run(this.core.handOff());
    this.agentOut.flushAll();
    this.owner.observe(resume);
    this.ctx.metrics.resumes.labels(this.route.name, 'observer', 'resumed').inc();
  }

  /** Shutdown: drop the agent (the store keeps the session for a resume elsewhere). */
  terminate(code: number, reason: string): void {
    this.agentOut.flushAll();
    this.agent.close(code, reason);
  }
}
