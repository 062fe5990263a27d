/**
 * AWP binary frame codec (spec/transport/frames; AWP-DAT-005..010, AWP-CTL-009, AWP-CLK-003).
 *
 * Layout (little-endian): magic "AWPF" | version u8 = 1 | flags u8 | channel_id u16 | seq u64 | ts_mono_ns u64 |
 * payload_len u32 | [ext_len u16 | TLV entries (type u8, len u8, value)] iff flags bit 2 | payload.
 *
 * `peekFrame` is the hot path (every forwarded frame): it validates everything AWP-DAT-010 calls malformed and
 * the 2^53-1 bound of AWP-CTL-009 without touching the payload and, given an `out` header, without allocating
 * (bytes are read with index arithmetic, u64 as two u32 halves; no BigInt, no DataView). `decodeFrame` runs the
 * same validation, then materialises a `Frame` whose payload is a view of the input.
 *
 * Error precedence (so every caller reports the same code for the same bytes): all AWP_MALFORMED checks come
 * before any AWP_INTEGER_RANGE check; a frame that cannot be parsed has no meaningful integer values.
 */

export const FRAME_HEADER_BYTES = 28;
export const FRAME_VERSION = 1;

export const FLAG_KEYFRAME = 0x01;
export const FLAG_END_OF_BURST = 0x02;
export const FLAG_HAS_EXTENSIONS = 0x04;
export const FLAG_RESYNC = 0x08;
/** Bits 0-3: every bit this revision defines; bits 4-7 are reserved (AWP-DAT-005). */
export const FLAGS_DEFINED = 0x0f;
/** Bits a `Frame` carries: keyframe, end-of-burst, resync. Bit 2 belongs to the binary encoding only. */
export const FLAGS_SEMANTIC = FLAG_KEYFRAME | FLAG_END_OF_BURST | FLAG_RESYNC;

export const EXT_TICK = 0x01;
export const EXT_TS_SIM_NS = 0x02;
export const EXT_TS_SEND_NS = 0x03;
/** Vendor TLV types are 0x80-0xFF; 0x00 and 0x04-0x7F are reserved (AWP-DAT-006). */
export const EXT_VENDOR_MIN = 0x80;

/** 2^53 - 1: the bound on every 64-bit field, JSON and binary (AWP-CTL-009). */
const MAX_U53 = Number.MAX_SAFE_INTEGER;

const TWO_POW_32 = 0x100000000;
/** Largest high u32 half of a u64 that is still <= 2^53 - 1. */
const MAX_HI = 0x1fffff;
/** The value length of every registered extension (tick, ts_sim_ns, ts_send_ns). */
export const REGISTERED_EXT_LEN = 8;

export type FrameErrorCode = 'AWP_MALFORMED' | 'AWP_INTEGER_RANGE';

export class FrameError extends Error {
  readonly code: FrameErrorCode;
  constructor(code: FrameErrorCode, message: string) {
    super(message);
    this.name = 'FrameError';
    this.code = code;
  }
}

function malformed(message: string): FrameError {
  return new FrameError('AWP_MALFORMED', `${message} (AWP-DAT-010)`);
}

function outOfRange(field: string, detail: string): FrameError {
  return new FrameError('AWP_INTEGER_RANGE', `${field} ${detail} (AWP-CTL-009)`);
}

/**
 * The header facts a forwarder needs. Registered extension values are included (0 when absent; check the
 * `has_*` flag) so latency metrics and lockstep routing need no second parse.
 */
export interface FrameHeader {
  channel_id: number;
  seq: number;
  ts_mono_ns: number;
  /** Flag bits 0-3 as received (bit 2 included); reserved bits 4-7 are masked off (AWP-DAT-005). */
  flags: number;
  /** Bytes of TLV entries; 0 when there is no extension block. */
  ext_len: number;
  payload_offset: number;
  payload_len: number;
  /** Total frame length; equals the input length for a valid frame. */
  byte_length: number;
  has_tick: boolean;
  tick: number;
  has_ts_sim_ns: boolean;
  ts_sim_ns: number;
  has_ts_send_ns: boolean;
  ts_send_ns: number;
  /** Number of vendor TLVs (types 0x80-0xFF). */
  vendor_count: number;
}

/** A reusable header for `peekFrame(buf, out)`; one object shape for every header keeps the hot path monomorphic. */
export function createFrameHeader(): FrameHeader {
  return {
    channel_id: 0,
    seq: 0,
    ts_mono_ns: 0,
    flags: 0,
    ext_len: 0,
    payload_offset: 0,
    payload_len: 0,
    byte_length: 0,
    has_tick: false,
    tick: 0,
    has_ts_sim_ns: false,
    ts_sim_ns: 0,
    has_ts_send_ns: false,
    ts_send_ns: 0,
    vendor_count: 0,
  };
}

function u32At(buf: Uint8Array, o: number): number {
  return (buf[o]! | (buf[o + 1]! << 8) | (buf[o + 2]! << 16) | (buf[o + 3]! << 24)) >>> 0;
}

// 64-bit reads hand their result over through a typed array rather than a return value: if V8 declines to
// inline a helper (its inlining budget is per function), a returned non-small number is boxed on the heap,
// while a Float64Array slot is written unboxed either way. The helpers return false when out of range.
const u64Result = new Float64Array(1);

function readU53(buf: Uint8Array, o: number): boolean {
  const hi = u32At(buf, o + 4);
  if (hi > MAX_HI) return false;
  u64Result[0] = hi * TWO_POW_32 + u32At(buf, o);
  return true;
}

function readI53(buf: Uint8Array, o: number): boolean {
  const lo = u32At(buf, o);
  const hi = buf[o + 4]! | (buf[o + 5]! << 8) | (buf[o + 6]! << 16) | (buf[o + 7]! << 24);
  // |v| <= 2^53-1: hi in [-2^21, 2^21-1], except -2^53 itself (hi = -2^21, lo = 0).
  if (hi > MAX_HI || hi < -MAX_HI - 1 || (hi === -MAX_HI - 1 && lo === 0)) return false;
  u64Result[0] = hi * TWO_POW_32 + lo;
  return true;
}

// Duplicate-type detection without per-call allocation: a type was seen in this frame iff its stamp equals the
// current generation. The generation stays a small integer so the module slot never boxes a heap number.
const seenStamp = new Int32Array(256);
let stampGeneration = 0;

function nextGeneration(): number {
  if (stampGeneration === 0x3fffffff) {
    seenStamp.fill(0);
    stampGeneration = 0;
  }
  stampGeneration += 1;
  return stampGeneration;
}

/**
 * Validates a frame from its header and extension block and fills `out` (whose contents are unspecified after a
 * throw). Never reads the payload; allocates nothing once optimised when `out` is given. Throws FrameError:
 * AWP_MALFORMED for every AWP-DAT-010 case, AWP_INTEGER_RANGE for seq / ts_mono_ns / tick / ts_send_ns above
 * 2^53-1 or |ts_sim_ns| above 2^53-1.
 */
export function peekFrame(buf: Uint8Array, out: FrameHeader = createFrameHeader()): FrameHeader {
  const n = buf.length;
  if (n < FRAME_HEADER_BYTES) throw malformed(`frame is ${n} bytes, shorter than the 28-byte header`);
  if (buf[0] !== 0x41 || buf[1] !== 0x57 || buf[2] !== 0x50 || buf[3] !== 0x46) {
    throw malformed('bad magic (expected "AWPF")');
  }
  if (buf[4] !== FRAME_VERSION) throw malformed(`version ${buf[4]!} is not 1`);
  const flags = buf[5]! & FLAGS_DEFINED;
  if ((flags & (FLAG_RESYNC | FLAG_KEYFRAME)) === FLAG_RESYNC)
    throw malformed('resync flag without keyframe');

  let payloadOffset = FRAME_HEADER_BYTES;
  let extLen = 0;
  let tickAt = -1;
  let simAt = -1;
  let sendAt = -1;
  let vendorCount = 0;
  if ((flags & FLAG_HAS_EXTENSIONS) !== 0) {
    if (n < FRAME_HEADER_BYTES + 2) throw malformed('has_extensions set but the frame ends before ext_len');
    extLen = buf[28]! | (buf[29]! << 8);
    const end = FRAME_HEADER_BYTES + 2 + extLen;
    if (end > n) throw malformed(`ext_len ${extLen} runs past the end of the frame`);
    const gen = nextGeneration();
    let p = FRAME_HEADER_BYTES + 2;
    while (p < end) {
      if (p + 2 > end)
        throw malformed('ext_len is inconsistent with its entries: it ends inside a TLV header');
      const type = buf[p]!;
      const len = buf[p + 1]!;
      const value = p + 2;
      if (value + len > end)
        throw malformed(`ext_len is inconsistent with its entries: TLV 0x${hex2(type)} overruns it`);
      if (seenStamp[type] === gen) throw malformed(`extension type 0x${hex2(type)} appears twice`);
      seenStamp[type] = gen;
      if (type >= EXT_TICK && type <= EXT_TS_SEND_NS) {
        if (len !== REGISTERED_EXT_LEN)
          throw malformed(`registered extension 0x${hex2(type)} has len ${len}, not 8`);
        if (type === EXT_TICK) tickAt = value;
        else if (type === EXT_TS_SIM_NS) simAt = value;
        else sendAt = value;
      } else if (type >= EXT_VENDOR_MIN) {
        vendorCount += 1;
      } // 0x00 and 0x04-0x7F: reserved, skipped by len (AWP-DAT-006).
      p = value + len;
    }
    payloadOffset = end;
  }
  const payloadLen = u32At(buf, 24);
  const total = payloadOffset + payloadLen;
  if (total !== n) throw malformed(`frame is ${n} bytes but its header and extension block give ${total}`);

  // Range checks last (see the precedence note at the top).
  if (!readU53(buf, 8)) throw outOfRange('seq', 'exceeds 2^53-1');
  out.seq = u64Result[0]!;
  if (!readU53(buf, 16)) throw outOfRange('ts_mono_ns', 'exceeds 2^53-1');
  out.ts_mono_ns = u64Result[0]!;
  out.has_tick = tickAt >= 0;
  if (tickAt < 0) out.tick = 0;
  else if (readU53(buf, tickAt)) out.tick = u64Result[0]!;
  else throw outOfRange('tick', 'exceeds 2^53-1');
  out.has_ts_sim_ns = simAt >= 0;
  if (simAt < 0) out.ts_sim_ns = 0;
  else if (readI53(buf, simAt)) out.ts_sim_ns = u64Result[0]!;
  else throw outOfRange('ts_sim_ns', 'magnitude exceeds 2^53-1');
  out.has_ts_send_ns = sendAt >= 0;
  if (sendAt < 0) out.ts_send_ns = 0;
  else if (readU53(buf, sendAt)) out.ts_send_ns = u64Result[0]!;
  else throw outOfRange('ts_send_ns', 'exceeds 2^53-1');
  out.channel_id = buf[6]! | (buf[7]! << 8);
  out.flags = flags;
  out.ext_len = extLen;
  out.payload_offset = payloadOffset;
  out.payload_len = payloadLen;
  out.byte_length = total;
  out.vendor_count = vendorCount;
  return out;
}

function hex2(v: number): string {
  return v.toString(16).padStart(2, '0');
}

export interface VendorExtension {
  /** 0x80-0xFF. */
  type: number;
  /** 0..255 bytes. */
  value: Uint8Array;
}

export interface Frame {
  channel_id: number;
  seq: number;
  ts_mono_ns: number;
  /** Bits 0 (keyframe), 1 (end-of-burst) and 3 (resync) only. */
  flags: number;
  tick?: number;
  ts_sim_ns?: number;
  ts_send_ns?: number;
  /** Vendor TLVs in wire order. */
  vendor: VendorExtension[];
  /** Exactly the modality encoding (AWP-DAT-007); a view of the decoded input, not a copy. */
  payload: Uint8Array;
}

const scratchHeader = createFrameHeader();

/** A plain Uint8Array view (also for Buffer inputs, so decoded frames compare equal whatever the input type). */
function view(buf: Uint8Array, offset: number, length: number): Uint8Array {
  return new Uint8Array(buf.buffer, buf.byteOffset + offset, length);
}

/**
 * Full decode. Throws FrameError as `peekFrame`. Reserved and unknown extension types are skipped (AWP-DAT-006);
 * decoded `flags` keep bits 0, 1, 3 (bit 2 is implied by the extension fields, bits 4-7 are ignored, AWP-DAT-005).
 */
export function decodeFrame(buf: Uint8Array): Frame {
  const h = peekFrame(buf, scratchHeader);
  const frame: Frame = {
    channel_id: h.channel_id,
    seq: h.seq,
    ts_mono_ns: h.ts_mono_ns,
    flags: h.flags & FLAGS_SEMANTIC,
    vendor: [],
    payload: view(buf, h.payload_offset, h.payload_len),
  };
  if (h.has_tick) frame.tick = h.tick;
  if (h.has_ts_sim_ns) frame.ts_sim_ns = h.ts_sim_ns;
  if (h.has_ts_send_ns) frame.ts_send_ns = h.ts_send_ns;
  if (h.vendor_count > 0) {
    const end = FRAME_HEADER_BYTES + 2 + h.ext_len;
    for (let p = FRAME_HEADER_BYTES + 2; p < end; p += 2 + buf[p + 1]!) {
      const type = buf[p]!;
      if (type >= EXT_VENDOR_MIN) frame.vendor.push({ type, value: view(buf, p + 2, buf[p + 1]!) });
    }
  }
  return frame;
}

/** Unsigned 64-bit field rule (AWP-CTL-009): a non-integer or negative value is malformed, > 2^53-1 is out of range. */
export function assertU53(value: unknown, field: string): number {
  if (value === Infinity) throw outOfRange(field, 'exceeds 2^53-1');
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new FrameError('AWP_MALFORMED', `${field} must be a non-negative integer (AWP-CTL-009)`);
  }
  if (value > MAX_U53) throw outOfRange(field, 'exceeds 2^53-1');
  return value;
}

/** Signed 64-bit field rule (ts_sim_ns): an integer with |v| <= 2^53-1. */
export function assertI53(value: unknown, field: string): number {
  if (value === Infinity || value === -Infinity) throw outOfRange(field, 'magnitude exceeds 2^53-1');
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new FrameError('AWP_MALFORMED', `${field} must be an integer (AWP-CTL-009)`);
  }
  if (Math.abs(value) > MAX_U53) throw outOfRange(field, 'magnitude exceeds 2^53-1');
  return value;
}

/**
 * Checks what a sender must guarantee before emitting a frame in either binding: channel_id 1..65535, integer
 * bounds, flags an integer 0..255 without resync-but-no-keyframe (AWP-DAT-009), vendor types 0x80-0xFF with values
 * of at most 255 bytes and no duplicates (AWP-DAT-006). Throws FrameError.
 */
export function assertValidFrame(frame: Frame): void {
  const ch = frame.channel_id;
  if (!Number.isInteger(ch) || ch < 1 || ch > 0xffff) {
    throw new FrameError('AWP_MALFORMED', `channel_id ${String(ch)} is not in 1..65535 (AWP-TRN-005)`);
  }
  assertU53(frame.seq, 'seq');
  assertU53(frame.ts_mono_ns, 'ts_mono_ns');
  const flags = frame.flags;
  if (!Number.isInteger(flags) || flags < 0 || flags > 0xff) {
    throw new FrameError('AWP_MALFORMED', `flags ${String(flags)} is not an integer 0..255`);
  }
  if ((flags & (FLAG_RESYNC | FLAG_KEYFRAME)) === FLAG_RESYNC) {
    throw new FrameError('AWP_MALFORMED', 'a resync frame must be a keyframe (AWP-DAT-009)');
  }
  if (frame.tick !== undefined) assertU53(frame.tick, 'tick');
  if (frame.ts_sim_ns !== undefined) assertI53(frame.ts_sim_ns, 'ts_sim_ns');
  if (frame.ts_send_ns !== undefined) assertU53(frame.ts_send_ns, 'ts_send_ns');
  if (!(frame.payload instanceof Uint8Array)) throw new FrameError('AWP_MALFORMED', 'payload is not bytes');
  if (frame.payload.length > 0xffffffff)
    throw new FrameError('AWP_MALFORMED', 'payload exceeds 2^32-1 bytes');
  const gen = nextGeneration();
  for (const v of frame.vendor) {
    const t = v.type;
    if (!Number.isInteger(t) || t < EXT_VENDOR_MIN || t > 0xff) {
      throw new FrameError(
        'AWP_MALFORMED',
        `vendor extension type ${String(t)} is outside 0x80-0xFF (AWP-DAT-006)`,
      );
    }
    if (!(v.value instanceof Uint8Array) || v.value.length > 0xff) {
      throw new FrameError('AWP_MALFORMED', `vendor extension 0x${hex2(t)} value must be 0..255 bytes`);
    }
    if (seenStamp[t] === gen) {
      throw new FrameError('AWP_MALFORMED', `vendor extension 0x${hex2(t)} appears twice (AWP-DAT-006)`);
    }
    seenStamp[t] = gen;
  }
}
