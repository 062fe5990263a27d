/**
 * Bookkeeping for the fan-out load test: what the edge released to each observer (its own per-observer
 * decisions, after downsampling), what each observer received, and latency percentiles. The taps wrap
 * the product's methods to record, never to change what they do, and are removed after the run.
 */
import { ChannelHub } from '../../src/fanout/channel-hub.js';
import type { HubFrame } from '../../src/fanout/keyframe-cache.js';
import { Subscriber } from '../../src/fanout/subscriber.js';
import { FrameMetrics } from '../../src/telemetry/frame-metrics.js';
import type { FrameNote } from '../../src/transport/outbox.js';
import type { ChannelReport } from './fleet.js';

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
  /**
   * Released latest-wins frames that a newer one on their channel then replaced while they waited for
   * the subscriber's socket (AWP-TRN-009): by design never delivered, not lost.
   */
  replaced(sub: Subscriber, channel_id: number): ReadonlySet<number>;
  remove(): void;
}

export function installTaps(): Taps {
  const hubFrames = new Map<number, SeqTs>();
  const released = new WeakMap<Subscriber, Map<number, SeqTs>>();
  const replaced = new WeakMap<Subscriber, Map<number, Set<number>>>();
  /** The frame each note was offered with (one note per frame, shared by every subscriber). */
  const noted = new WeakMap<FrameNote, { channel_id: number; seq: number }>();
  /** The subscriber whose delivery is running: a replacement happens inside its sink's push. */
  let current: Subscriber | null = null;
  const during = <T>(sub: Subscriber, run: () => T): T => {
    current = sub;
    try {
      return run();
    } finally {
      current = null;
    }
  };
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
    noted.set(note, { channel_id: frame.channel_id, seq: frame.seq });
    const outcome = during(this, () => deliver.call(this, frame, note, start));
    if (outcome === 'forwarded' || outcome === 'overflow-stream' || outcome === 'overflow-control') {
      at(perSub(this), frame.channel_id).push(frame.seq, frame.ts_mono_ns);
    }
    return outcome;
  };
  // eslint-disable-next-line @typescript-eslint/unbound-method -- wrapped below and called with its own `this`
  const replacedMetric = FrameMetrics.prototype.replaced;
  FrameMetrics.prototype.replaced = function (this: FrameMetrics, note, bytes) {
    const f = noted.get(note);
    if (current !== null && f !== undefined) {
      let m = replaced.get(current);
      if (m === undefined) replaced.set(current, (m = new Map<number, Set<number>>()));
      let set = m.get(f.channel_id);
      if (set === undefined) m.set(f.channel_id, (set = new Set()));
      set.add(f.seq);
    }
    replacedMetric.call(this, note, bytes);
  };
  return {
    hub: hubFrames,
    released: (sub, id) => perSub(sub).get(id) ?? new SeqTs(),
    replaced: (sub, id) => replaced.get(sub)?.get(id) ?? new Set(),
    remove: () => {
      hubProto.fanOut = fanOut;
      Subscriber.prototype.deliver = deliver;
      FrameMetrics.prototype.replaced = replacedMetric;
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

/**
 * A reliable channel's losses as one observer received it: the seqs (sorted: inline frames sent before the
 * stream connection took the channel over may arrive after the stream's first ones, two connections
 * interleaving) that follow a gap and did not arrive as resync keyframes (a channel's restart, AWP-DAT-009).
 * Also the seqs that arrived twice.
 */
export function reliableLosses(ch: ChannelReport): { missingBefore: number[]; twice: number[] } {
  const seqs = [...ch.seqs].sort((a, b) => a - b);
  const resync = new Set(ch.resyncSeqs);
  const missingBefore: number[] = [];
  const twice: number[] = [];
  for (let i = 1; i < seqs.length; i++) {
    const s = seqs[i]!;
    if (s === seqs[i - 1]) twice.push(s);
    else if (s !== seqs[i - 1]! + 1 && !resync.has(s)) missingBefore.push(s);
  }
  return { missingBefore, twice };
}
