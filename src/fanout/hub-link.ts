/**
 * A hub's connections to its world: the control connection of its upstream observer session, and the
 * session's `ws` stream connection, re-dialled while the control connection is up (the world restarts
 * reliable channels with resync). The hub's protocol logic stays in HubUpstream; this is its I/O.
 */
import type { FaultReporter } from '../transport/contain.js';
import { dialUpstream, type UpstreamConnection } from '../transport/upstream.js';

/** What the link needs from the edge (a part of the hub's context). */
export interface HubLinkContext {
  readonly route: string;
  readonly upstreamUrl: string;
  readonly upstreamToken: string | undefined;
  readonly connectTimeoutMs: number;
  readonly maxMessageBytes: number;
  /** What the world may leave unread of the hub's messages (transport.max_queued_bytes). */
  readonly maxQueuedBytes: number;
  readonly pingIntervalMs: number;
  /** An upstream connection of `kind` (hub: control; stream: the ws stream) opened (live) or closed. */
  upstream(kind: 'hub' | 'stream', handle: object, live: boolean): void;
  upstreamFailed(kind: 'hub' | 'stream'): void;
  log(level: 'info' | 'warn', fields: Record<string, unknown>, message: string): void;
  fault: FaultReporter;
}

/** What the link tells its hub. */
export interface HubLinkEvents {
  /** The control connection is open. */
  connected(): void;
  dialFailed(detail: string): void;
  /** A text message on the control connection. */
  message(text: string): void;
  /** A binary frame on the stream connection. */
  frame(buf: Buffer): void;
  controlLost(): void;
  /** Whether a lost stream connection should be dialled again (the session is still up). */
  wantsStream(): boolean;
}

const STREAM_REDIAL_MS = 200;

export class HubLink {
  private control: UpstreamConnection | null = null;
  private stream: UpstreamConnection | null = null;
  private retired = false;

  constructor(
    private readonly ctx: HubLinkContext,
    private readonly events: HubLinkEvents,
  ) {}

  dialControl(): void {
    const ctx = this.ctx;
    dialUpstream(
      { ...this.dialOptions(ctx.upstreamUrl), credential: ctx.upstreamToken },
      {
        message: (data, binary) => {
          if (!binary) this.events.message(data as string);
        },
        drain: () => undefined,
        close: () => {
          this.control = null;
          ctx.upstream('hub', this, false);
          this.stream?.close(1000, 'control connection lost');
          if (!this.retired) this.events.controlLost();
        },
      },
    ).then(
      (conn) => {
        if (this.retired) return conn.close(1000, 'hub retired');
        this.control = conn;
        ctx.upstream('hub', this, true);
        this.events.connected();
      },
      (err: unknown) => {
        ctx.upstreamFailed('hub');
        this.events.dialFailed(`cannot reach the world: ${(err as Error).message}`);
      },
    );
  }

  /** The upstream session's stream connection, with its session token as credential (AWP-TRN-013). */
  dialStream(url: string, token: string | undefined): void {
    const ctx = this.ctx;
    dialUpstream(
      { ...this.dialOptions(url), credential: token },
      {
        message: (data, binary) => {
          if (binary) this.events.frame(data as Buffer);
        },
        drain: () => undefined,
        close: () => {
          this.stream = null;
          ctx.upstream('stream', this, false);
          if (!this.retired && this.control !== null && this.events.wantsStream())
            setTimeout(() => this.dialStream(url, token), STREAM_REDIAL_MS).unref();
        },
      },
    ).then(
      (conn) => {
        if (this.retired || this.control === null) return conn.close(1000, 'hub retired');
        this.stream = conn;
        ctx.upstream('stream', this, true);
      },
      (err: unknown) => {
        ctx.upstreamFailed('stream');
        ctx.log(
          'warn',
          { route: ctx.route, event: 'hub_stream_unavailable', detail: String(err) },
          'frames stay inline',
        );
      },
    );
  }

  /**
   * The hub's messages to its world: its requests (bounded in number) and its answers to the world's
   * pings (as many as the world sends). A world that sends and does not read would make them the edge's
   * memory: past `maxQueuedBytes` unread the connection goes (the session resumes on a new one), as an
   * agent's does when it does not read.
   */
  send(text: string): void {
    const c = this.control;
    if (c === null) return;
    if (c.bufferedAmount + text.length > this.ctx.maxQueuedBytes) {
      this.ctx.log(
        'warn',
        { route: this.ctx.route, event: 'hub_send_queue_full', queued_bytes: c.bufferedAmount },
        'world does not read what the hub sends; dropping the connection',
      );
      return c.terminate();
    }
    c.send(text, false);
  }

  close(code: number, reason: string): void {
    this.control?.close(code, reason);
    this.stream?.close(1000, reason);
  }

  /** The hub is done: nothing is dialled again, and what is open closes. */
  retire(): void {
    this.retired = true;
    this.close(1000, 'hub retired');
  }

  private dialOptions(url: string) {
    const ctx = this.ctx;
    return {
      url,
      connectTimeoutMs: ctx.connectTimeoutMs,
      maxMessageBytes: ctx.maxMessageBytes,
      pingIntervalMs: ctx.pingIntervalMs,
      onFault: ctx.fault,
    };
  }
}
