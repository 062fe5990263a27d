import type { ServerConnection } from '../transport/engine.js';
import type { HubFrame } from './keyframe-cache.js';
import { Outbox, type FrameNote, type OutboxObserver } from '../transport/outbox.js';
import type { StreamSink } from './subscriber.js';

/**
 * An observer's `ws` stream connection: one binary message per frame (AWP-TRN-013), the hub's buffer
 * written as is, latest-wins frames replaced while the socket is busy.
 */
export class WsStreamSink implements StreamSink {
  private readonly out: Outbox;

  constructor(
    private readonly conn: ServerConnection,
    highWaterBytes: number,
    maxQueuedBytes: number,
    observer?: OutboxObserver,
  ) {
    this.out = new Outbox(conn, highWaterBytes, maxQueuedBytes, observer);
  }

  push(frame: HubFrame, latestWins: boolean, note: FrameNote): 'sent' | 'queued' | 'replaced' | 'overflow' {
    return this.out.push(frame.buf, true, latestWins ? frame.channel_id : undefined, note);
  }

  holds(channel_id: number): boolean {
    return this.out.holds(channel_id);
  }

  drain(): void {
    this.out.drain();
  }

  close(code: number, reason: string): void {
    this.conn.close(code, reason);
  }
}
