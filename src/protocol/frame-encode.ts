/**
 * AWP binary frame writers (spec/transport/frames; AWP-DAT-005/006/009): the encoder and the flag rewrite for
 * re-emitted keyframes. The layout, the validation and the reader are in `frame.ts`.
 */
import {
  assertValidFrame,
  createFrameHeader,
  EXT_TICK,
  EXT_TS_SEND_NS,
  EXT_TS_SIM_NS,
  FLAG_HAS_EXTENSIONS,
  FLAG_KEYFRAME,
  FLAG_RESYNC,
  FLAGS_SEMANTIC,
  FRAME_HEADER_BYTES,
  FRAME_VERSION,
  FrameError,
  peekFrame,
  REGISTERED_EXT_LEN,
  type Frame,
} from './frame.js';

const TWO_POW_32 = 0x100000000;

const scratchHeader = createFrameHeader();

/** Writes a value with |v| <= 2^53-1 as a little-endian 64-bit two's-complement integer. */
function writeI64(out: Buffer, v: number, o: number): void {
  const hi = Math.floor(v / TWO_POW_32);
  out.writeUInt32LE(v - hi * TWO_POW_32, o);
  out.writeInt32LE(hi, o + 4);
}

/**
 * Encodes a frame. Sets bit 2 iff an extension block exists, zeroes bits 4-7 (AWP-DAT-005/006), writes registered
 * extensions first (tick, ts_sim_ns, ts_send_ns) then vendor TLVs in order. Throws FrameError for anything
 * `assertValidFrame` refuses. (The largest possible block, 3 registered + 128 vendor entries, is < 65536 bytes.)
 */
export function encodeFrame(frame: Frame): Buffer {
  assertValidFrame(frame);
  let extLen = 0;
  if (frame.tick !== undefined) extLen += 2 + REGISTERED_EXT_LEN;
  if (frame.ts_sim_ns !== undefined) extLen += 2 + REGISTERED_EXT_LEN;
  if (frame.ts_send_ns !== undefined) extLen += 2 + REGISTERED_EXT_LEN;
  for (const v of frame.vendor) extLen += 2 + v.value.length;
  const hasExt = extLen > 0;
  const payload = frame.payload;
  const payloadOffset = FRAME_HEADER_BYTES + (hasExt ? 2 + extLen : 0);
  const out = Buffer.allocUnsafe(payloadOffset + payload.length);
  out[0] = 0x41;
  out[1] = 0x57;
  out[2] = 0x50;
  out[3] = 0x46;
  out[4] = FRAME_VERSION;
  out[5] = (frame.flags & FLAGS_SEMANTIC) | (hasExt ? FLAG_HAS_EXTENSIONS : 0);
  out.writeUInt16LE(frame.channel_id, 6);
  writeI64(out, frame.seq, 8);
  writeI64(out, frame.ts_mono_ns, 16);
  out.writeUInt32LE(payload.length, 24);
  if (hasExt) {
    out.writeUInt16LE(extLen, FRAME_HEADER_BYTES);
    let p = FRAME_HEADER_BYTES + 2;
    const registered = (type: number, v: number | undefined): void => {
      if (v === undefined) return;
      out[p] = type;
      out[p + 1] = REGISTERED_EXT_LEN;
      writeI64(out, v, p + 2);
      p += 2 + REGISTERED_EXT_LEN;
    };
    registered(EXT_TICK, frame.tick);
    registered(EXT_TS_SIM_NS, frame.ts_sim_ns);
    registered(EXT_TS_SEND_NS, frame.ts_send_ns);
    for (const v of frame.vendor) {
      out[p] = v.type;
      out[p + 1] = v.value.length;
      out.set(v.value, p + 2);
      p += 2 + v.value.length;
    }
  }
  out.set(payload, payloadOffset);
  return out;
}

/**
 * A copy of a valid frame with flag bits `set` (keyframe / end-of-burst / resync only) OR-ed in and reserved bits
 * 4-7 zeroed, e.g. to re-emit a cached keyframe with resync (AWP-DAT-009). Throws FrameError if the input is not a
 * valid frame, `set` holds other bits, or the result would carry resync without keyframe.
 */
export function withFlags(buf: Uint8Array, set: number): Buffer {
  if (!Number.isInteger(set) || (set & ~FLAGS_SEMANTIC) !== 0 || set < 0) {
    throw new FrameError('AWP_MALFORMED', 'withFlags may set only keyframe, end-of-burst and resync bits');
  }
  const h = peekFrame(buf, scratchHeader);
  const flags = h.flags | set;
  if ((flags & (FLAG_RESYNC | FLAG_KEYFRAME)) === FLAG_RESYNC) {
    throw new FrameError('AWP_MALFORMED', 'a resync frame must be a keyframe (AWP-DAT-009)');
  }
  const out = Buffer.from(buf);
  out[5] = flags;
  return out;
}
