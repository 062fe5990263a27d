/**
 * An observer's `webtransport` stream connection: the hub's frames on one outgoing stream per channel
 * (transport/webtransport-streams.ts).
 */
import type { WebTransportSession } from '../transport/webtransport.js';
import { ChannelStreams } from '../transport/webtransport-streams.js';
import type { FrameNote, OutboxObserver } from '../transport/outbox.js';
import type { HubFrame } from './keyframe-cache.js';
import type { StreamSink } from './subscriber.js';

/** An observer's `webtransport` stream connection, served by the hub (see StreamSink). */
export class WebTransportStreamSink implements StreamSink {
  private readonly streams: ChannelStreams;
  private ended = false;

  constructor(
    private readonly session: WebTransportSession,
    highWaterBytes: number,
    maxQueuedBytes: number,
    observer?: OutboxObserver,
  ) {
    this.streams = new ChannelStreams(session, highWaterBytes, maxQueuedBytes, observer, () =>
      this.close(1011, 'stream write failed'),
    );
    const gone = () => {
      this.ended = true;
      this.streams.close();
    };
    session.closed.then(gone, gone);
  }

  push(frame: HubFrame, latestWins: boolean, note: FrameNote): 'sent' | 'queued' | 'replaced' | 'overflow' {
    if (this.ended) return 'queued';
    return this.streams.push(frame.channel_id, frame.buf, latestWins, note);
  }

  queuedBytes(channel_id: number): number {
    return this.streams.queuedBytes(channel_id);
  }

  close(code: number, reason: string): void {
    if (this.ended) return;
    this.ended = true;
    this.streams.close();
    this.session.close({ closeCode: code, reason });
  }
}
