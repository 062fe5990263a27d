import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  EXT_TICK,
  EXT_TS_SEND_NS,
  EXT_TS_SIM_NS,
  FLAG_END_OF_BURST,
  FLAG_HAS_EXTENSIONS,
  FLAG_KEYFRAME,
  FLAG_RESYNC,
  FRAME_HEADER_BYTES,
  FrameError,
  createFrameHeader,
  decodeFrame,
  peekFrame,
} from '../../src/protocol/frame.js';
import { encodeFrame, withFlags } from '../../src/protocol/frame-encode.js';
import type { Frame, FrameErrorCode } from '../../src/protocol/frame.js';

interface Vector {
  name: string;
  description: string;
  hex: string;
  expect?: Record<string, unknown>;
  expect_error?: FrameErrorCode;
}

const vectors = (
  JSON.parse(
    readFileSync(
      new URL('../../src/protocol/spec/schemas/test-vectors/frames.json', import.meta.url),
      'utf8',
    ),
  ) as { vectors: Vector[] }
).vectors;

const fromHex = (hex: string): Buffer => Buffer.from(hex, 'hex');
const toHex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');

/** Outcome of a decoder on some bytes: the error code, or the facts both decoders expose. */
type Outcome = { error: FrameErrorCode } | { fields: Record<string, unknown> };

function catchCode(fn: () => void): FrameErrorCode {
  try {
    fn();
  } catch (e) {
    if (e instanceof FrameError) return e.code;
    throw e;
  }
  throw new Error('expected a FrameError');
}

/**
 * Independent reference decoder for differential testing: DataView + BigInt + Set, written straight from the
 * spec text (spec/transport/frames) with the module's documented precedence (malformed before range).
 */
function referenceDecode(bytes: Uint8Array): Outcome {
  const MAX = 2n ** 53n - 1n;
  if (bytes.length < 28) return { error: 'AWP_MALFORMED' };
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (dv.getUint32(0, false) !== 0x41575046) return { error: 'AWP_MALFORMED' };
  if (dv.getUint8(4) !== 1) return { error: 'AWP_MALFORMED' };
  const flags = dv.getUint8(5) & 0x0f;
  if (flags & 0x08 && !(flags & 0x01)) return { error: 'AWP_MALFORMED' };
  let offset = 28;
  const registered = new Map<number, bigint>();
  const vendor: { type: number; value: string }[] = [];
  if (flags & 0x04) {
    if (bytes.length < 30) return { error: 'AWP_MALFORMED' };
    const extLen = dv.getUint16(28, true);
    const end = 30 + extLen;
    if (end > bytes.length) return { error: 'AWP_MALFORMED' };
    const seen = new Set<number>();
    let p = 30;
    while (p < end) {
      if (end - p < 2) return { error: 'AWP_MALFORMED' };
      const type = dv.getUint8(p);
      const len = dv.getUint8(p + 1);
      if (p + 2 + len > end) return { error: 'AWP_MALFORMED' };
      if (seen.has(type)) return { error: 'AWP_MALFORMED' };
      seen.add(type);
      if (type >= 1 && type <= 3) {
        if (len !== 8) return { error: 'AWP_MALFORMED' };
        registered.set(type, type === 2 ? dv.getBigInt64(p + 2, true) : dv.getBigUint64(p + 2, true));
      } else if (type >= 0x80) {
        vendor.push({ type, value: toHex(bytes.subarray(p + 2, p + 2 + len)) });
      }
      p += 2 + len;
    }
    offset = end;
  }
  const payloadLen = dv.getUint32(24, true);
  if (offset + payloadLen !== bytes.length) return { error: 'AWP_MALFORMED' };
  const seq = dv.getBigUint64(8, true);
  const ts = dv.getBigUint64(16, true);
  for (const v of [seq, ts, ...registered.values()]) {
    if (v > MAX || v < -MAX) return { error: 'AWP_INTEGER_RANGE' };
  }
  const fields: Record<string, unknown> = {
    channel_id: dv.getUint16(6, true),
    seq: Number(seq),
    ts_mono_ns: Number(ts),
    flags: flags & 0x0b,
    vendor,
    payload: toHex(bytes.subarray(offset)),
  };
  const names: Record<number, string> = { 1: 'tick', 2: 'ts_sim_ns', 3: 'ts_send_ns' };
  for (const [t, v] of registered) fields[names[t]!] = Number(v);
  return { fields };
}

function decodeOutcome(bytes: Uint8Array): Outcome {
  let f: Frame;
  try {
    f = decodeFrame(bytes);
  } catch (e) {
    if (e instanceof FrameError) return { error: e.code };
    throw e;
  }
  const fields: Record<string, unknown> = {
    channel_id: f.channel_id,
    seq: f.seq,
    ts_mono_ns: f.ts_mono_ns,
    flags: f.flags,
    vendor: f.vendor.map((v) => ({ type: v.type, value: toHex(v.value) })),
    payload: toHex(f.payload),
  };
  if (f.tick !== undefined) fields.tick = f.tick;
  if (f.ts_sim_ns !== undefined) fields.ts_sim_ns = f.ts_sim_ns;
  if (f.ts_send_ns !== undefined) fields.ts_send_ns = f.ts_send_ns;
  return { fields };
}

const reusedHeader = createFrameHeader();

/** Peek and decode must agree on validity, error code and every header fact; returns the decode outcome. */
function checkAgreement(bytes: Uint8Array): Outcome {
  const decoded = decodeOutcome(bytes);
  expect(decoded).toEqual(referenceDecode(bytes));
  let h;
  try {
    h = peekFrame(bytes, reusedHeader);
  } catch (e) {
    if (!(e instanceof FrameError)) throw e;
    expect(decoded).toEqual({ error: e.code });
    return decoded;
  }
  if (!('fields' in decoded)) throw new Error(`peek accepted bytes decode rejected: ${toHex(bytes)}`);
  const d = decoded.fields;
  expect(h.channel_id).toBe(d.channel_id);
  expect(h.seq).toBe(d.seq);
  expect(h.ts_mono_ns).toBe(d.ts_mono_ns);
  expect(h.flags & 0x0b).toBe(d.flags);
  expect(h.flags & FLAG_HAS_EXTENSIONS).toBe(bytes[5]! & FLAG_HAS_EXTENSIONS);
  expect(h.byte_length).toBe(bytes.length);
  expect(h.payload_offset + h.payload_len).toBe(bytes.length);
  expect(toHex(bytes.subarray(h.payload_offset))).toBe(d.payload);
  expect(h.has_tick ? h.tick : undefined).toBe(d.tick);
  expect(h.has_ts_sim_ns ? h.ts_sim_ns : undefined).toBe(d.ts_sim_ns);
  expect(h.has_ts_send_ns ? h.ts_send_ns : undefined).toBe(d.ts_send_ns);
  expect(h.vendor_count).toBe((d.vendor as unknown[]).length);
  return decoded;
}

/** Requirement each vector exercises (test names follow the requirement IDs). */
const VECTOR_REQ: Record<string, string> = {
  reserved_bits_set: 'AWP-DAT-005',
  unknown_extension: 'AWP-DAT-006',
  tick_and_ts_sim: 'AWP-CLK-003',
  negative_ts_sim: 'AWP-CLK-003',
  resync_keyframe: 'AWP-DAT-009',
  max_seq_safe: 'AWP-CTL-009',
  seq_over_2p53: 'AWP-CTL-009',
};

describe('frames.json test vectors', () => {
  it('AWP-DAT-008 has the 20 vectors the brief lists', () => {
    expect(vectors).toHaveLength(20);
    expect(vectors.filter((v) => v.expect_error !== undefined)).toHaveLength(10);
  });

  for (const v of vectors.filter((x) => x.expect !== undefined)) {
    const req = VECTOR_REQ[v.name] ?? 'AWP-DAT-008';
    it(`${req} decodes vector ${v.name} to its listed fields (decodeFrame and peekFrame)`, () => {
      const exp = v.expect!;
      const bytes = fromHex(v.hex);
      const f = decodeFrame(bytes);
      const h = peekFrame(bytes, createFrameHeader());
      for (const [key, value] of Object.entries(exp)) {
        switch (key) {
          case 'flags':
            // Vector flags are bits 0-3 as sent; decoded Frame flags drop bit 2 (implied by the ext fields).
            expect(h.flags).toBe(value);
            expect(f.flags).toBe((value as number) & ~FLAG_HAS_EXTENSIONS);
            break;
          case 'keyframe':
            expect((f.flags & FLAG_KEYFRAME) !== 0).toBe(value);
            expect((h.flags & FLAG_KEYFRAME) !== 0).toBe(value);
            break;
          case 'end_of_burst':
            expect((f.flags & FLAG_END_OF_BURST) !== 0).toBe(value);
            expect((h.flags & FLAG_END_OF_BURST) !== 0).toBe(value);
            break;
          case 'resync':
            expect((f.flags & FLAG_RESYNC) !== 0).toBe(value);
            expect((h.flags & FLAG_RESYNC) !== 0).toBe(value);
            break;
          case 'payload_len':
            expect(f.payload.length).toBe(value);
            expect(h.payload_len).toBe(value);
            break;
          case 'payload_hex':
            expect(toHex(f.payload)).toBe(value);
            expect(toHex(bytes.subarray(h.payload_offset, h.payload_offset + h.payload_len))).toBe(value);
            break;
          case 'vendor':
            expect(f.vendor.map((x) => ({ type: x.type, value: [...x.value] }))).toEqual(value);
            expect(h.vendor_count).toBe((value as unknown[]).length);
            break;
          case 'tick':
            expect(f.tick).toBe(value);
            expect([h.has_tick, h.tick]).toEqual([true, value]);
            break;
          case 'ts_sim_ns':
            expect(f.ts_sim_ns).toBe(value);
            expect([h.has_ts_sim_ns, h.ts_sim_ns]).toEqual([true, value]);
            break;
          case 'ts_send_ns':
            expect(f.ts_send_ns).toBe(value);
            expect([h.has_ts_send_ns, h.ts_send_ns]).toEqual([true, value]);
            break;
          default:
            expect((f as unknown as Record<string, unknown>)[key], key).toBe(value);
            expect((h as unknown as Record<string, unknown>)[key], key).toBe(value);
        }
      }
      // Registered extensions the vector does not list are absent.
      for (const key of ['tick', 'ts_sim_ns', 'ts_send_ns'] as const) {
        if (!(key in exp)) expect(f[key], key).toBeUndefined();
      }
      expect(h.byte_length).toBe(bytes.length);
      checkAgreement(bytes);
    });
  }

  for (const v of vectors.filter((x) => x.expect_error !== undefined)) {
    const req = VECTOR_REQ[v.name] ?? 'AWP-DAT-010';
    it(`${req} rejects vector ${v.name} with ${v.expect_error!} (decodeFrame and peekFrame)`, () => {
      const bytes = fromHex(v.hex);
      expect(catchCode(() => decodeFrame(bytes))).toBe(v.expect_error);
      expect(catchCode(() => peekFrame(bytes, createFrameHeader()))).toBe(v.expect_error);
      expect(catchCode(() => peekFrame(bytes))).toBe(v.expect_error);
    });
  }

  it('AWP-DAT-008 re-encodes every valid vector to its exact bytes, except where a receiver must normalise', () => {
    for (const v of vectors.filter((x) => x.expect !== undefined)) {
      const out = toHex(encodeFrame(decodeFrame(fromHex(v.hex))));
      if (v.name === 'reserved_bits_set') {
        // AWP-DAT-005: senders zero bits 4-7 (0xf1 -> 0x01).
        expect(out).toBe(v.hex.slice(0, 10) + '01' + v.hex.slice(12));
      } else if (v.name === 'unknown_extension') {
        // AWP-DAT-006: the reserved 0x3f entry is skipped, so it is not re-emitted.
        const f = decodeFrame(fromHex(out));
        expect(f.vendor.map((x) => x.type)).toEqual([0x9a]);
        expect(out).not.toContain('3f03aabbcc');
      } else {
        expect(out, v.name).toBe(v.hex);
      }
    }
  });
});

/** Builds frame bytes from parts, without any validity guarantee (for targeted malformed cases). */
function rawFrame(opts: {
  flags?: number;
  seqHi?: number;
  ext?: number[];
  extLen?: number;
  payload?: number[];
  payloadLen?: number;
}): Buffer {
  const ext = opts.ext;
  const payload = opts.payload ?? [];
  const head = Buffer.alloc(28);
  head.write('AWPF', 0, 'latin1');
  head[4] = 1;
  head[5] = opts.flags ?? (ext ? FLAG_HAS_EXTENSIONS : 0);
  head.writeUInt16LE(1, 6);
  head.writeUInt32LE(7, 8);
  head.writeUInt32LE(opts.seqHi ?? 0, 12);
  head.writeUInt32LE(opts.payloadLen ?? payload.length, 24);
  const parts = [head];
  if (ext) {
    const len = Buffer.alloc(2);
    len.writeUInt16LE(opts.extLen ?? ext.length);
    parts.push(len, Buffer.from(ext));
  }
  parts.push(Buffer.from(payload));
  return Buffer.concat(parts);
}

const u64le = (hi: number, lo: number): number[] => {
  const b = Buffer.alloc(8);
  b.writeUInt32LE(lo >>> 0, 0);
  b.writeUInt32LE(hi >>> 0, 4);
  return [...b];
};

describe('peekFrame / decodeFrame rules', () => {
  const reject = (bytes: Buffer, code: FrameErrorCode, pattern: RegExp): void => {
    expect(() => decodeFrame(bytes)).toThrow(pattern);
    expect(catchCode(() => decodeFrame(bytes))).toBe(code);
    expect(catchCode(() => peekFrame(bytes))).toBe(code);
    expect(referenceDecode(bytes)).toEqual({ error: code });
  };

  it('AWP-DAT-010 rejects a frame shorter than the header, naming the rule', () => {
    reject(rawFrame({}).subarray(0, 27), 'AWP_MALFORMED', /shorter than the 28-byte header/);
  });
  it('AWP-DAT-010 rejects an ext_len that runs past the end of the frame before walking it', () => {
    reject(
      rawFrame({ ext: [EXT_TICK, 8, 0, 0, 0, 0, 0, 0, 0, 0], extLen: 32 }),
      'AWP_MALFORMED',
      /runs past/,
    );
  });
  it('AWP-DAT-010 rejects has_extensions with no room for ext_len', () => {
    reject(rawFrame({ flags: FLAG_HAS_EXTENSIONS }), 'AWP_MALFORMED', /before ext_len/);
  });
  it('AWP-DAT-010 rejects an ext_len that ends inside a TLV header', () => {
    reject(rawFrame({ ext: [0x80, 0, 0x81] }), 'AWP_MALFORMED', /inside a TLV header/);
  });
  it('AWP-DAT-010 rejects a TLV value that overruns ext_len', () => {
    reject(rawFrame({ ext: [0x80, 3, 1, 2], payload: [9] }), 'AWP_MALFORMED', /overruns/);
  });
  it('AWP-DAT-010 rejects a wrong len on ts_sim_ns and a duplicate vendor type', () => {
    reject(rawFrame({ ext: [EXT_TS_SIM_NS, 7, 0, 0, 0, 0, 0, 0, 0] }), 'AWP_MALFORMED', /has len 7, not 8/);
    reject(rawFrame({ ext: [0x90, 1, 5, 0x90, 0] }), 'AWP_MALFORMED', /appears twice/);
  });
  it('AWP-DAT-010 rejects resync without keyframe, naming the rule', () => {
    reject(
      rawFrame({ flags: FLAG_RESYNC | FLAG_END_OF_BURST }),
      'AWP_MALFORMED',
      /resync flag without keyframe/,
    );
  });
  it('AWP-DAT-010 rejects a payload_len near 2^32 that the buffer does not hold', () => {
    reject(rawFrame({ payloadLen: 0xffffffff }), 'AWP_MALFORMED', /give 4294967323/);
  });
  it('AWP-DAT-006 skips reserved types 0x00 and 0x04-0x7F by len, including zero-length entries', () => {
    const f = decodeFrame(rawFrame({ ext: [0x00, 0, 0x04, 1, 7, 0x7f, 2, 1, 2, 0xff, 0], payload: [1] }));
    expect(f.vendor).toEqual([{ type: 0xff, value: new Uint8Array(0) }]);
    expect(f.flags).toBe(0);
    expect([...f.payload]).toEqual([1]);
  });
  it('AWP-DAT-006 accepts an empty extension block (bit 2 set, ext_len 0)', () => {
    const bytes = rawFrame({ ext: [], payload: [5, 6] });
    const h = peekFrame(bytes);
    expect([h.ext_len, h.payload_offset, h.payload_len]).toEqual([0, 30, 2]);
    expect(decodeFrame(bytes).vendor).toEqual([]);
  });
  it('AWP-CTL-009 rejects tick and ts_send_ns above 2^53-1 and accepts 2^53-1', () => {
    reject(
      rawFrame({ ext: [EXT_TICK, 8, ...u64le(0x200000, 0)] }),
      'AWP_INTEGER_RANGE',
      /tick exceeds 2\^53-1/,
    );
    reject(
      rawFrame({ ext: [EXT_TS_SEND_NS, 8, ...u64le(0xffffffff, 0)] }),
      'AWP_INTEGER_RANGE',
      /ts_send_ns/,
    );
    expect(decodeFrame(rawFrame({ ext: [EXT_TICK, 8, ...u64le(0x1fffff, -1)] })).tick).toBe(2 ** 53 - 1);
  });
  it('AWP-CTL-009 bounds ts_sim_ns (i64) by |v| <= 2^53-1', () => {
    const sim = (hi: number, lo: number): Buffer => rawFrame({ ext: [EXT_TS_SIM_NS, 8, ...u64le(hi, lo)] });
    expect(decodeFrame(sim(-0x200000, 1)).ts_sim_ns).toBe(-(2 ** 53 - 1));
    expect(decodeFrame(sim(0x1fffff, -1)).ts_sim_ns).toBe(2 ** 53 - 1);
    expect(decodeFrame(sim(-1, -1)).ts_sim_ns).toBe(-1);
    reject(sim(-0x200000, 0), 'AWP_INTEGER_RANGE', /ts_sim_ns magnitude/);
    reject(sim(0x200000, 0), 'AWP_INTEGER_RANGE', /ts_sim_ns magnitude/);
    reject(sim(-0x200001, 5), 'AWP_INTEGER_RANGE', /ts_sim_ns magnitude/);
  });
  it('AWP-CTL-009 reports AWP_MALFORMED first when a frame is both malformed and out of range', () => {
    reject(rawFrame({ seqHi: 0x200000, payloadLen: 3 }), 'AWP_MALFORMED', /give 31/);
  });
  it('AWP-DAT-005 ignores flag bits 4-7 on receive and clears them in the header', () => {
    const bytes = rawFrame({ flags: 0xf0 | FLAG_KEYFRAME | FLAG_END_OF_BURST });
    expect(peekFrame(bytes).flags).toBe(FLAG_KEYFRAME | FLAG_END_OF_BURST);
    expect(decodeFrame(bytes).flags).toBe(FLAG_KEYFRAME | FLAG_END_OF_BURST);
  });
  it('decodeFrame returns the payload and vendor values as views of the input, not copies', () => {
    const bytes = encodeFrame({
      channel_id: 4,
      seq: 1,
      ts_mono_ns: 2,
      flags: 0,
      vendor: [{ type: 0x80, value: Uint8Array.of(1, 2) }],
      payload: Uint8Array.of(3, 4, 5),
    });
    const f = decodeFrame(bytes);
    expect(f.payload.buffer).toBe(bytes.buffer);
    expect(f.vendor[0]!.value.buffer).toBe(bytes.buffer);
    bytes[bytes.length - 1] = 9;
    expect([...f.payload]).toEqual([3, 4, 9]);
    expect(Object.getPrototypeOf(f.payload)).toBe(Uint8Array.prototype);
  });
  it('peekFrame fills and returns the out object it is given', () => {
    const out = createFrameHeader();
    expect(peekFrame(fromHex(vectors[1]!.hex), out)).toBe(out);
    expect(out.seq).toBe(42);
    expect(FRAME_HEADER_BYTES).toBe(28);
  });
});

describe('encodeFrame', () => {
  const base: Frame = {
    channel_id: 1,
    seq: 1,
    ts_mono_ns: 0,
    flags: 0,
    vendor: [],
    payload: new Uint8Array(0),
  };
  it('AWP-DAT-006 sets bit 2 iff an extension block exists; AWP-DAT-005 zeroes bits 4-7', () => {
    expect(encodeFrame({ ...base, flags: 0xf4 })[5]).toBe(0);
    expect(encodeFrame({ ...base, flags: 0xf1, tick: 3 })[5]).toBe(FLAG_KEYFRAME | FLAG_HAS_EXTENSIONS);
    expect(encodeFrame({ ...base, vendor: [{ type: 0x80, value: new Uint8Array(0) }] })[5]).toBe(4);
  });
  it('AWP-DAT-009 refuses resync without keyframe', () => {
    expect(catchCode(() => encodeFrame({ ...base, flags: FLAG_RESYNC }))).toBe('AWP_MALFORMED');
  });
  it('AWP-CTL-009 refuses out-of-range integers', () => {
    expect(catchCode(() => encodeFrame({ ...base, seq: 2 ** 53 }))).toBe('AWP_INTEGER_RANGE');
    expect(catchCode(() => encodeFrame({ ...base, ts_sim_ns: -(2 ** 53) }))).toBe('AWP_INTEGER_RANGE');
    expect(catchCode(() => encodeFrame({ ...base, tick: Infinity }))).toBe('AWP_INTEGER_RANGE');
    expect(catchCode(() => encodeFrame({ ...base, ts_send_ns: 1.5 }))).toBe('AWP_MALFORMED');
    expect(catchCode(() => encodeFrame({ ...base, ts_mono_ns: -1 }))).toBe('AWP_MALFORMED');
    expect(catchCode(() => encodeFrame({ ...base, channel_id: 0 }))).toBe('AWP_MALFORMED');
    expect(catchCode(() => encodeFrame({ ...base, channel_id: 65536 }))).toBe('AWP_MALFORMED');
  });
  it('AWP-DAT-006 refuses duplicate vendor types, reserved types and values over 255 bytes', () => {
    const v = (type: number, len = 1) => ({ type, value: new Uint8Array(len) });
    expect(catchCode(() => encodeFrame({ ...base, vendor: [v(0x90), v(0x91), v(0x90)] }))).toBe(
      'AWP_MALFORMED',
    );
    expect(catchCode(() => encodeFrame({ ...base, vendor: [v(0x7f)] }))).toBe('AWP_MALFORMED');
    expect(catchCode(() => encodeFrame({ ...base, vendor: [v(0x100)] }))).toBe('AWP_MALFORMED');
    expect(catchCode(() => encodeFrame({ ...base, vendor: [v(0x80, 256)] }))).toBe('AWP_MALFORMED');
    expect(decodeFrame(encodeFrame({ ...base, vendor: [v(0x80, 255)] })).vendor[0]!.value.length).toBe(255);
  });
  it('writes the worked example of the spec byte for byte', () => {
    const f: Frame = {
      channel_id: 1,
      seq: 42,
      ts_mono_ns: 913005200000,
      flags: FLAG_KEYFRAME,
      tick: 4212,
      vendor: [],
      payload: Buffer.from('{"avatar":[2,3]}'),
    };
    expect(toHex(encodeFrame(f))).toBe(vectors.find((v) => v.name === 'keyframe_tick')!.hex);
  });
});

describe('withFlags', () => {
  const keyframe = fromHex(vectors.find((v) => v.name === 'keyframe_tick')!.hex);
  it('AWP-DAT-009 returns a resync copy of a cached keyframe and leaves the original unchanged', () => {
    const copy = withFlags(keyframe, FLAG_RESYNC | FLAG_KEYFRAME);
    expect(copy).not.toBe(keyframe);
    expect(copy[5]).toBe(0x0d);
    expect(keyframe[5]).toBe(0x05);
    const f = decodeFrame(copy);
    expect(f.flags).toBe(FLAG_RESYNC | FLAG_KEYFRAME);
    expect(f.tick).toBe(4212);
    expect(toHex(f.payload)).toBe(toHex(decodeFrame(keyframe).payload));
  });
  it('AWP-DAT-009 refuses to mark a non-keyframe resync; AWP-DAT-005 clears reserved bits in the copy', () => {
    const delta = fromHex(vectors.find((v) => v.name === 'minimal')!.hex);
    expect(catchCode(() => withFlags(delta, FLAG_RESYNC))).toBe('AWP_MALFORMED');
    expect(catchCode(() => withFlags(delta, FLAG_HAS_EXTENSIONS))).toBe('AWP_MALFORMED');
    const reserved = fromHex(vectors.find((v) => v.name === 'reserved_bits_set')!.hex);
    expect(withFlags(reserved, FLAG_RESYNC)[5]).toBe(0x09);
    expect(catchCode(() => withFlags(fromHex(vectors.find((v) => v.name === 'bad_magic')!.hex), 1))).toBe(
      'AWP_MALFORMED',
    );
  });
});

// ---- property tests --------------------------------------------------------------------------------------

const u53 = fc.oneof(fc.maxSafeNat(), fc.constantFrom(0, 1, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1));
const i53 = fc.oneof(fc.maxSafeInteger(), fc.constantFrom(-(2 ** 53 - 1), -1, 0, -(2 ** 32), 2 ** 53 - 1));
const bytes = (max: number) => fc.uint8Array({ maxLength: max }).map((b) => new Uint8Array(b));

const frameArb: fc.Arbitrary<Frame> = fc
  .record(
    {
      channel_id: fc.integer({ min: 1, max: 0xffff }),
      seq: u53,
      ts_mono_ns: u53,
      flags: fc.constantFrom(0, 1, 2, 3, 9, 11),
      tick: u53,
      ts_sim_ns: i53,
      ts_send_ns: u53,
      vendor: fc.uniqueArray(fc.record({ type: fc.integer({ min: 0x80, max: 0xff }), value: bytes(255) }), {
        selector: (v) => v.type,
        maxLength: 6,
      }),
      payload: fc.oneof(bytes(64), bytes(4096)),
    },
    { requiredKeys: ['channel_id', 'seq', 'ts_mono_ns', 'flags', 'vendor', 'payload'] },
  )
  .map((f) => f as Frame);

/** Raw TLV entries with arbitrary (possibly reserved, duplicate, wrongly sized) types and lengths. */
const tlvArb = fc
  .array(
    fc.record({
      type: fc.oneof(fc.constantFrom(0, 1, 2, 3, 4, 0x7f, 0x80, 0xff), fc.integer({ min: 0, max: 255 })),
      value: bytes(12),
    }),
    { maxLength: 5 },
  )
  .map((entries) => [
    ...Buffer.concat(entries.map((e) => Buffer.from([e.type, e.value.length, ...e.value]))),
  ]);

/** Structured but unvalidated frames: valid more often than random bytes, close to every boundary. */
const roughFrameArb = fc
  .record({
    flags: fc.integer({ min: 0, max: 255 }),
    seqHi: fc.oneof(fc.constantFrom(0, 0x1fffff, 0x200000), fc.nat()),
    ext: fc.option(tlvArb, { nil: undefined }),
    extLenDelta: fc.oneof(fc.constant(0), fc.integer({ min: -3, max: 3 })),
    payload: fc.array(fc.nat(255), { maxLength: 20 }),
    payloadLenDelta: fc.oneof(fc.constant(0), fc.integer({ min: -2, max: 2 })),
  })
  .map((r) =>
    rawFrame({
      flags: r.ext ? r.flags | FLAG_HAS_EXTENSIONS : r.flags & ~FLAG_HAS_EXTENSIONS,
      seqHi: r.seqHi,
      ...(r.ext ? { ext: r.ext, extLen: Math.max(0, r.ext.length + r.extLenDelta) } : {}),
      payload: r.payload,
      payloadLen: Math.max(0, r.payload.length + r.payloadLenDelta),
    }),
  );

type Mutation =
  | { kind: 'flip'; at: number; value: number }
  | { kind: 'truncate'; at: number }
  | { kind: 'extend'; extra: Uint8Array };

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), value: fc.nat(255) }),
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('extend' as const), extra: bytes(8) }),
);

function mutate(b: Buffer, ms: Mutation[]): Buffer {
  let out = Buffer.from(b);
  for (const m of ms) {
    if (m.kind === 'flip') {
      if (out.length > 0) out[m.at % out.length] = m.value;
    } else if (m.kind === 'truncate') {
      out = out.subarray(0, m.at % (out.length + 1));
    } else {
      out = Buffer.concat([out, m.extra]);
    }
  }
  return out;
}

describe('properties (fast-check)', () => {
  it('AWP-DAT-006 decode(encode(f)) deep-equals f for random valid frames', () => {
    fc.assert(
      fc.property(frameArb, (f) => {
        const encoded = encodeFrame(f);
        expect(decodeFrame(encoded)).toEqual(f);
        expect(peekFrame(encoded).byte_length).toBe(encoded.length);
        checkAgreement(encoded);
      }),
      { numRuns: 400 },
    );
  });

  it('AWP-DAT-010 random bytes only ever throw FrameError, and peek, decode and a reference decoder agree', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 96 }), (raw) => {
        checkAgreement(raw);
        // Random bytes behind a valid magic and version reach the deeper checks.
        const prefixed = Buffer.concat([Buffer.from('AWPF\x01', 'latin1'), raw]);
        checkAgreement(prefixed);
      }),
      { numRuns: 1000 },
    );
  });

  it('AWP-DAT-010 structured frames with arbitrary TLVs and lengths: peek, decode and reference agree', () => {
    fc.assert(
      fc.property(roughFrameArb, (b) => void checkAgreement(b)),
      { numRuns: 2000 },
    );
  });

  it('AWP-DAT-010 mutations of valid frames (byte flips, truncation, extension) only throw FrameError', () => {
    fc.assert(
      fc.property(frameArb, fc.array(mutationArb, { minLength: 1, maxLength: 4 }), (f, ms) => {
        checkAgreement(mutate(encodeFrame(f), ms));
      }),
      { numRuns: 600 },
    );
  });

  it('AWP-DAT-009 withFlags(keyframe, resync) always yields a valid resync keyframe with the same content', () => {
    fc.assert(
      fc.property(frameArb, (f) => {
        const src = encodeFrame({ ...f, flags: f.flags | FLAG_KEYFRAME });
        const out = decodeFrame(withFlags(src, FLAG_RESYNC));
        expect(out).toEqual({ ...decodeFrame(src), flags: (f.flags | FLAG_KEYFRAME | FLAG_RESYNC) & 0x0b });
      }),
      { numRuns: 200 },
    );
  });
});

describe('allocation (bench/frame-peek.ts measurement)', () => {
  it('peekFrame with a reused out header allocates nothing per frame; decodeFrame does', async () => {
    const { measureFramePeek } = await import('../../bench/frame-peek.js');
    const summary = await measureFramePeek({
      timeIterations: 20_000,
      allocIterations: 2_000,
      allocWindows: 5,
    });
    for (const c of summary.cases) {
      expect(c.peek.bytes_per_frame, c.shape).toBeLessThan(2);
      expect(c.decode.bytes_per_frame, c.shape).toBeGreaterThan(64);
    }
  });
});
