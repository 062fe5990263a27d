/** Latency samples for `session.telemetry` (AWP-TIM-006): all in session-clock ns. */
import { summarise, type LatencyStats } from '../protocol/latency-stats.js';

/** Samples kept per window; beyond this, new samples overwrite old ones round-robin. */
const CAP = 4096;

class Samples {
  private readonly values: number[] = [];
  private seen = 0;

  add(v: number): void {
    if (this.values.length < CAP) this.values.push(v);
    else this.values[this.seen % CAP] = v;
    this.seen += 1;
  }

  /** latency_stats of the kept samples (the one rank rule), counting every sample the window saw. */
  stats(): LatencyStats | undefined {
    const st = summarise([...this.values]);
    return st === undefined ? undefined : { ...st, count: this.seen };
  }
}

export class Telemetry {
  observation = new Samples();
  admission = new Samples();
  observationToAction = new Samples();
  channels = new Map<number, Samples>();

  /** Start a new window. */
  reset(): void {
    this.observation = new Samples();
    this.admission = new Samples();
    this.observationToAction = new Samples();
    this.channels = new Map();
  }

  frameSent(channelId: number, latencyNs: number): void {
    this.observation.add(latencyNs);
    let c = this.channels.get(channelId);
    if (c === undefined) {
      c = new Samples();
      this.channels.set(channelId, c);
    }
    c.add(latencyNs);
  }

  /** The `session.telemetry` params for a window: each statistic only when samples exist. */
  params(windowMs: number): Record<string, unknown> {
    const out: Record<string, unknown> = { window_ms: windowMs };
    const put = (key: string, s: Samples): void => {
      const st = s.stats();
      if (st !== undefined) out[key] = st;
    };
    put('observation_latency_ns', this.observation);
    put('admission_latency_ns', this.admission);
    put('observation_to_action_ns', this.observationToAction);
    if (this.channels.size > 0) {
      const channels: Record<string, LatencyStats> = {};
      for (const [id, s] of this.channels) {
        const st = s.stats();
        if (st !== undefined) channels[String(id)] = st;
      }
      out.channels = channels;
    }
    return out;
  }
}
