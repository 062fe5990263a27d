/**
 * Bookkeeping for the fan-out load test: what the edge released to each observer (its own per-observer
 * decisions, after downsampling), what each observer received, and latency percentiles. The taps wrap
 * the product's methods to record, never to change what they do, and are removed after the run.
 */
import { ChannelHub } from '../../src/fanout/channel-hub.js';
import type { HubFrame } from '../../src/fanout/keyframe-cache.js';
import { Subscriber } from '../../src/fanout/subscriber.js';

/** Per channel: the seqs and capture times in arrival order. */
export class SeqTs {
  readonly seq: number[] = [];
  readonly ts: number[] = [];
  push(seq: number, ts: number): void {
    this.seq.push(seq);
    this.ts.push(ts);
  }
  inWindow(ta: number, tb: number): number[] {
    return this.seq.filter((_, i) => this.ts[i]! >= ta && this.ts[i]! <= tb);
  }
}

export interface Taps {
  /** Frames the hub received from the world, by channel id. */
  readonly hub: Map<number, SeqTs>;
  /** Frames the edge released to a subscriber (passed its rate gate and were handed to its outbox). */
  released(sub: Subscriber, channel_id: number): SeqTs;
  remove(): void;
}

export function installTaps(): Taps {
  const hubFrames = new Map<number, SeqTs>();
  const released = new WeakMap<Subscriber, Map<number, SeqTs>>();
  const at = <K>(m: Map<K, SeqTs>, k: K): SeqTs => {
    let v = m.get(k);
    if (v === undefined) m.set(k, (v = new SeqTs()));
    return v;
  };
  const perSub = (s: Subscriber): Map<number, SeqTs> => {
    let m = released.get(s);
    if (m === undefined) released.set(s, (m = new Map<number, SeqTs>()));
    return m;
  };

  const hubProto = ChannelHub.prototype as unknown as { fanOut: (this: ChannelHub, f: HubFrame) => void };
  const fanOut = hubProto.fanOut;
  hubProto.fanOut = function (this: ChannelHub, f: HubFrame) {
    at(hubFrames, f.channel_id).push(f.seq, f.ts_mono_ns);
    fanOut.call(this, f);
  };
  // eslint-disable-next-line @typescript-eslint/unbound-method -- wrapped below and called with its own `this`
  const deliver = Subscriber.prototype.deliver;
  Subscriber.prototype.deliver = function (this: Subscriber, frame, note, start) {
    const outcome = deliver.call(this, frame, note, start);
    if (outcome === 'forwarded' || outcome === 'overflow-stream' || outcome === 'overflow-control') {
      at(perSub(this), frame.channel_id).push(frame.seq, frame.ts_mono_ns);
    }
    return outcome;
  };
  return {
    hub: hubFrames,
    released: (sub, id) => perSub(sub).get(id) ?? new SeqTs(),
    remove: () => {
      hubProto.fanOut = fanOut;
      Subscriber.prototype.deliver = deliver;
    },
  };
}

export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

export function ms(ns: number): string {
  return (ns / 1e6).toFixed(2);
}
