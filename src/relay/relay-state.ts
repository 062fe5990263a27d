/**
 * What one relay connection holds (see relay-connection.ts): its concerns (the upstream link, requests
 * in flight, the initialize cache, status_seq sequencing), the session it carries, and the plumbing
 * every part of the relay uses to emit effects and to end or let go of the session.
 */
import { AdmissionGate } from '../policy/admission.js';
import { WS_CLOSE_PROTOCOL_ERROR } from '../protocol/errors.js';
import { TextQueue } from '../protocol/text-queue.js';
import type { ManifestChannels } from './channels.js';
import { InitializeCache } from './initialize-cache.js';
import { PendingRequests } from './pending-requests.js';
import type { FrameRoute, RelayEffect, RelayRoute } from './relay-effects.js';
import type { RelaySession, SessionAttachment } from './relay-session.js';
import type { ResumeRequest } from './resume.js';
import { StatusSequencer } from './sequencing.js';
import { UpstreamLink } from './upstream-link.js';
import type { JsonRpcId } from '../protocol/jsonrpc.js';

export abstract class RelayState implements SessionAttachment {
  protected out: RelayEffect[] = [];

  protected readonly emit = (effect: RelayEffect): void => void this.out.push(effect);

  protected readonly link: UpstreamLink;

  protected readonly pending = new PendingRequests();

  protected readonly init: InitializeCache;

  protected readonly seq = new StatusSequencer(this.emit);

  protected readonly admission = new AdmissionGate();

  /** A session.resume waiting for the session lookup; the agent's messages wait behind it. */
  protected lookup: ResumeRequest | null = null;

  /** Bounded like the link's queue (route.maxQueuedBytes). */
  protected readonly agentBacklog: TextQueue;
  /** The agent sent more than may wait (queueFull): it is being closed. */
  protected overflowed = false;

  protected session: RelaySession | null = null;

  /** A session.open or session.resume is on its way. */
  protected opening = false;

  protected manifest: ManifestChannels | null = null;

  protected mode: 'lockstep' | 'streaming' = 'streaming';

  protected ended = false;

  constructor(protected readonly route: RelayRoute) {
    this.init = new InitializeCache(route);
    this.agentBacklog = new TextQueue(route.maxQueuedBytes);
    this.link = new UpstreamLink(this.emit, route.maxQueuedBytes, () => this.queueFull());
  }

  /**
   * What the agent sent waits past route.maxQueuedBytes: it is closed, as for any queue for a peer, and
   * nothing more it sends is read; its session is let go of when the close arrives (agentClosed).
   */
  protected queueFull(): void {
    if (this.overflowed) return;
    this.overflowed = true;
    this.emit({ kind: 'rejected', reason: 'send_queue_full' });
    this.emit({ kind: 'close-agent', code: 1008, reason: 'send queue full' });
  }

  admitStream(): boolean {
    return this.route.admitStream?.() ?? true;
  }

  get currentSession(): RelaySession | null {
    return this.session;
  }

  get isClosed(): boolean {
    return this.ended;
  }

  protected track(id: JsonRpcId, method: string, now: number): void {
    this.pending.track(id, { method, sent_at: now });
  }

  protected toAgent(text: string, frame?: FrameRoute): void {
    this.emit(frame ? { kind: 'to-agent', text, frame } : { kind: 'to-agent', text });
  }

  protected endSession(session: RelaySession, reason: string): void {
    if (session.closed) return;
    session.closed = true;
    session.attachment = null;
    if (this.session === session) this.session = null;
    this.emit({ kind: 'session-ended', session, reason });
  }

  protected detach(reason: string): void {
    const session = this.session;
    if (session === null) return;
    this.session = null;
    if (session.attachment === this && !session.closed) {
      session.attachment = null;
      this.emit({ kind: 'session-detached', session, reason });
    }
  }

  /** The session, while this connection serves it (a resume elsewhere takes it over, AWP-SES-010). */
  protected owned(): RelaySession | null {
    const s = this.session;
    return s !== null && s.attachment === this ? s : null;
  }

  protected flush(): RelayEffect[] {
    const out = this.out;
    this.out = [];
    return out;
  }

  /**
   * AWP-CTL-009 through a proxy: the session ends on both hops. Nothing is sent upstream on the agent's
   * behalf (not even `session.close`, which the world would attribute to the agent): the upstream
   * connection closes as the agent's did, so the world sees a transport loss, suspends the session and
   * runs its watchdog; the edge holds the session no longer, so it cannot be resumed.
   */
  protected endForProtocolError(reason: string, detail: string, agentCode = WS_CLOSE_PROTOCOL_ERROR): void {
    if (this.session !== null) this.endSession(this.session, detail);
    this.emit({ kind: 'close-agent', code: agentCode, reason });
    this.link.close(WS_CLOSE_PROTOCOL_ERROR, reason);
    this.ended = true;
  }
}
