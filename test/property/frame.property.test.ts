/**
 * Properties of the frame codec, the header peek and the inline binding on hostile input (issue 12 item
 * 8). test/protocol/frame.test.ts checks the codec's own agreement properties; these add the spec's
 * frame vectors as mutation seeds, canonical re-encoding, a reused `out` header after throws, withFlags on
 * arbitrary bytes, and inline params built from hostile JSON (prototype keys, out-of-range numbers).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  FLAG_KEYFRAME,
  FLAG_RESYNC,
  FLAGS_SEMANTIC,
  FrameError,
  createFrameHeader,
  decodeFrame,
  peekFrame,
  type Frame,
  type FrameHeader,
} from '../../src/protocol/frame.js';
import { encodeFrame, withFlags } from '../../src/protocol/frame-encode.js';
import { frameToInline, inlineToFrame, vendorExtensionNames } from '../../src/protocol/inline-frame.js';
import { loadFrameVectors } from '../harness/spec-data.js';
import { hostileJson, hostileKey, hostileNumber, hostileObject, params } from './arbitraries.js';

/** The outcome of a call that may throw only FrameError: its value, or the error code. */
function outcome<T>(f: () => T): { ok: T } | { code: string } {
  try {
    return { ok: f() };
  } catch (err) {
    if (!(err instanceof FrameError)) throw err; // anything else fails the property
    return { code: err.code };
  }
}

const u53 = fc.oneof(fc.integer({ min: 0, max: 1000 }), fc.maxSafeNat());
const i53 = fc.oneof(fc.integer({ min: -1000, max: 1000 }), fc.maxSafeInteger());

const frameArb: fc.Arbitrary<Frame> = fc
  .record(
    {
      channel_id: fc.integer({ min: 1, max: 0xffff }),
      seq: u53,
      ts_mono_ns: u53,
      flags: fc.integer({ min: 0, max: 0xff }).map((f) => ((f & FLAG_RESYNC) !== 0 ? f | FLAG_KEYFRAME : f)),
      tick: u53,
      ts_sim_ns: i53,
      ts_send_ns: u53,
      vendor: fc.uniqueArray(
        fc.record({ type: fc.integer({ min: 0x80, max: 0xff }), value: fc.uint8Array({ maxLength: 24 }) }),
        { selector: (v) => v.type, maxLength: 4 },
      ),
      payload: fc.uint8Array({ maxLength: 64 }),
    },
    { requiredKeys: ['channel_id', 'seq', 'ts_mono_ns', 'flags', 'vendor', 'payload'] },
  )
  .map((f) => f as Frame);

/** What a decoder returns for a frame: flags reduced to the semantic bits. */
const decodedForm = (f: Frame): Frame => ({ ...f, flags: f.flags & FLAGS_SEMANTIC });

const vectorBytes = loadFrameVectors().map((v) => Buffer.from(v.hex, 'hex'));

type Mutation =
  | { m: 'set'; at: number; value: number }
  | { m: 'truncate'; to: number }
  | { m: 'append'; bytes: Uint8Array }
  | { m: 'splice'; at: number; bytes: Uint8Array };

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({ m: fc.constant('set' as const), at: fc.nat(200), value: fc.nat(255) }),
  },
  { weight: 1, arbitrary: fc.record({ m: fc.constant('truncate' as const), to: fc.nat(200) }) },
  {
    weight: 1,
    arbitrary: fc.record({ m: fc.constant('append' as const), bytes: fc.uint8Array({ maxLength: 12 }) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      m: fc.constant('splice' as const),
      at: fc.nat(200),
      bytes: fc.uint8Array({ maxLength: 12 }),
    }),
  },
);

function mutate(src: Uint8Array, ms: readonly Mutation[]): Buffer {
  let b = Buffer.from(src);
  for (const x of ms) {
    if (x.m === 'set' && b.length > 0) b[x.at % b.length] = x.value;
    else if (x.m === 'truncate') b = b.subarray(0, x.to % (b.length + 1));
    else if (x.m === 'append') b = Buffer.concat([b, x.bytes]);
    else if (x.m === 'splice') {
      const at = x.at % (b.length + 1);
      b = Buffer.concat([b.subarray(0, at), x.bytes, b.subarray(at)]);
    }
  }
  return b;
}

/** Bytes worth decoding: the spec's vectors and valid encodings, mutated, or noise behind a valid magic. */
const hostileBytes: fc.Arbitrary<Buffer> = fc.oneof(
  fc
    .tuple(fc.constantFrom(...vectorBytes), fc.array(mutationArb, { maxLength: 4 }))
    .map(([v, ms]) => mutate(v, ms)),
  fc.tuple(frameArb, fc.array(mutationArb, { maxLength: 4 })).map(([f, ms]) => mutate(encodeFrame(f), ms)),
  fc.uint8Array({ maxLength: 80 }).map((r) => Buffer.concat([Buffer.from('AWPF\x01', 'latin1'), r])),
  fc.uint8Array({ maxLength: 80 }).map((r) => Buffer.from(r)),
);

const headerFields = (h: FrameHeader) => ({ ...h });

describe('frame codec properties', () => {
  it('peekFrame, decodeFrame and withFlags throw nothing but FrameError, and agree, on hostile bytes', () => {
    const shared = createFrameHeader(); // reused after throws, as the hub's hot path does
    fc.assert(
      fc.property(hostileBytes, fc.nat(0xff), (buf, set) => {
        const fresh = outcome(() => headerFields(peekFrame(buf)));
        const reused = outcome(() => headerFields(peekFrame(buf, shared)));
        expect(reused).toEqual(fresh);
        const decoded = outcome(() => decodeFrame(buf));
        if ('code' in fresh) {
          expect(decoded).toEqual(fresh);
        } else {
          expect('ok' in decoded).toBe(true);
          const f = (decoded as { ok: Frame }).ok;
          const h = fresh.ok;
          expect([f.channel_id, f.seq, f.ts_mono_ns, f.flags, f.payload.length]).toEqual([
            h.channel_id,
            h.seq,
            h.ts_mono_ns,
            h.flags & FLAGS_SEMANTIC,
            h.payload_len,
          ]);
          expect(h.byte_length).toBe(buf.length);
          expect(f.tick).toBe(h.has_tick ? h.tick : undefined);
          expect(f.ts_sim_ns).toBe(h.has_ts_sim_ns ? h.ts_sim_ns : undefined);
          expect(f.ts_send_ns).toBe(h.has_ts_send_ns ? h.ts_send_ns : undefined);
          expect(f.vendor.length).toBe(h.vendor_count);
          // Canonical form: re-encoding a decoded frame decodes to the same frame. Channel 0 is no frame
          // channel (AWP-TRN-005) but not malformed either (AWP-DAT-010): decoded, routed nowhere, and
          // refused by the encoder, which checks what a sender must guarantee.
          if (f.channel_id === 0) expect(outcome(() => encodeFrame(f))).toEqual({ code: 'AWP_MALFORMED' });
          else expect(decodeFrame(encodeFrame(f))).toEqual(f);
        }
        const flagged = outcome(() => withFlags(buf, set));
        if ('ok' in flagged) expect(decodeFrame(flagged.ok).flags & set & FLAGS_SEMANTIC).toBe(set);
      }),
      params(500),
    );
  });

  it('encode/decode round trip; peek reads the header the encoder wrote', () => {
    fc.assert(
      fc.property(frameArb, (f) => {
        const buf = encodeFrame(f);
        expect(decodeFrame(buf)).toEqual(decodedForm(f));
        const h = peekFrame(buf);
        expect([h.channel_id, h.seq, h.ts_mono_ns, h.payload_len, h.byte_length]).toEqual([
          f.channel_id,
          f.seq,
          f.ts_mono_ns,
          f.payload.length,
          buf.length,
        ]);
      }),
      params(300),
    );
  });

  it('encodeFrame refuses out-of-rule field values with FrameError only', () => {
    const hostileFrame = fc.record({
      channel_id: hostileNumber,
      seq: hostileNumber,
      ts_mono_ns: hostileNumber,
      flags: hostileNumber,
      tick: fc.option(hostileNumber, { nil: undefined }),
      ts_sim_ns: fc.option(hostileNumber, { nil: undefined }),
      ts_send_ns: fc.option(hostileNumber, { nil: undefined }),
      vendor: fc.array(fc.record({ type: hostileNumber, value: fc.uint8Array({ maxLength: 300 }) }), {
        maxLength: 3,
      }),
      payload: fc.uint8Array({ maxLength: 8 }),
    });
    fc.assert(
      fc.property(hostileFrame, (raw) => {
        const { tick, ts_sim_ns, ts_send_ns, ...rest } = raw;
        const f: Frame = {
          ...rest,
          ...(tick !== undefined ? { tick } : {}),
          ...(ts_sim_ns !== undefined ? { ts_sim_ns } : {}),
          ...(ts_send_ns !== undefined ? { ts_send_ns } : {}),
        };
        const enc = outcome(() => encodeFrame(f));
        // -0 is the integer 0 on the wire: it decodes as 0 (toEqual tells -0 from 0).
        const zeroed = Object.fromEntries(
          Object.entries(f).map(([k, v]) => [k, Object.is(v, -0) ? 0 : v]),
        ) as unknown as Frame;
        if ('ok' in enc) expect(decodeFrame(enc.ok)).toEqual(decodedForm(zeroed));
      }),
      params(400),
    );
  });
});

describe('inline binding properties', () => {
  it('binary -> inline -> JSON -> inline -> binary is the identity on valid frames', () => {
    fc.assert(
      fc.property(frameArb, (f) => {
        const text = JSON.stringify(frameToInline(f));
        const back = inlineToFrame(JSON.parse(text));
        expect(back).toEqual(decodedForm(f));
        expect(encodeFrame(back).equals(encodeFrame(f))).toBe(true);
      }),
      params(300),
    );
  });

  it('inlineToFrame throws nothing but FrameError on hostile params; what it accepts re-encodes', () => {
    const inlineLike = fc.oneof(
      hostileJson,
      hostileObject,
      // Near-valid params with one hostile field, so the deeper checks run.
      fc.tuple(frameArb, hostileKey, hostileJson).map(([f, k, v]) => ({ ...frameToInline(f), [k]: v })),
      fc
        .tuple(
          frameArb,
          fc.constantFrom('x-awpedge.tlv_80', 'x-awpedge.tlv_ff', 'x-awpedge.tlv_7f', 'x-v.k'),
          hostileJson,
        )
        .map(([f, k, v]) => ({ ...frameToInline(f), [k]: v })),
    );
    fc.assert(
      fc.property(inlineLike, hostileJson, (p, decl) => {
        // The same value as JSON.parse would give it (own __proto__ members, no undefined).
        const parsed = JSON.parse(JSON.stringify(p)) as unknown;
        const names = vendorExtensionNames(decl); // never throws, whatever a manifest declares
        const r = outcome(() => inlineToFrame(parsed, names));
        if ('ok' in r) expect(inlineToFrame(frameToInline(r.ok, names), names)).toEqual(r.ok);
      }),
      params(500),
    );
  });
});
