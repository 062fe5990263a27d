/**
 * The I/O shell of one observer session: carries out the sans-IO session's effects (observer-effects.ts)
 * on the observer's connections, in order, and hands what concerns the hub to it. It holds the
 * session's delivery state (`Subscriber`: per-channel gates and seqs, the control connection's `Outbox`,
 * the stream sink), which the hub writes frames into directly.
 */
import { telemetryText } from './observer-messages.js';
import type { ObserverEffect, ObserverLink, ObserverNote, ObserverState } from './observer-effects.js';
import type { ObserverSession } from './observer-session.js';
import type { Need } from './hub-demand.js';
import { Subscriber, type SubscribedChannel } from './subscriber.js';
import type { OutboxObserver, Sink } from '../transport/outbox.js';
import type { JsonRpcId, Sequenced } from '../protocol/jsonrpc.js';
import type { ObserverTap } from './observer-tap.js';
import type { ObserverPersistence } from './observer-persistence.js';
import type { ObserverRecord } from '../session/session-store.js';
import type { AgentBudget } from '../policy/budgets.js';

/** An agent's control connection carrying an observer session. */
export interface ObserverConnection extends ObserverLink {
  readonly sink: Sink;
  close(code: number, reason: string): void;
  /** The flight recorder's tap on this connection (issue 14), when the route records observer sessions. */
  readonly tap?: ObserverTap | undefined;
  /** The budget of the connection's credential: what the observer sends on its stream counts too. */
  readonly budget?: AgentBudget;
}

/** What the shell hands to the hub serving the session. */
export interface ObserverHubSide {
  /** The hub's time model: with the route, what names the hub (the flight recorder's hub log). */
  readonly mode: 'streaming' | 'lockstep';
  readonly highWaterBytes: number;
  readonly maxQueuedBytes: number;
  /** Told of every frame written to, or replaced for, an observer on its control connection. */
  readonly frameObserver: OutboxObserver;
  /** Make the upstream session carry `wants`; answer with `shell.channelsEnsured(ref, ok)`. */
  ensureChannels(shell: ObserverShell, ref: number, wants: readonly Need[]): void;
  startChannel(shell: ObserverShell, channel_id: number): void;
  /** The session's grants changed (the hub's channel index is stale). */
  grantsChanged(): void;
  /** The session let go of channels: the upstream subscription may narrow too. */
  subscriptionsChanged(): void;
  ended(shell: ObserverShell): void;
  /** The session left its connection (suspended, replaced, moved or closed): its channels restart on the next. */
  detached(shell: ObserverShell): void;
  note(event: ObserverNote, shell: ObserverShell, detail?: string): void;
  /** With a shared session store: the opened session's record there, so it resumes at any replica. */
  persist?(shell: ObserverShell): ObserverPersistence;
}

export class ObserverShell {
  /** Delivery to the current control connection (and its stream connection); null while detached. */
  sub: Subscriber | null = null;
  private conn: ObserverConnection | null = null;
  /** The last seq delivered per channel while detached: a resumed session continues above it (AWP-DAT-001). */
  private positions = new Map<string, number>();
  /** Channels this session delivered at another replica: numbered on from their positions (subscriber.ts). */
  private readonly rebased = new Set<string>();
  /** Its record in a shared store, if any. */
  private persistence: ObserverPersistence | undefined;
  /** Moving out (drain): the closes held until the store holds the session; null otherwise. */
  private held: (() => void)[] | null = null;
  private replayed = 0;
  /** The flight recorder's tap of the connection the session is (or was last) on. */
  private tap: ObserverTap | undefined;

  constructor(
    readonly session: ObserverSession<ObserverConnection>,
    private readonly hub: ObserverHubSide,
    /** A session claimed from the store: its record there, and where its channels stood. */
    restored?: { readonly persistence: ObserverPersistence; readonly positions: ObserverRecord['positions'] },
  ) {
    if (restored === undefined) return;
    this.persistence = restored.persistence;
    for (const [name, seq] of restored.positions) {
      this.positions.set(name, seq);
      this.rebased.add(name);
    }
  }

  /** The budget of the credential of the connection the session is on (none while detached). */
  get budget(): AgentBudget | undefined {
    return this.conn?.budget;
  }

  /** Whether a shared store holds this session. */
  get stored(): boolean {
    return this.persistence !== undefined;
  }

  /** What the store keeps of this session between connections. */
  record(): ObserverRecord {
    return {
      ...this.session.stored(),
      positions: [...this.positions].filter(([, seq]) => seq >= 0),
    };
  }

  /**
   * Drain: the session is suspended and stored, then its connection closed (1001), so the observer
   * resumes at another replica. Undefined when the session cannot move (no shared store).
   */
  moveOut(now: number): Promise<void> | undefined {
    const p = this.persistence;
    if (p === undefined || !this.session.attached) return undefined;
    const held: (() => void)[] = (this.held = []);
    this.run(this.session.moveOut(now)); // also issues the journal's write
    this.held = null;
    // What the observer resumes from elsewhere is in the store before it is told to go.
    return p.flushed().then(() => {
      for (const close of held) {
        try {
          close();
        } catch {
          // the connection is gone already
        }
      }
    });
  }

  /** Another replica resumed the session: this one lets go (its store record is the other's now). */
  fenced(now: number): void {
    this.persistence = undefined;
    this.run(this.session.close('resumed_elsewhere', now, 1001, 'session resumed at another replica'));
  }

  get session_id(): string {
    return this.session.session_id;
  }

  get token(): string {
    return this.session.token;
  }

  get state(): ObserverState {
    return this.session.state;
  }

  get attached(): boolean {
    return this.session.attached;
  }

  get journal(): ObserverSession['journal'] {
    return this.session.journal;
  }

  // ------------------------------------------------------------------ inputs

  open(conn: ObserverConnection, id: JsonRpcId, params: Record<string, unknown>, now: number): void {
    this.run(this.session.open(conn, id, params, now));
  }

  /** Returns how many notifications the resume replayed. */
  resume(conn: ObserverConnection, id: JsonRpcId, lastStatusSeq: number, now: number): number {
    this.replayed = 0;
    this.run(this.session.resume(conn, id, lastStatusSeq, now));
    return this.replayed;
  }

  fromAgent(text: string, now: number): void {
    this.tap?.fromAgent(text);
    this.run(this.session.fromAgent(text, now));
  }

  channelsEnsured(ref: number, ok: boolean): void {
    this.run(this.session.channelsEnsured(ref, ok));
  }

  worldEvent(event: Sequenced): void {
    this.run(this.session.worldEvent(event));
  }

  channelDegraded(channel: SubscribedChannel, now: number): void {
    this.run(this.session.channelDegraded(channel, now));
  }

  /** A frame reached the observer (the first one makes the session active). */
  firstActivity(now: number): void {
    if (this.session.state === 'ready') this.run(this.session.firstActivity(now));
  }

  tickTimers(now: number): void {
    this.run(this.session.tickTimers(now));
    if (this.session.attached) this.persistence?.renew(Date.now(), this.session.journal.acknowledged);
  }

  connectionLost(conn: ObserverConnection, now: number): void {
    this.run(this.session.connectionLost(conn, now));
  }

  close(reason: string, now: number, code?: number, closeReason?: string): void {
    this.run(this.session.close(reason, now, code, closeReason));
  }

  /** The control connection can take more: write what its queue holds. */
  drain(): void {
    this.sub?.control.drain();
  }

  needs(): IterableIterator<SubscribedChannel> {
    return this.session.needs();
  }

  // ------------------------------------------------------------------ effects

  private run(effects: readonly ObserverEffect<ObserverConnection>[]): void {
    if (effects.length === 0) return;
    for (const e of effects) this.apply(e);
    this.persistence?.journal(this.session.journal);
  }

  private apply(e: ObserverEffect<ObserverConnection>): void {
    switch (e.kind) {
      case 'attach': {
        const hub = this.hub;
        const sub = new Subscriber(e.conn.sink, hub.highWaterBytes, hub.maxQueuedBytes, hub.frameObserver);
        sub.sampleLatency = hub.mode === 'streaming'; // only streaming sessions report telemetry windows
        for (const g of e.channels) sub.subscribe(g, this.positions.get(g.name), this.rebased.has(g.name));
        this.conn = e.conn;
        this.sub = sub;
        this.tap = e.conn.tap;
        sub.frameTap = this.tap?.attached(this.session_id, hub.mode);
        return;
      }
      case 'send':
        return this.send(e.text);
      case 'telemetry':
        if (this.sub !== null) this.send(telemetryText(e.window_ms, this.sub.takeTelemetry()), true);
        return;
      case 'channels':
        for (const id of e.removed) this.sub?.unsubscribe(id);
        for (const g of e.grants)
          this.sub?.subscribe(g, this.positions.get(g.name), this.rebased.has(g.name));
        return this.hub.grantsChanged();
      case 'ensure-channels':
        return this.hub.ensureChannels(this, e.ref, e.wants);
      case 'start-channel':
        return this.hub.startChannel(this, e.channel_id);
      case 'subscriptions-changed':
        return this.hub.subscriptionsChanged();
      case 'release': {
        const sub = this.sub;
        if (sub === null) return;
        sub.leaveTopics(); // its last seqs are the topics' (AWP-DAT-001); nothing is published to it after
        if (e.stream !== undefined) sub.closeStream(e.stream.code, e.stream.reason);
        if (e.flush) sub.control.flushAll();
        for (const [name, seq] of sub.positions()) this.positions.set(name, seq);
        this.sub = null;
        this.conn = null;
        this.hub.detached(this);
        this.tap?.released();
        if (this.session.state === 'suspended')
          this.persistence?.suspended(Date.now(), this.session.journal.acknowledged, this.record());
        return;
      }
      case 'close-connection': {
        const { conn, code, reason } = e;
        if (this.held !== null) this.held.push(() => conn.close(code, reason));
        else conn.close(code, reason);
        return;
      }
      case 'note':
        if (e.event === 'opened') this.persistence = this.hub.persist?.(this);
        return this.hub.note(e.event, this, e.detail);
      case 'resumed':
        this.replayed = e.replayed;
        this.persistence?.attached(this.session.journal.acknowledged);
        return this.hub.note('resumed', this);
      case 'ended':
        this.tap?.ended();
        this.persistence?.ended();
        return this.hub.ended(this);
    }
  }

  /**
   * A text on the control connection; a full queue means the connection is lost. `numbersOnly`: see
   * ObserverTap.sent.
   */
  private send(text: string, numbersOnly = false): void {
    this.tap?.sent(text, numbersOnly);
    if (this.sub?.control.push(text, false) === 'overflow') this.run(this.session.sendQueueFull());
  }
}
