/**
 * A relay agent's `ws` stream connection (AWP-TRN-013): one binary message per frame, bridged to the
 * world's `ws` stream endpoint; a text message or a malformed frame closes it with 1002 AWP_MALFORMED.
 */
import { Outbox } from '../../transport/outbox.js';
import type { RelaySession } from '../relay-session.js';
import type { ConnectionHandlers, ServerConnection } from '../../transport/engine.js';
import type { StreamContext } from './stream-context.js';
import { MALFORMED, StreamBridge } from './stream-bridge.js';

export class StreamRelay implements ConnectionHandlers {
  private out: Outbox | null = null;

  private constructor(private readonly bridge: StreamBridge) {}

  /**
   * Accepts at once and dials the world's stream endpoint meanwhile (a failure closes the agent's side
   * with 1014): deciding an upgrade synchronously keeps uWebSockets.js on its synchronous upgrade path,
   * which an asynchronous upgrade in this release can close right after open (uNetworking/uWebSockets#1928).
   */
  static open(ctx: StreamContext, session: RelaySession, url: string): StreamRelay {
    return new StreamRelay(new StreamBridge(ctx, session, url, 'ws'));
  }

  /** The agent's side is up. */
  attach(conn: ServerConnection, ctx: StreamContext): ConnectionHandlers {
    const t = ctx.config.transport;
    const out = new Outbox(conn, t.high_water_bytes, t.max_queued_bytes, this.bridge.toAgentMetrics);
    this.out = out;
    this.bridge.attach({
      push: (buf, channel_id, latestWins, note) =>
        out.push(buf, true, latestWins ? channel_id : undefined, note),
      close: (code, reason) => {
        out.flushAll();
        conn.close(code, reason);
      },
    });
    return this;
  }

  /** The agent left before its upgrade completed. */
  abandon(): void {
    this.bridge.agentGone('agent left before its stream connection opened');
  }

  message(data: string | Uint8Array, binary: boolean): void {
    if (!binary) return this.bridge.end(1002, MALFORMED, 'agent sent a text message on a stream connection');
    this.bridge.fromAgent(data as Buffer);
  }

  drain(): void {
    this.out?.drain();
  }

  close(): void {
    this.bridge.agentGone('agent stream connection lost');
  }
}
