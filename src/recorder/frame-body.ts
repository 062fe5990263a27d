/**
 * A frame's record body (AWP-AUD-001), sans-IO: its header as the inline binding spells it (`channel_id`,
 * `seq`, `ts_mono_ns`, `flags`, `tick`, `ts_sim_ns`, `ts_send_ns`), the `method` (`obs.frame` from the
 * world, `cmd.frame` from the agent) and `payload_sha256`, the SHA-256 of the payload bytes; in a replay
 * bundle also `payload_b64`. Frames from a stream connection add `binding`. This is awp-sim's body for an
 * inline frame. A hub log's frames start with their number `n` in the log (frame-refs.ts).
 */
import { FLAGS_SEMANTIC, type FrameHeader } from '../protocol/frame.js';
import { sha256Hex } from './record.js';
import { setOwn } from './redact.js';

export type FrameMethod = 'obs.frame' | 'cmd.frame';

export interface FrameBody {
  readonly json: string;
  /** UTF-8 bytes of `json`. */
  readonly bytes: number;
  readonly payloadSha256: string;
  readonly channel_id: number;
  /** Payload bytes kept in the body (0 when only the hash is). */
  readonly keptBytes: number;
  readonly payloadBytes: number;
}

/**
 * A binary frame (peeked into `h`). `hashOf` may return a hash already computed for the same buffer (the
 * fan-out hub hashes a frame once for every session that records it).
 */
export function binaryFrameBody(
  method: FrameMethod,
  buf: Uint8Array,
  h: FrameHeader,
  binding: string | undefined,
  keepPayload: boolean,
  payloadSha256?: string,
  n?: number,
): FrameBody {
  const payload = buf.subarray(h.payload_offset, h.payload_offset + h.payload_len);
  let json = `{${n === undefined ? '' : `"n":${n},`}"channel_id":${h.channel_id},"seq":${h.seq},"ts_mono_ns":${h.ts_mono_ns},"flags":${h.flags & FLAGS_SEMANTIC}`;
  if (h.has_tick) json += `,"tick":${h.tick}`;
  if (h.has_ts_sim_ns) json += `,"ts_sim_ns":${h.ts_sim_ns}`;
  if (h.has_ts_send_ns) json += `,"ts_send_ns":${h.ts_send_ns}`;
  if (keepPayload) json += `,"payload_b64":"${Buffer.from(payload).toString('base64')}"`;
  const sha = payloadSha256 ?? sha256Hex(payload);
  json += `,"method":"${method}"`;
  if (binding !== undefined) json += `,"binding":${JSON.stringify(binding)}`;
  json += `,"payload_sha256":"${sha}"}`;
  return {
    json,
    bytes: json.length, // ASCII: numbers, hex, base64 and the binding's name
    payloadSha256: sha,
    channel_id: h.channel_id,
    keptBytes: keepPayload ? h.payload_len : 0,
    payloadBytes: h.payload_len,
  };
}

/** An inline frame's params (already redacted: they are a peer's JSON), as awp-sim records them. */
export function inlineFrameBody(
  method: FrameMethod,
  params: Record<string, unknown>,
  keepPayload: boolean,
): FrameBody {
  const b64 = typeof params.payload_b64 === 'string' ? params.payload_b64 : '';
  const payload = Buffer.from(b64, 'base64');
  const body: Record<string, unknown> = Object.fromEntries(
    Object.entries(params).filter(([k]) => keepPayload || k !== 'payload_b64'),
  );
  const sha = sha256Hex(payload);
  setOwn(body, 'method', method);
  setOwn(body, 'payload_sha256', sha);
  const channel = params.channel_id;
  const json = JSON.stringify(body);
  return {
    json,
    bytes: Buffer.byteLength(json),
    payloadSha256: sha,
    channel_id: typeof channel === 'number' ? channel : -1,
    keptBytes: keepPayload ? payload.length : 0,
    payloadBytes: payload.length,
  };
}
