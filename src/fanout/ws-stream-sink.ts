import type { ConnectionTopics, ServerConnection } from '../transport/engine.js';
import type { HubFrame } from './keyframe-cache.js';
import { Outbox, type FrameNote, type OutboxObserver } from '../transport/outbox.js';
import type { StreamSink, TopicPort } from './subscriber.js';

/**
 * An observer's `ws` stream connection: one binary message per frame (AWP-TRN-013), the hub's buffer
 * written as is, latest-wins frames replaced while the socket is busy. On an engine with pub/sub
 * (uWebSockets.js) its channels may also be served through the hub's topics (hub-topics.ts).
 */
export class WsStreamSink implements StreamSink {
  private readonly out: Outbox;
  readonly topics: TopicPort | undefined;

  constructor(
    private readonly conn: ServerConnection,
    highWaterBytes: number,
    maxQueuedBytes: number,
    observer?: OutboxObserver,
  ) {
    this.out = new Outbox(conn, highWaterBytes, maxQueuedBytes, observer);
    const topics = conn.topics;
    this.topics = topics === undefined ? undefined : new WsTopicPort(conn, topics, this.out, observer);
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

/**
 * A topic nothing is published to, which every stream connection in a topic stays subscribed to: uWS frees
 * a connection's subscriber state when it leaves its last topic, and with it the frames published to the
 * connection but not yet written (uWS writes small ones once per loop iteration). Anchored, they are
 * written before anything sent to the connection later, so seq order holds across a leave and what was
 * counted forwarded is sent.
 */
const ANCHOR_TOPIC = 'awp-edge/anchor';

class WsTopicPort implements TopicPort {
  private anchored = false;

  constructor(
    private readonly conn: ServerConnection,
    private readonly topics: ConnectionTopics,
    private readonly out: Outbox,
    private readonly observer: OutboxObserver | undefined,
  ) {}

  get bufferedAmount(): number {
    return this.conn.bufferedAmount;
  }

  get idle(): boolean {
    return this.out.idle;
  }

  join(topic: string): boolean {
    if (!this.anchored) this.anchored = this.topics.subscribe(ANCHOR_TOPIC);
    return this.anchored && this.topics.subscribe(topic);
  }

  leave(topic: string): void {
    this.topics.unsubscribe(topic);
  }

  publish(topic: string, frame: HubFrame, note: FrameNote, members: number): void {
    this.topics.publish(topic, frame.buf);
    this.observer?.written(note, frame.buf.length, members);
  }
}
