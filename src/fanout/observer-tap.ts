/**
 * What an observer session's shell tells the flight recorder (issue 14), when the route records observer
 * sessions: the edge implements it (edge/observer-recording.ts) and hands it over with the connection.
 */
import type { HubFrame } from './keyframe-cache.js';

/** What the recording of an observer session is told of the frames delivered to it. */
export interface FrameTap {
  /** A frame delivered to this session alone (on its control connection inline, or its stream), now. */
  delivered(frame: HubFrame, onStream: boolean): void;
  /**
   * A topic shard (hub-topics.ts) publishes `frame` now to members of which some are recorded: asked of
   * one member's tap per publish (the route's recorder numbers the frame once for all of them); the number
   * is what the members read back through their `SharedReader`.
   */
  shared(frame: HubFrame): number;
  /**
   * The session's channel joined a topic shard (`reader`: what the shard published to it since it last
   * read) or left it (undefined; read it one last time first). A shard's members are not told of each
   * frame it publishes: the recording reads them before it writes any other record of the session, and on
   * the recorder's tick, so its file keeps the order of delivery at the cost of a few numbers per frame.
   */
  follow(channel_id: number, reader: SharedReader | undefined): void;
}

/** The frames a topic shard published to one member, since its last read. */
export interface SharedReader {
  /** Whether the shard published to it since its last read (cheap: the recording asks before each record). */
  readonly waiting: boolean;
  /** The time (ms) and number of the oldest frame not read yet (Infinity when none waits). */
  readonly nextAt: number;
  readonly nextN: number;
  /**
   * Calls `each` with their numbers (`FrameTap.shared`) and times (ms), oldest first, up to (not
   * including) the first published at (`beforeAt`, `beforeN`) or later: so a session's shards are merged
   * into the order of delivery without copying. Returns how many older ones the shard no longer held
   * (its log is bounded: a reader that does not read loses them).
   */
  read(each: (n: number, atMs: number) => void, beforeAt?: number, beforeN?: number): number;
}

export interface ObserverTap {
  /**
   * The session is on this connection now, fed by `hub` (its hub's name: one per route and time model);
   * what to call for each frame delivered to it.
   */
  attached(session_id: string, hub: string): FrameTap | undefined;
  /** A message from the observer, as it arrived. */
  fromAgent(text: string): void;
  /**
   * A message the edge sent the observer (frames go to the FrameTap). `numbersOnly`: the edge wrote it
   * of its own keys and numbers (session.telemetry), so no string in it can be a credential or a grant.
   */
  sent(text: string, numbersOnly?: boolean): void;
  /** The session let go of this connection (it may resume on another). */
  released(): void;
  /** The session ended. */
  ended(): void;
}
