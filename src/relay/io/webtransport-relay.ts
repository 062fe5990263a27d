/**
 * A relay agent's `webtransport` stream connection, bridged to the world's `ws` stream endpoint (the
 * binding an agent uses need not be the world's). World frames go out on one unidirectional stream per
 * channel (independent flow control); the agent's command frames arrive on streams it opens, back to
 * back (or one per datagram), and each is forwarded as one `ws` binary message. Malformed input closes
 * the session with code 1002, reason `AWP_MALFORMED`, carried as the WebTransport close info.
 */
import { ChannelStreams } from '../../transport/webtransport-streams.js';
import { FrameError } from '../../protocol/frame.js';
import type { RelaySession } from '../relay-session.js';
import { FrameSplitter, FrameTooLarge, IncomingFrames } from '../../transport/webtransport-framing.js';
import { readIncomingStreams, type WebTransportSession } from '../../transport/webtransport.js';
import type { StreamContext } from './stream-context.js';
import { MALFORMED, StreamBridge } from './stream-bridge.js';

export class WebTransportRelay {
  /** The unfinished frames on the agent's streams, bounded across them. */
  private readonly incoming: IncomingFrames;

  private constructor(
    private readonly ctx: StreamContext,
    private readonly bridge: StreamBridge,
    /** Largest frame either side may send on this endpoint (AWP-TRN-011). */
    maxFrameBytes: number,
  ) {
    // At least one frame of the largest size always fits, whatever max_queued_bytes says.
    const maxHeld = Math.max(ctx.config.transport.max_queued_bytes, maxFrameBytes);
    this.incoming = new IncomingFrames(() => new FrameSplitter(maxFrameBytes), maxHeld);
  }

  /** Dials the world's stream endpoint before the agent's session is accepted (a failure refuses it). */
  static async open(
    ctx: StreamContext,
    session: RelaySession,
    url: string,
    maxFrameBytes: number,
  ): Promise<WebTransportRelay> {
    const bridge = new StreamBridge(ctx, session, url, 'webtransport');
    await bridge.ready;
    return new WebTransportRelay(ctx, bridge, maxFrameBytes);
  }

  /** The agent's session is up: frames that arrived meanwhile go first. */
  attach(agent: WebTransportSession): void {
    if (this.bridge.done) {
      agent.close({ closeCode: 1001, reason: 'world stream connection closed' });
      return;
    }
    const t = this.ctx.config.transport;
    const streams = new ChannelStreams(
      agent,
      t.high_water_bytes,
      t.max_queued_bytes,
      this.bridge.toAgentMetrics,
      () => this.bridge.end(1011, 'stream write to the agent failed'),
    );
    agent.closed.then(
      () => this.bridge.agentGone('agent stream connection lost'),
      () => this.bridge.agentGone('agent stream connection lost'),
    );
    readIncomingStreams(agent, {
      chunk: (stream, data) => this.fromAgent(stream, data),
      end: (stream, finished) => this.agentStreamEnded(stream, finished),
      // A datagram holds exactly one frame (a frame too large for one goes on a stream).
      datagram: (data) => this.bridge.fromAgent(Buffer.from(data.buffer, data.byteOffset, data.byteLength)),
    });
    this.bridge.attach({
      push: (buf, channel_id, latestWins, note) => streams.push(channel_id, buf, latestWins, note),
      close: (code, reason) => {
        streams.close();
        agent.close({ closeCode: code, reason });
      },
    });
  }

  /** The agent never completed its session: release the world's side. */
  abandon(): void {
    this.bridge.agentGone('agent did not complete its session');
  }

  private fromAgent(stream: object, data: Uint8Array): void {
    if (this.bridge.done) return;
    let frames: Buffer[];
    try {
      frames = this.incoming.push(stream, data);
    } catch (err) {
      if (err instanceof FrameTooLarge)
        return this.bridge.end(1009, 'frame exceeds max_frame_bytes', err.message);
      if (err instanceof FrameError)
        return this.bridge.end(1002, MALFORMED, `agent sent a malformed frame: ${err.message}`);
      throw err;
    }
    for (const buf of frames) if (!this.bridge.fromAgent(buf)) return;
  }

  /** A reset stream's partial frame is dropped with it; one that ended inside a frame is malformed. */
  private agentStreamEnded(stream: object, finished: boolean): void {
    try {
      this.incoming.end(stream, finished);
    } catch {
      this.bridge.end(1002, MALFORMED, 'agent stream ended inside a frame');
    }
  }
}
