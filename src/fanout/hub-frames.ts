/**
 * Frames as a hub takes them from its world (sans-IO): a binary frame from the stream connection is
 * checked by a header peek and forwarded as the buffer it arrived in; an inline `obs.frame` is encoded
 * once into the binary form (and its text kept once for inline subscribers). Malformed frames are
 * never forwarded (AWP-DAT-010).
 */
import { FrameError, peekFrame, type FrameHeader } from '../protocol/frame.js';
import { encodeFrame } from '../protocol/frame-encode.js';
import { inlineToFrame } from '../protocol/inline-frame.js';
import type { HubFrame } from './keyframe-cache.js';

/** A binary frame, or null if malformed; `header` (reused, no allocation) holds its peeked header. */
export function binaryHubFrame(buf: Buffer, header: FrameHeader): HubFrame | null {
  try {
    peekFrame(buf, header);
  } catch (err) {
    if (!(err instanceof FrameError)) throw err;
    return null;
  }
  buf[5] = buf[5]! & 0x0f; // senders zero reserved flag bits (AWP-DAT-005)
  return {
    buf,
    channel_id: header.channel_id,
    seq: header.seq,
    ts_mono_ns: header.ts_mono_ns,
    ts_send_ns: header.has_ts_send_ns ? header.ts_send_ns : undefined,
    flags: header.flags,
  };
}

/** An inline `obs.frame`'s params as a frame, or null if malformed. */
export function inlineHubFrame(params: Record<string, unknown>): HubFrame | null {
  let frame;
  try {
    frame = inlineToFrame(params);
  } catch (err) {
    if (!(err instanceof FrameError)) throw err;
    return null;
  }
  return {
    buf: encodeFrame(frame),
    channel_id: frame.channel_id,
    seq: frame.seq,
    ts_mono_ns: frame.ts_mono_ns,
    ts_send_ns: frame.ts_send_ns,
    flags: frame.flags,
    inline: Buffer.from(JSON.stringify({ jsonrpc: '2.0', method: 'obs.frame', params })),
  };
}
