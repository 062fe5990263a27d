/**
 * A WebTransport peer that opens many streams and leaves a frame unfinished on each (a valid header
 * announcing a large payload, part of the payload, never the rest). The edge reads eagerly, so flow
 * control never stops the peer, and the library allows some 200 incoming streams per session: before,
 * each stream held its partial frame up to the frame size limit, about 200 x max_frame_bytes per session.
 * Now a relay agent's unfinished frames are bounded across its streams (past the bound: closed 1009, as
 * a frame too large is), and an observer's frames (it has no command channels) are checked by their
 * header and dropped as they arrive, never held.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WritableStreamDefaultWriter } from 'node:stream/web';
import { startDemoWorld, type RunningDemoWorld } from '../../src/demo/index.js';
import { encodeFrame } from '../../src/protocol/frame-encode.js';
import { FLAG_KEYFRAME } from '../../src/protocol/frame.js';
import { AwpClient, initializeParams, type Json } from '../support/awp-client.js';
import { AGENT_TOKEN } from '../support/edge.js';
import { sleep, startWtEdge, until, WtAgent, type WtEdge } from '../webtransport/support.js';
import { gc } from './support.js';

const MiB = 1024 * 1024;
/** The edge's frame size limit here (transport.max_message_bytes): 1 MiB. */
const MAX_FRAME = MiB;
/** transport.max_queued_bytes: below one frame of the largest size. */
const MAX_QUEUED = 64 * 1024;

let world: RunningDemoWorld;
let edge: WtEdge;
const controls: AwpClient[] = [];
/** Sizes of the binary messages the world received on its stream connections. */
const worldReceived: number[] = [];

beforeAll(async () => {
  world = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0 });
  const w = world.world;
  const receive = w.receiveBinary.bind(w);
  w.receiveBinary = (conn, data, now) => {
    if (w.streams.has(conn)) worldReceived.push(data.byteLength);
    return receive(conn, data, now);
  };
  edge = await startWtEdge([{ path: '/arm', upstream: world.url }], {
    transport: { max_message_bytes: MAX_FRAME, max_queued_bytes: MAX_QUEUED },
  });
});

afterAll(async () => {
  for (const c of controls) c.close();
  await edge.close();
  await world.close();
});

/** A session on the demo arm: an acting agent's (relayed) with an embodiment, else an observer's. */
async function session(embodiment?: string): Promise<{ control: AwpClient; agent: WtAgent }> {
  const control = await AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN });
  controls.push(control);
  await control.ok('initialize', initializeParams());
  const ready: Json = await control.ok('session.open', {
    ...(embodiment !== undefined ? { embodiment } : {}),
    mode: 'streaming',
    subscribe: [{ channel: 'proprio' }],
  });
  const endpoints = ready.stream_endpoints as { binding: string; url?: string }[];
  const wt = endpoints.find((e) => e.binding === 'webtransport')!.url!;
  const agent = await WtAgent.connect(wt, ready.session_token as string, edge.cert.hash, 10_000);
  return { control, agent };
}

/** A valid frame header announcing `payloadLen` bytes of payload. */
function header(payloadLen: number): Buffer {
  const h = encodeFrame({
    channel_id: 9,
    seq: 1,
    ts_mono_ns: 1_000,
    flags: FLAG_KEYFRAME,
    vendor: [],
    payload: Buffer.alloc(0),
  });
  h.writeUInt32LE(payloadLen, 24);
  return h;
}

/**
 * Opens `streams` streams; on each, a header announcing `announced` payload bytes, then `sent` of them
 * (64 KiB writes). The streams stay open; their writers are returned. Writes the session's close cut
 * short settle too.
 */
async function partialFrames(
  agent: WtAgent,
  streams: number,
  announced: number,
  sent: number,
): Promise<WritableStreamDefaultWriter<Uint8Array>[]> {
  const chunk = Buffer.alloc(64 * 1024, 7);
  const writers: WritableStreamDefaultWriter<Uint8Array>[] = [];
  await Promise.allSettled(
    Array.from({ length: streams }, async () => {
      const w = (await agent.session.createUnidirectionalStream()).getWriter();
      writers.push(w);
      await w.write(header(announced));
      for (let at = 0; at < sent; at += chunk.length) await w.write(chunk.subarray(0, sent - at));
    }),
  );
  return writers;
}

describe('webtransport: unfinished frames across many streams', () => {
  it("a relay agent's unfinished frames are bounded across its streams: past the bound, closed 1009", async () => {
    const { control, agent } = await session('arm_01');
    try {
      // One frame of the largest size still goes through, though it is above max_queued_bytes.
      const big = encodeFrame({
        channel_id: 9,
        seq: 1,
        ts_mono_ns: 1_000,
        flags: FLAG_KEYFRAME,
        vendor: [],
        payload: Buffer.alloc(MAX_FRAME - 1024, 1),
      });
      const from = worldReceived.length;
      await agent.sendOnNewStream(big);
      await until(
        () => worldReceived.slice(from).includes(big.length),
        20_000,
        'the large frame at the world',
      );
      expect(agent.closeInfo).toBeNull();
      // Eight streams, each a frame of 900 KiB short of its end by more than half: 2 MiB held in all,
      // each stream well within the frame size limit.
      void partialFrames(agent, 8, 900 * 1024, 256 * 1024);
      expect(await agent.waitClosed(30_000)).toEqual({
        closeCode: 1009,
        reason: 'frame exceeds max_frame_bytes',
      });
    } finally {
      agent.close();
      await control.call('session.close', {}).catch(() => undefined);
    }
  }, 90_000);

  it("an observer's frames are checked by their header and dropped, never held; a truncated one is still malformed", async () => {
    const { control, agent } = await session();
    try {
      // A whole valid frame is ignored, as on the observer's `ws` stream connection.
      await agent.sendOnNewStream(
        encodeFrame({
          channel_id: 9,
          seq: 1,
          ts_mono_ns: 1_000,
          ts_send_ns: 2_000,
          flags: FLAG_KEYFRAME,
          vendor: [],
          payload: Buffer.alloc(200_000, 3),
        }),
      );
      gc();
      await sleep(200);
      gc();
      const before = process.memoryUsage().arrayBuffers;
      // 40 streams with 896 KiB of a 1000 KiB frame each: 35 MiB the edge held before.
      const streams = 40;
      const sent = 896 * 1024;
      const writers = await partialFrames(agent, streams, 1000 * 1024, sent);
      expect(agent.closeInfo).toBeNull();
      await sleep(500);
      gc();
      await sleep(200);
      gc();
      const grown = process.memoryUsage().arrayBuffers - before;
      expect(grown, `${(grown / MiB).toFixed(1)} MiB held`).toBeLessThan((streams * sent) / 4);
      // The session is up and carrying frames.
      const count = () => [...agent.frames.values()].reduce((n, l) => n + l.length, 0);
      const seen = count();
      await until(() => count() > seen, 10_000, 'more frames on the observer session');
      expect(agent.closeInfo).toBeNull();
      // A stream that ends inside a frame still ends the session as a malformed frame (AWP-DAT-010).
      await writers[0]!.close().catch(() => undefined);
      expect(await agent.waitClosed(30_000)).toEqual({ closeCode: 1002, reason: 'AWP_MALFORMED' });
    } finally {
      agent.close();
      await control.call('session.close', {}).catch(() => undefined);
    }
  }, 90_000);
});
