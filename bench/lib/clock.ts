/**
 * Checks a world's session-clock origin against the `origin` its process reported, with ping exchanges
 * (AWP-CLK-007's method, exact here because both sides read the same CLOCK_MONOTONIC): a ping sent at
 * t1 and answered by t2 was stamped w by the world at some instant in [t1, t2], so the world's origin
 * lies in [t1 - w, t2 - w]. Intersecting over many pings bounds (world origin - reported origin).
 */
import { AwpSession } from './awp-session.js';

export interface ClockCheck {
  /** Bounds of (world origin - reported origin), us; latency figures are exact if it is 0. */
  readonly origin_gap_us: readonly [number, number];
  readonly pings: number;
}

export async function checkWorldOrigin(
  url: string,
  origin: string,
  credential: string,
  pings = 200,
): Promise<ClockCheck> {
  const o = BigInt(origin);
  const s = await AwpSession.connect(url, credential);
  try {
    await s.initialize();
    let lo = -Infinity;
    let hi = Infinity;
    for (let i = 0; i < pings; i++) {
      const t1 = process.hrtime.bigint();
      const { msg } = await s.call('ping', { origin_ns: 1 });
      const t2 = process.hrtime.bigint();
      const w = (msg.result as { receive_ns: number }).receive_ns;
      lo = Math.max(lo, Number(t1 - o) - w);
      hi = Math.min(hi, Number(t2 - o) - w);
    }
    return { origin_gap_us: [Math.round(lo / 100) / 10, Math.round(hi / 100) / 10], pings };
  } finally {
    s.destroy();
  }
}
