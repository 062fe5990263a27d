/**
 * Offset of a session clock from a local monotonic clock, from ping exchanges (AWP-CLK-007/008):
 * rtt = (t4 - t1) - (transmit - receive), offset = ((receive - t1) + (transmit - t4)) / 2, keeping the
 * sample with the smallest rtt among the last eight. Pure arithmetic; callers pass the times.
 */
const WINDOW = 8;

export interface ClockSample {
  readonly rtt_ns: number;
  readonly offset_ns: number;
}

export class ClockEstimate {
  /** The last WINDOW samples, a ring (`next` is the oldest once full): one is added per relayed pong. */
  private readonly samples: ClockSample[] = [];
  private next = 0;
  private best: ClockSample | null = null;

  /** `t1`/`t4`: local ns when the ping left and the pong arrived; `receive`/`transmit` from the pong. */
  add(t1: number, receive_ns: number, transmit_ns: number, t4: number): void {
    const rtt_ns = t4 - t1 - (transmit_ns - receive_ns);
    if (!(rtt_ns >= 0)) return; // a clock that went backwards or a mismatched pong: not a sample
    const offset_ns = (receive_ns - t1 + (transmit_ns - t4)) / 2;
    const sample = { rtt_ns, offset_ns };
    const s = this.samples;
    if (s.length < WINDOW) s.push(sample);
    else {
      s[this.next] = sample;
      this.next = (this.next + 1) % WINDOW;
    }
    // The smallest rtt, the oldest first among equals (as a scan from the oldest would keep it).
    let best = s[this.next % s.length]!;
    for (let k = 1; k < s.length; k++) {
      const c = s[(this.next + k) % s.length]!;
      if (c.rtt_ns < best.rtt_ns) best = c;
    }
    this.best = best;
  }

  /** The session clock now, or undefined before the first sample. */
  sessionNow(local_ns: number): number | undefined {
    return this.best === null ? undefined : local_ns + this.best.offset_ns;
  }

  get sample(): ClockSample | null {
    return this.best;
  }
}

/**
 * The answer to a `ping` (AWP-CTL-004) from a peer that answers at once: its clock `stamp_ns` as both
 * receive and transmit time, and the ping's `origin_ns` echoed (0 when the ping carried none).
 */
export function pongText(id: string | number, params: unknown, stamp_ns: number): string {
  const origin = (params as { origin_ns?: unknown } | null | undefined)?.origin_ns;
  const origin_ns = typeof origin === 'number' ? origin : 0;
  return JSON.stringify({
    jsonrpc: '2.0',
    id,
    result: { origin_ns, receive_ns: stamp_ns, transmit_ns: stamp_ns },
  });
}
