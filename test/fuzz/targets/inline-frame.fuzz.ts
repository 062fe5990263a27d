/**
 * Fuzz target: inline frames (`obs.frame` / `cmd.frame` params, src/protocol/inline-frame.ts), with the vendor
 * extension names a channel declaration gives. The input is UTF-8 JSON: either the params themselves, or
 * `{"channel": <channel declaration>, "params": <params>}`.
 *
 * Expected: FrameError for params that are not a valid inline frame (and from frameToInline when two vendor TLVs
 * map to one field). Crashes: any other exception, and a frame inlineToFrame accepts that does not survive
 * encode -> decode and frameToInline -> inlineToFrame unchanged.
 */
import { FrameError, decodeFrame } from '../../../src/protocol/frame.js';
import { encodeFrame } from '../../../src/protocol/frame-encode.js';
import { frameToInline, inlineToFrame, vendorExtensionNames } from '../../../src/protocol/inline-frame.js';
import { checkSameFrame } from './frame-compare.js';

function expectFrameError(e: unknown): void {
  if (!(e instanceof FrameError)) throw e;
}

export function fuzz(data: Buffer): void {
  let value: unknown;
  try {
    value = JSON.parse(data.toString('utf8'));
  } catch {
    return; // not JSON: never reaches the inline codec (parseMessage answers it)
  }
  let params: unknown = value;
  let channel: unknown = undefined;
  if (typeof value === 'object' && value !== null && 'params' in value && 'channel' in value) {
    params = value.params;
    channel = value.channel;
  }
  const names = vendorExtensionNames(channel);
  let frame;
  try {
    frame = inlineToFrame(params, names);
  } catch (e) {
    expectFrameError(e);
    return;
  }
  checkSameFrame(decodeFrame(encodeFrame(frame)), frame, 'inline -> encode -> decode');
  let inline;
  try {
    inline = frameToInline(frame, names);
  } catch (e) {
    expectFrameError(e);
    return;
  }
  checkSameFrame(
    inlineToFrame(JSON.parse(JSON.stringify(inline)), names),
    frame,
    'inline -> frame -> inline',
  );
}
