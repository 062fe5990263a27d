/**
 * What an observer session (observer-session.ts, sans-IO) reads of the hub serving it, and the effects
 * it asks its shell (observer-shell.ts, with the hub in channel-hub.ts) to carry out, in order.
 */
import type { StreamEndpoint } from '../session/stream-endpoint.js';
import type { Need } from './hub-demand.js';
import type { GrantSource } from './observer-grants.js';
import type { SubscribedChannel } from './subscriber.js';

/** What an observer session reads of its hub: the world's channels and grants, clock, session fields. */
export interface ObserverHost extends GrantSource {
  readonly mode: 'streaming' | 'lockstep';
  /** Observers' messages nesting deeper are refused before they are parsed (transport.max_json_depth). */
  readonly maxJsonDepth: number;
  manifestJson(): string;
  /** Why the world session failed, once it has (observers opening then are refused). */
  failure(): string | null;
  /** The edge's estimate of the upstream session clock (ns), or undefined before any sample. */
  sessionNow(nowMs: number): number | undefined;
  readyFields(): {
    heartbeat_interval_ms: number;
    reconnect_window_ms: number;
    clock_anchor?: string;
    tick?: number;
  };
  /** The edge's stream endpoints for observers who reached it at `publicBase`. */
  endpoints(publicBase: string): StreamEndpoint[];
}

/** A control connection as the session sees it: the shell's own handle, opaque but for its address. */
export interface ObserverLink {
  readonly publicBase: string;
}

export type ObserverState = 'opening' | 'ready' | 'active' | 'suspended' | 'closed';

export type ObserverNote = 'opened' | 'resumed' | 'suspended' | 'closed' | 'refused';

export type ObserverEffect<C extends ObserverLink> =
  /** The session is on `conn` now: deliver `channels` there, each above the seq it last delivered. */
  | { kind: 'attach'; conn: C; channels: SubscribedChannel[] }
  /** A text on the current control connection, in order with the frames delivered inline there. */
  | { kind: 'send'; text: string }
  /** session.telemetry over what was delivered on the current connection in the last `window_ms`. */
  | { kind: 'telemetry'; window_ms: number }
  /** The exact grants now (AWP-NEG-001): deliver these channels at these rates, stop `removed`. */
  | { kind: 'channels'; grants: SubscribedChannel[]; removed: number[] }
  /**
   * The hub must carry these channels at these rates (latest-wins: the highest any observer needs).
   * Always the last effect of its batch; its answer is the input `channelsEnsured(ref, ok)`.
   */
  | { kind: 'ensure-channels'; ref: number; wants: Need[] }
  /** Send the channel's current state: the cached keyframe with resync, then what followed. */
  | { kind: 'start-channel'; channel_id: number }
  /** An observer's subscriptions narrowed: the hub may narrow its upstream subscription. */
  | { kind: 'subscriptions-changed' }
  /**
   * The session lets go of its connection: close the stream connection (if `stream`), hand what the
   * control connection's queue holds to the engine (if `flush`), and remember each channel's last seq.
   */
  | { kind: 'release'; stream?: { code: number; reason: string }; flush: boolean }
  | { kind: 'close-connection'; conn: C; code: number; reason: string }
  /** Metrics and logs. */
  | { kind: 'note'; event: Exclude<ObserverNote, 'resumed'>; detail?: string }
  | { kind: 'resumed'; replayed: number }
  /** The session is closed: the hub forgets it. */
  | { kind: 'ended' };
