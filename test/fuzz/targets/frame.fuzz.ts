/**
 * Fuzz target: the binary frame peek and codec (src/protocol/frame.ts) and the change of binding to inline
 * (src/protocol/inline-frame.ts). The input bytes are one binary frame as it arrives on a stream connection.
 *
 * Expected: FrameError (AWP_MALFORMED / AWP_INTEGER_RANGE) for bad bytes, from peekFrame and decodeFrame alike,
 * with the same code. Crashes: any other exception, and a frame peek accepts that does not survive
 * decode -> encode -> decode and decode -> inline -> JSON -> inline unchanged.
 */
import {
  FLAG_KEYFRAME,
  FLAG_RESYNC,
  FrameError,
  createFrameHeader,
  decodeFrame,
  peekFrame,
} from '../../../src/protocol/frame.js';
import { encodeFrame, withFlags } from '../../../src/protocol/frame-encode.js';
import { frameToInline, inlineToFrame } from '../../../src/protocol/inline-frame.js';
import { check } from './check.js';
import { checkSameFrame } from './frame-compare.js';

// One reused header, as the forwarding hot path uses it: stale contents from the last input must not leak.
const header = createFrameHeader();

function frameErrorCode(fn: () => unknown): string | null {
  try {
    fn();
    return null;
  } catch (e) {
    if (e instanceof FrameError) return e.code;
    throw e;
  }
}

export function fuzz(data: Buffer): void {
  const peeked = frameErrorCode(() => peekFrame(data, header));
  const decoded = frameErrorCode(() => decodeFrame(data));
  check(peeked === decoded, `peekFrame says ${peeked ?? 'valid'}, decodeFrame says ${decoded ?? 'valid'}`);
  if (peeked !== null) return;
  check(header.byte_length === data.length, 'a valid frame does not span its input');
  check(header.payload_offset + header.payload_len === data.length, 'payload offset and length disagree');

  const frame = decodeFrame(data);
  check(frame.channel_id === header.channel_id && frame.seq === header.seq, 'decode disagrees with peek');
  // Channel 0 is the control channel: peek passes it through, a sender refuses it (AWP-TRN-005).
  const encoded = frameErrorCode(() => encodeFrame(frame));
  if (frame.channel_id === 0) {
    check(encoded === 'AWP_MALFORMED', 'encodeFrame accepted channel 0');
    return;
  }
  check(encoded === null, `encodeFrame refused a frame decodeFrame accepted (${encoded ?? ''})`);
  checkSameFrame(decodeFrame(encodeFrame(frame)), frame, 'decode -> encode -> decode');

  const inline = JSON.parse(JSON.stringify(frameToInline(frame))) as unknown;
  checkSameFrame(inlineToFrame(inline), frame, 'decode -> inline -> decode');

  const resync = withFlags(data, FLAG_KEYFRAME | FLAG_RESYNC);
  check(
    peekFrame(resync, header).flags === (header.flags | FLAG_KEYFRAME | FLAG_RESYNC),
    'withFlags lost bits',
  );
}
