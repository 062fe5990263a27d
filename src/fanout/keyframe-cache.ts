/**
 * The latest keyframe of each channel and the frames after it, so a late joiner or a resumed
 * observer starts on current state: the keyframe with `resync`, then the deltas since
 * (AWP-OBS-004/005, AWP-DAT-009). Only what follows the newest keyframe is kept: never a history.
 */
import { FLAG_KEYFRAME, FLAG_RESYNC, withFlags } from '../protocol/frame.js';

/** One frame as the hub holds it: its bytes, and the header fields fan-out needs. */
export interface HubFrame {
  readonly buf: Buffer;
  readonly channel_id: number;
  readonly seq: number;
  readonly ts_mono_ns: number;
  readonly ts_send_ns: number | undefined;
  readonly flags: number;
  /** The `obs.frame` text of this frame, encoded once, shared by every inline subscriber. */
  inline?: Buffer;
}

/** Deltas kept after a keyframe at most; a channel without keyframes that often is served live only. */
const MAX_DELTAS = 256;
const MAX_BYTES = 32 * 1024 * 1024;

export class KeyframeCache {
  private readonly channels = new Map<number, { keyframe: HubFrame; deltas: HubFrame[]; bytes: number } | null>();

  add(frame: HubFrame): void {
    if ((frame.flags & FLAG_KEYFRAME) !== 0) {
      this.channels.set(frame.channel_id, { keyframe: frame, deltas: [], bytes: frame.buf.length });
      return;
    }
    const entry = this.channels.get(frame.channel_id);
    if (entry === undefined || entry === null) return;
    if (entry.deltas.length >= MAX_DELTAS || entry.bytes + frame.buf.length > MAX_BYTES) {
      this.channels.set(frame.channel_id, null); // too long since the keyframe: wait for the next one
      return;
    }
    entry.deltas.push(frame);
    entry.bytes += frame.buf.length;
  }

  /**
   * What a subscriber starting now receives first: the keyframe carrying `resync` (a copy: the only
   * frame that gets its own header), then the deltas after it, shared. Empty until a keyframe arrived.
   */
  startFor(channel_id: number): HubFrame[] {
    const entry = this.channels.get(channel_id);
    if (entry === undefined || entry === null) return [];
    const k = entry.keyframe;
    const resync: HubFrame = { ...k, buf: withFlags(k.buf, FLAG_RESYNC | FLAG_KEYFRAME), flags: k.flags | FLAG_RESYNC };
    delete resync.inline;
    return [resync, ...entry.deltas];
  }

  forget(channel_id: number): void {
    this.channels.delete(channel_id);
  }

  clear(): void {
    this.channels.clear();
  }
}
