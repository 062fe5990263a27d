/**
 * What an observer session's shell tells the flight recorder (issue 14), when the route records observer
 * sessions: the edge implements it (edge/observer-recording.ts) and hands it over with the connection.
 */
import type { HubFrame } from './keyframe-cache.js';

/** A frame delivered to the observer (on its control connection inline, or on its stream connection). */
export type FrameTap = (frame: HubFrame, onStream: boolean) => void;

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
