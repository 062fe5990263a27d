/**
 * Inline binding of frames (AWP-DAT-004, schemas/v0.1/frame-inline.schema.json): `obs.frame` / `cmd.frame` params
 * <-> the `Frame` of ./frame.ts, so a frame can change binding losslessly (AWP-CLK-003: tick / ts_sim_ns /
 * ts_send_ns <-> TLV 0x01 / 0x02 / 0x03 exactly).
 *
 * Vendor TLVs (0x80-0xFF). The spec pins that they map to `x-<vendor>.<name>` fields and are declared in the channel
 * schema under `x-<vendor>.extensions`; it pins neither the declaration's shape nor the JSON form of the value.
 * Choices made here:
 * - Declaration: under a key `x-<vendor>.extensions`, either a map `{ "<name>": <type> }` (type a number or "0x9a",
 *   or `{ "type": ... }`) or a list `[{ "name": "<name>", "type": <type> }]`; it may sit on the channel declaration
 *   or inside its `schema` object. The TLV of that type maps to the field `x-<vendor>.<name>`. Invalid entries are
 *   ignored; if two declarations claim the same type or field, the first wins.
 * - Value: the TLV value bytes as a base64 string (like `payload_b64`), so any vendor encoding survives unchanged.
 * - A vendor TLV with no declaration maps to `x-awpedge.tlv_<2 hex digits>` so conversion stays lossless even
 *   without the manifest; an `x-` field that is neither declared nor of that form has no TLV type and is ignored,
 *   as receivers ignore unknown fields (AWP-VER-003).
 */
import {
  FLAG_HAS_EXTENSIONS,
  FLAG_KEYFRAME,
  FLAG_RESYNC,
  FLAGS_DEFINED,
  FLAGS_SEMANTIC,
  FrameError,
  EXT_VENDOR_MIN,
  assertI53,
  assertU53,
  assertValidFrame,
} from './frame.js';
import type { Frame, VendorExtension } from './frame.js';
import { isRecord } from './json-object.js';

export type InlineFrameParams = {
  channel_id: number;
  seq: number;
  ts_mono_ns: number;
  flags: number;
  tick?: number;
  ts_sim_ns?: number;
  ts_send_ns?: number;
  payload_b64: string;
} & Record<`x-${string}`, unknown>;

type VendorField = `x-${string}`;

export interface VendorExtensionNames {
  /** TLV type (0x80-0xFF) -> inline field `x-<vendor>.<name>`. */
  readonly fieldByType: ReadonlyMap<number, VendorField>;
  /** Inline field -> TLV type. */
  readonly typeByField: ReadonlyMap<string, number>;
}

const NO_NAMES: VendorExtensionNames = { fieldByType: new Map(), typeByField: new Map() };
const DECLARATION_KEY = /^x-([a-z0-9]+)\.extensions$/;
const EXTENSION_NAME = /^[A-Za-z0-9_.-]+$/;
const FALLBACK_FIELD = /^x-awpedge\.tlv_([0-9a-f]{2})$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function vendorType(v: unknown): number | undefined {
  if (isRecord(v)) return vendorType(v.type);
  let t: number | undefined;
  if (typeof v === 'number') t = v;
  else if (typeof v === 'string' && /^0x[0-9a-fA-F]{2}$/.test(v)) t = Number.parseInt(v.slice(2), 16);
  return t !== undefined && Number.isInteger(t) && t >= EXT_VENDOR_MIN && t <= 0xff ? t : undefined;
}

/** Builds the vendor TLV <-> field mapping from a channel declaration or its `schema` object (see the file comment). */
export function vendorExtensionNames(channelSchema: unknown): VendorExtensionNames {
  const fieldByType = new Map<number, VendorField>();
  const typeByField = new Map<string, number>();
  const add = (vendor: string, name: unknown, typeValue: unknown): void => {
    const type = vendorType(typeValue);
    if (typeof name !== 'string' || !EXTENSION_NAME.test(name) || type === undefined) return;
    const field: VendorField = `x-${vendor}.${name}`;
    if (fieldByType.has(type) || typeByField.has(field)) return;
    fieldByType.set(type, field);
    typeByField.set(field, type);
  };
  const scan = (obj: unknown): void => {
    if (!isRecord(obj)) return;
    for (const [key, decl] of Object.entries(obj)) {
      const vendor = DECLARATION_KEY.exec(key)?.[1];
      if (vendor === undefined) continue;
      if (Array.isArray(decl)) {
        for (const entry of decl) if (isRecord(entry)) add(vendor, entry.name, entry.type);
      } else if (isRecord(decl)) {
        for (const [name, typeValue] of Object.entries(decl)) add(vendor, name, typeValue);
      }
    }
  };
  scan(channelSchema);
  if (isRecord(channelSchema)) scan(channelSchema.schema);
  return { fieldByType, typeByField };
}

function toBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

function fromBase64(value: unknown, field: string): Uint8Array {
  if (
    typeof value !== 'string' ||
    !BASE64.test(value) ||
    value.length % 4 === 1 ||
    (value.endsWith('=') && value.length % 4 !== 0)
  ) {
    throw new FrameError('AWP_MALFORMED', `${field} is not base64 (AWP-DAT-004)`);
  }
  const b = Buffer.from(value, 'base64');
  return new Uint8Array(b.buffer, b.byteOffset, b.length);
}

function fieldFor(type: number, names: VendorExtensionNames): VendorField {
  return names.fieldByType.get(type) ?? `x-awpedge.tlv_${type.toString(16).padStart(2, '0')}`;
}

function typeFor(field: string, names: VendorExtensionNames): number | undefined {
  const declared = names.typeByField.get(field);
  if (declared !== undefined) return declared;
  const m = FALLBACK_FIELD.exec(field);
  if (m === null) return undefined;
  const t = Number.parseInt(m[1]!, 16);
  return t >= EXT_VENDOR_MIN ? t : undefined;
}

/** Inline params for a frame. JSON `flags` carry bits 0, 1, 3 only (bit 2 = 0, AWP-DAT-004). Throws FrameError. */
export function frameToInline(frame: Frame, names: VendorExtensionNames = NO_NAMES): InlineFrameParams {
  assertValidFrame(frame);
  const params: InlineFrameParams = {
    channel_id: frame.channel_id,
    seq: frame.seq,
    ts_mono_ns: frame.ts_mono_ns,
    flags: frame.flags & FLAGS_SEMANTIC,
    payload_b64: '',
  };
  if (frame.tick !== undefined) params.tick = frame.tick;
  if (frame.ts_sim_ns !== undefined) params.ts_sim_ns = frame.ts_sim_ns;
  if (frame.ts_send_ns !== undefined) params.ts_send_ns = frame.ts_send_ns;
  params.payload_b64 = toBase64(frame.payload);
  for (const v of frame.vendor) {
    const field = fieldFor(v.type, names);
    if (field in params) throw new FrameError('AWP_MALFORMED', `two vendor extensions map to ${field}`);
    params[field] = toBase64(v.value);
  }
  return params;
}

/**
 * Validates inline params (normally straight from JSON.parse) and returns the frame. Throws FrameError:
 * AWP_INTEGER_RANGE for a 64-bit field beyond 2^53-1 (AWP-CTL-009); AWP_MALFORMED for a missing or mistyped field,
 * channel_id outside 1..65535, flags bit 2 set (AWP-DAT-004), resync without keyframe (AWP-DAT-010), bad base64, a
 * vendor value over 255 bytes or two fields for one TLV type. Flag bits 4-7 are ignored (AWP-DAT-005).
 */
export function inlineToFrame(params: unknown, names: VendorExtensionNames = NO_NAMES): Frame {
  if (!isRecord(params)) throw new FrameError('AWP_MALFORMED', 'inline frame params must be an object');
  const ch = params.channel_id;
  if (typeof ch !== 'number' || !Number.isInteger(ch) || ch < 1 || ch > 0xffff) {
    throw new FrameError('AWP_MALFORMED', 'channel_id must be an integer 1..65535 (AWP-DAT-004)');
  }
  const seq = assertU53(params.seq, 'seq');
  const tsMono = assertU53(params.ts_mono_ns, 'ts_mono_ns');
  const rawFlags = params.flags;
  if (typeof rawFlags !== 'number' || !Number.isInteger(rawFlags) || rawFlags < 0 || rawFlags > 0xff) {
    throw new FrameError('AWP_MALFORMED', 'flags must be an integer 0..255 (AWP-DAT-004)');
  }
  const flags = rawFlags & FLAGS_DEFINED;
  if ((flags & FLAG_HAS_EXTENSIONS) !== 0) {
    throw new FrameError(
      'AWP_MALFORMED',
      'inline flags bit 2 must be 0; extensions are fields (AWP-DAT-004)',
    );
  }
  if ((flags & (FLAG_RESYNC | FLAG_KEYFRAME)) === FLAG_RESYNC) {
    throw new FrameError('AWP_MALFORMED', 'resync flag without keyframe (AWP-DAT-010)');
  }
  const frame: Frame = {
    channel_id: ch,
    seq,
    ts_mono_ns: tsMono,
    flags,
    vendor: [],
    payload: fromBase64(params.payload_b64, 'payload_b64'),
  };
  if (params.tick !== undefined) frame.tick = assertU53(params.tick, 'tick');
  if (params.ts_sim_ns !== undefined) frame.ts_sim_ns = assertI53(params.ts_sim_ns, 'ts_sim_ns');
  if (params.ts_send_ns !== undefined) frame.ts_send_ns = assertU53(params.ts_send_ns, 'ts_send_ns');
  const vendor: VendorExtension[] = frame.vendor;
  for (const key of Object.keys(params)) {
    if (!key.startsWith('x-')) continue;
    const type = typeFor(key, names);
    if (type === undefined) continue;
    const value = fromBase64(params[key], key);
    if (value.length > 0xff) throw new FrameError('AWP_MALFORMED', `${key} is longer than 255 bytes`);
    if (vendor.some((v) => v.type === type)) {
      throw new FrameError('AWP_MALFORMED', `two fields map to vendor extension type ${type} (AWP-DAT-006)`);
    }
    vendor.push({ type, value });
  }
  return frame;
}
