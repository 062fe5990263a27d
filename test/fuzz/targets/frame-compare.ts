import type { Frame } from '../../../src/protocol/frame.js';
import { check } from './check.js';

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return (
    Buffer.compare(
      Buffer.from(a.buffer, a.byteOffset, a.length),
      Buffer.from(b.buffer, b.byteOffset, b.length),
    ) === 0
  );
}

/** Two frames carry the same facts (payload and vendor values compared by content). */
export function checkSameFrame(a: Frame, b: Frame, what: string): void {
  check(
    a.channel_id === b.channel_id &&
      a.seq === b.seq &&
      a.ts_mono_ns === b.ts_mono_ns &&
      a.flags === b.flags &&
      a.tick === b.tick &&
      a.ts_sim_ns === b.ts_sim_ns &&
      a.ts_send_ns === b.ts_send_ns,
    `${what}: header fields differ`,
  );
  check(bytesEqual(a.payload, b.payload), `${what}: payload differs`);
  check(a.vendor.length === b.vendor.length, `${what}: vendor extension count differs`);
  a.vendor.forEach((v, i) => {
    const w = b.vendor[i]!;
    check(v.type === w.type && bytesEqual(v.value, w.value), `${what}: vendor extension ${i} differs`);
  });
}
