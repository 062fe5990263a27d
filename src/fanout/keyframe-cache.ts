/**
 * The latest keyframe of each channel and the frames after it, so a late joiner or a resumed
 * observer starts on current state: the keyframe with `resync`, then the deltas since
 * (AWP-OBS-004/005, AWP-DAT-009). Only what follows the newest keyframe is kept: never a history.
 */
import { decodeFrame, FLAG_KEYFRAME, FLAG_RESYNC } from '../protocol/frame.js';
import { withFlags } from '../protocol/frame-encode.js';
import { frameToInline } from '../protocol/inline-frame.js';

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
  /** This keyframe with the `resync` flag, copied once, shared by every subscriber restarting on it. */
  resynced?: HubFrame;
}

/** The keyframe as a resync keyframe (AWP-DAT-009): itself if flagged already, else one shared copy. */
export function asResync(frame: HubFrame): HubFrame {
  if ((frame.flags & FLAG_RESYNC) !== 0) return frame;
  frame.resynced ??= {
    buf: withFlags(frame.buf, FLAG_RESYNC | FLAG_KEYFRAME),
    channel_id: frame.channel_id,
    seq: frame.seq,
    ts_mono_ns: frame.ts_mono_ns,
    ts_send_ns: frame.ts_send_ns,
    flags: frame.flags | FLAG_RESYNC,
  };
  return frame.resynced;
}

/** The frame with `offset` added to its seq: a copy of its own (one observer's numbering). */
export function renumbered(frame: HubFrame, offset: number): HubFrame {
  const buf = Buffer.from(frame.buf);
  const seq = frame.seq + offset;
  buf.writeBigUInt64LE(BigInt(seq), 8);
  const { channel_id, ts_mono_ns, ts_send_ns, flags } = frame;
  return { buf, channel_id, seq, ts_mono_ns, ts_send_ns, flags };
}

/** The frame's `obs.frame` text, encoded once on first use and shared. */
export function inlineText(frame: HubFrame): Buffer {
  frame.inline ??= Buffer.from(
    JSON.stringify({ jsonrpc: '2.0', method: 'obs.frame', params: frameToInline(decodeFrame(frame.buf)) }),
  );
  return frame.inline;
}

/** Deltas kept after a keyframe at most; a channel without keyframes that often is served live only. */
const MAX_DELTAS = 256;
/** Bytes kept for one channel at most (its keyframe and deltas). */
const MAX_CHANNEL_BYTES = 32 * 1024 * 1024;
/**
 * Bytes kept for all of a hub's channels at most: a world declaring or sending many channels cannot make
 * the edge hold 32 MiB for each (channel ids go to 65,535). A channel that would pass it is served live.
 */
export const MAX_CACHE_BYTES = 128 * 1024 * 1024;

interface Entry {
  keyframe: HubFrame;
  deltas: HubFrame[];
  bytes: number;
}

export class KeyframeCache {
  /** null: the channel waits for its next keyframe. */
  private readonly channels = new Map<number, Entry | null>();
  private total = 0;

  constructor(private readonly maxBytes = MAX_CACHE_BYTES) {}

  /** Bytes held, all channels. */
  get bytes(): number {
    return this.total;
  }

  add(frame: HubFrame): void {
    const id = frame.channel_id;
    const len = frame.buf.length;
    if ((frame.flags & FLAG_KEYFRAME) !== 0) {
      this.forget(id);
      if (this.total + len > this.maxBytes || len > MAX_CHANNEL_BYTES) {
        this.channels.set(id, null); // no room: served live until a keyframe fits
        return;
      }
      this.channels.set(id, { keyframe: frame, deltas: [], bytes: len });
      this.total += len;
      return;
    }
    const entry = this.channels.get(id);
    if (entry === undefined || entry === null) return;
    if (
      entry.deltas.length >= MAX_DELTAS ||
      entry.bytes + len > MAX_CHANNEL_BYTES ||
      this.total + len > this.maxBytes
    ) {
      this.forget(id);
      this.channels.set(id, null); // too long since the keyframe: wait for the next one
      return;
    }
    entry.deltas.push(frame);
    entry.bytes += len;
    this.total += len;
  }

  /**
   * What a subscriber starting now receives first: the newest keyframe (the subscriber sends it as a
   * resync keyframe, see `asResync`), then the deltas after it, all shared. Empty until a keyframe arrived.
   */
  startFor(channel_id: number): HubFrame[] {
    const entry = this.channels.get(channel_id);
    if (entry === undefined || entry === null) return [];
    return [entry.keyframe, ...entry.deltas];
  }

  forget(channel_id: number): void {
    this.total -= this.channels.get(channel_id)?.bytes ?? 0;
    this.channels.delete(channel_id);
  }

  /** Forgets every channel but those `keep` says. */
  retain(keep: (channel_id: number) => boolean): void {
    for (const id of [...this.channels.keys()]) if (!keep(id)) this.forget(id);
  }

  clear(): void {
    this.channels.clear();
    this.total = 0;
  }
}
