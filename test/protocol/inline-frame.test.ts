import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FrameError, decodeFrame } from '../../src/protocol/frame.js';
import { encodeFrame } from '../../src/protocol/frame-encode.js';
import type { Frame, FrameErrorCode } from '../../src/protocol/frame.js';
import { frameToInline, inlineToFrame, vendorExtensionNames } from '../../src/protocol/inline-frame.js';
import type { InlineFrameParams } from '../../src/protocol/inline-frame.js';

const spec = (path: string): string =>
  readFileSync(new URL(`../../src/protocol/spec/${path}`, import.meta.url), 'utf8');

const vectors = (
  JSON.parse(spec('schemas/test-vectors/frames.json')) as {
    vectors: { name: string; hex: string; expect?: unknown }[];
  }
).vectors;
const vectorBytes = (name: string): Buffer => Buffer.from(vectors.find((v) => v.name === name)!.hex, 'hex');

const ajv = new Ajv2020({ strict: false });
ajv.addSchema(JSON.parse(spec('schemas/v0.1/common.schema.json')) as object);
const validateInline = ajv.compile(JSON.parse(spec('schemas/v0.1/frame-inline.schema.json')) as object);

function catchCode(fn: () => void): FrameErrorCode {
  try {
    fn();
  } catch (e) {
    if (e instanceof FrameError) return e.code;
    throw e;
  }
  throw new Error('expected a FrameError');
}

/** A channel declaration as a manifest carries it, with vendor TLVs declared in its schema. */
const camera = {
  id: 'rgb_wrist',
  modality: 'image/jpeg',
  rate_hz: 30,
  loss_class: 'latest-wins',
  schema: {
    width: 1280,
    height: 720,
    'x-acme.extensions': { exposure_us: 0x9a, gain: '0x9b', lens: { type: 0xc0 } },
  },
  'x-robo.extensions': [{ name: 'pose_id', type: 0x80 }],
};
const names = vendorExtensionNames(camera);

describe('vendorExtensionNames', () => {
  it('AWP-DAT-004 maps declared vendor TLV types to x-<vendor>.<name> fields in every accepted form', () => {
    expect([...names.fieldByType.entries()].sort((a, b) => a[0] - b[0])).toEqual([
      [0x80, 'x-robo.pose_id'],
      [0x9a, 'x-acme.exposure_us'],
      [0x9b, 'x-acme.gain'],
      [0xc0, 'x-acme.lens'],
    ]);
    expect(names.typeByField.get('x-acme.gain')).toBe(0x9b);
  });
  it('ignores invalid declarations and keeps the first claim on a type', () => {
    const n = vendorExtensionNames({
      'x-acme.extensions': { reserved: 0x10, too_big: 256, 'bad name': 0x81, ok: 0x82, again: 0x82 },
      'x-Bad.extensions': { x: 0x83 },
      'x-acme.other': { y: 0x84 },
      schema: 'not an object',
    });
    expect([...n.fieldByType.entries()]).toEqual([[0x82, 'x-acme.ok']]);
    expect(vendorExtensionNames(null).fieldByType.size).toBe(0);
  });
});

describe('frameToInline / inlineToFrame', () => {
  it('AWP-DAT-004 maps the unknown_extension vector: vendor TLV 0x9a -> declared field, base64 value', () => {
    const params = frameToInline(decodeFrame(vectorBytes('unknown_extension')), names);
    expect(params).toEqual({
      channel_id: 2,
      seq: 9,
      ts_mono_ns: 5,
      flags: 0,
      tick: 1,
      payload_b64: Buffer.from('{"avatar":[2,3]}').toString('base64'),
      'x-acme.exposure_us': Buffer.from([0xde, 0xad]).toString('base64'),
    });
    expect(validateInline(params), JSON.stringify(validateInline.errors)).toBe(true);
    // Without a declaration the TLV keeps a reserved-for-this-proxy name, so nothing is lost.
    expect(frameToInline(decodeFrame(vectorBytes('unknown_extension')))['x-awpedge.tlv_9a']).toBe('3q0=');
  });

  it('AWP-CLK-003 maps tick / ts_sim_ns / ts_send_ns TLVs to the named fields exactly', () => {
    expect(frameToInline(decodeFrame(vectorBytes('tick_and_ts_sim')))).toMatchObject({
      flags: 2,
      tick: 4212,
      ts_sim_ns: 4212000000,
    });
    expect(frameToInline(decodeFrame(vectorBytes('negative_ts_sim'))).ts_sim_ns).toBe(-5000);
    expect(frameToInline(decodeFrame(vectorBytes('streaming_ts_send')))).toMatchObject({
      flags: 1,
      ts_send_ns: 913004120200,
    });
  });

  it('AWP-DAT-004 JSON flags carry bits 0, 1, 3 only: bit 2 is 0 even when the binary frame has extensions', () => {
    for (const v of vectors.filter((x) => x.expect !== undefined)) {
      const params = frameToInline(decodeFrame(Buffer.from(v.hex, 'hex')), names);
      expect(params.flags & ~0x0b, v.name).toBe(0);
      expect(validateInline(params), v.name).toBe(true);
    }
  });

  it('AWP-DAT-004 rejects inline params with flags bit 2 set', () => {
    const p = { channel_id: 1, seq: 1, ts_mono_ns: 1, flags: 4, payload_b64: '' };
    expect(() => inlineToFrame(p)).toThrow(/bit 2 must be 0/);
    expect(catchCode(() => inlineToFrame({ ...p, flags: 5, tick: 3 }))).toBe('AWP_MALFORMED');
  });

  it('AWP-DAT-010 rejects inline params with resync and no keyframe', () => {
    const p = { channel_id: 1, seq: 1, ts_mono_ns: 1, flags: 8, payload_b64: '' };
    expect(() => inlineToFrame(p)).toThrow(/resync flag without keyframe/);
    expect(inlineToFrame({ ...p, flags: 9 }).flags).toBe(9);
  });

  it('AWP-DAT-005 ignores flag bits 4-7 of inline params', () => {
    const f = inlineToFrame({ channel_id: 1, seq: 1, ts_mono_ns: 1, flags: 0xf3, payload_b64: '' });
    expect(f.flags).toBe(3);
    expect(frameToInline(f).flags).toBe(3);
  });

  it('AWP-CTL-009 rejects 64-bit fields above 2^53-1 with AWP_INTEGER_RANGE', () => {
    const p = { channel_id: 1, seq: 1, ts_mono_ns: 1, flags: 0, payload_b64: '' };
    // JSON.parse turns an integer literal beyond 2^53-1 into a double >= 2^53 (or Infinity).
    for (const [field, literal] of [
      ['seq', '9007199254740992'],
      ['ts_mono_ns', '18446744073709551615'],
      ['tick', '1e400'],
      ['ts_send_ns', '9007199254740993'],
      ['ts_sim_ns', '-9007199254740992'],
    ] as const) {
      const params = JSON.parse(JSON.stringify(p).replace('}', `,"${field}":${literal}}`)) as unknown;
      expect(
        catchCode(() => inlineToFrame(params)),
        field,
      ).toBe('AWP_INTEGER_RANGE');
    }
    expect(inlineToFrame({ ...p, seq: 2 ** 53 - 1, ts_sim_ns: -(2 ** 53 - 1) }).ts_sim_ns).toBe(
      -(2 ** 53 - 1),
    );
  });

  it('rejects mistyped or missing fields and bad base64 with AWP_MALFORMED', () => {
    const p = { channel_id: 1, seq: 1, ts_mono_ns: 1, flags: 0, payload_b64: 'AAEC' };
    for (const bad of [
      null,
      [],
      { ...p, channel_id: 0 },
      { ...p, channel_id: 65536 },
      { ...p, seq: '1' },
      { ...p, seq: 1.5 },
      { ...p, ts_mono_ns: -1 },
      { ...p, flags: 256 },
      { ...p, flags: undefined },
      { ...p, tick: null },
      { ...p, payload_b64: 'A' },
      { ...p, payload_b64: 'AA=A' },
      { ...p, payload_b64: 'AAE=C' },
      { ...p, payload_b64: 42 },
      { ...p, 'x-awpedge.tlv_9a': 'not base64!' },
      { ...p, 'x-awpedge.tlv_9a': Buffer.alloc(256).toString('base64') },
      { ...p, 'x-awpedge.tlv_9a': '', 'x-acme.exposure_us': '' },
    ]) {
      expect(
        catchCode(() => inlineToFrame(bad, names)),
        JSON.stringify(bad),
      ).toBe('AWP_MALFORMED');
    }
    expect([...inlineToFrame({ ...p, payload_b64: 'AAE' }).payload]).toEqual([0, 1]);
  });

  it('ignores x- fields that name no vendor TLV (AWP-VER-003) and maps declared ones back to their type', () => {
    const f = inlineToFrame(
      {
        channel_id: 1,
        seq: 1,
        ts_mono_ns: 1,
        flags: 0,
        payload_b64: '',
        'x-other.note': 'hello',
        'x-awpedge.tlv_10': 'AA==',
        'x-acme.gain': 'AQI=',
      },
      names,
    );
    expect(f.vendor).toEqual([{ type: 0x9b, value: Uint8Array.of(1, 2) }]);
  });

  it('frameToInline refuses frames a sender must not emit', () => {
    const f: Frame = {
      channel_id: 1,
      seq: 1,
      ts_mono_ns: 1,
      flags: 8,
      vendor: [],
      payload: new Uint8Array(0),
    };
    expect(catchCode(() => frameToInline(f))).toBe('AWP_MALFORMED');
    expect(catchCode(() => frameToInline({ ...f, flags: 0, tick: 2 ** 53 }))).toBe('AWP_INTEGER_RANGE');
  });
});

const u53 = fc.oneof(fc.maxSafeNat(), fc.constantFrom(0, 2 ** 32, 2 ** 53 - 1));
const bytes = (max: number) => fc.uint8Array({ maxLength: max });
const frameArb: fc.Arbitrary<Frame> = fc
  .record(
    {
      channel_id: fc.integer({ min: 1, max: 0xffff }),
      seq: u53,
      ts_mono_ns: u53,
      flags: fc.constantFrom(0, 1, 2, 3, 9, 11),
      tick: u53,
      ts_sim_ns: fc.oneof(fc.maxSafeInteger(), fc.constantFrom(-(2 ** 53 - 1), -1)),
      ts_send_ns: u53,
      vendor: fc.uniqueArray(
        fc.record({
          type: fc.oneof(fc.constantFrom(0x80, 0x9a, 0x9b, 0xc0), fc.integer({ min: 0x80, max: 0xff })),
          value: bytes(255),
        }),
        { selector: (v) => v.type, maxLength: 6 },
      ),
      payload: fc.oneof(bytes(64), bytes(4096)),
    },
    { requiredKeys: ['channel_id', 'seq', 'ts_mono_ns', 'flags', 'vendor', 'payload'] },
  )
  .map((f) => f as Frame);

describe('binding conversion properties (fast-check)', () => {
  it('AWP-DAT-004 binary -> inline -> binary is the identity for valid frames, vendor fields included', () => {
    fc.assert(
      fc.property(frameArb, fc.boolean(), (f, declared) => {
        const n = declared ? names : undefined;
        const binary = encodeFrame(f);
        const params = frameToInline(decodeFrame(binary), n);
        expect(validateInline(params)).toBe(true);
        // Through JSON text, as the inline binding carries it.
        const back = inlineToFrame(JSON.parse(JSON.stringify(params)) as unknown, n);
        expect(back).toEqual(f);
        expect(encodeFrame(back).equals(binary)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});

describe('core-streaming trace', () => {
  const frames = spec('traces/core-streaming.jsonl')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as { msg?: { method?: string; params?: InlineFrameParams } })
    .filter((entry) => entry.msg?.method === 'obs.frame')
    .map((entry) => entry.msg!.params!);

  it('AWP-DAT-004 obs.frame params convert to binary and back unchanged', () => {
    expect(frames.length).toBeGreaterThanOrEqual(3);
    for (const params of frames) {
      const binary = encodeFrame(inlineToFrame(params));
      const h = decodeFrame(binary);
      expect(h.ts_send_ns).toBe(params.ts_send_ns);
      expect(frameToInline(h)).toEqual(params);
    }
  });
});
