/**
 * Durations that come off the wire (a world's reconnect_window_ms, the slot of a granted rate) as a Node
 * timer takes them. setTimeout turns a delay above 2^31 - 1 ms (about 24.8 days), a negative one or NaN
 * into 1 ms, so an unchecked value fires at once (and warns each time). Here, not in transport, because
 * the recorder arms such timers too and may import only protocol.
 */

/** The longest delay setTimeout honours. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** `ms` as a delay setTimeout honours: a longer one is cut to the longest (whoever waits looks again then). */
export function timerDelay(ms: number): number {
  return ms > 0 ? Math.min(ms, MAX_TIMER_MS) : 0; // NaN and negatives: now
}
