/**
 * A relay agent on the edge's `webtransport` endpoint while the world (the demo arm world) offers only
 * `ws` stream connections: the edge translates frame by frame, the world's bytes unchanged, one
 * WebTransport stream per channel toward the agent, one `ws` message per frame toward the world.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoWorld, type RunningDemoWorld } from '../../src/demo/index.js';
import { FLAG_KEYFRAME, FLAG_RESYNC } from '../../src/protocol/frame.js';
import { encodeFrame } from '../../src/protocol/frame-encode.js';
import { AwpClient, initializeParams, type Json } from '../support/awp-client.js';
import { AGENT_TOKEN } from '../support/edge.js';
import { sleep, startWtEdge, until, WtAgent, type WtEdge } from './support.js';

let world: RunningDemoWorld;
let edge: WtEdge;
const controls: AwpClient[] = [];
/** Digests of every binary frame the world encoded for a `ws` stream connection. */
const worldSent = new Set<string>();
/** Every binary message the world received on a stream connection. */
const worldReceived: Buffer[] = [];

const digest = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

beforeAll(async () => {
  world = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0, cameraBytes: 4096 });
  // Observe the real world's wire, without changing what it does.
  const w = world.world;
  const encode = w.encodeFrame.bind(w);
  w.encodeFrame = (o, now) => {
    const out = encode(o, now);
    if (typeof out !== 'string') worldSent.add(digest(out));
    return out;
  };
  const receive = w.receiveBinary.bind(w);
  w.receiveBinary = (conn, data, now) => {
    if (w.streams.has(conn)) worldReceived.push(Buffer.from(data));
    return receive(conn, data, now);
  };
  edge = await startWtEdge([{ path: '/arm', upstream: world.url }]);
});

afterAll(async () => {
  for (const c of controls) c.close();
  await edge.close();
  await world.close();
});

interface Opened {
  control: AwpClient;
  ready: Json;
  ids: Map<string, number>;
  wt: string;
}

/** Runs `f` with an acting agent's session, closed afterwards whatever happens (the embodiment is freed). */
async function withAgent(f: (a: Opened) => Promise<void>): Promise<void> {
  const a = await actingAgent();
  try {
    await f(a);
  } finally {
    if (a.control.closed === null) await a.control.call('session.close', {}).catch(() => undefined);
  }
}

async function actingAgent(): Promise<Opened> {
  const control = await AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN });
  controls.push(control);
  await control.ok('initialize', initializeParams());
  const ready = await control.ok('session.open', {
    embodiment: 'arm_01',
    mode: 'streaming',
    subscribe: [{ channel: 'proprio' }, { channel: 'camera' }, { channel: 'state' }],
  });
  const grants = (ready.granted as { channels: { channel: string; channel_id: number }[] }).channels;
  const endpoints = ready.stream_endpoints as { binding: string; url?: string }[];
  expect(endpoints.map((e) => e.binding)).toEqual(['webtransport', 'ws', 'inline']);
  return {
    control,
    ready,
    ids: new Map(grants.map((g) => [g.channel, g.channel_id])),
    wt: endpoints[0]!.url!,
  };
}

function frame(channel_id: number, seq: number, payload: string): Buffer {
  return encodeFrame({
    channel_id,
    seq,
    ts_mono_ns: 1_000 + seq,
    flags: FLAG_KEYFRAME,
    vendor: [],
    payload: Buffer.from(payload),
  });
}

describe('webtransport relay endpoint (world on ws)', () => {
  it('AWP-TRN-012 AWP-TRN-013 the agent gets the world frames unchanged, a stream per channel, each starting with a resync keyframe', async () => {
    await withAgent(async (a) => {
      const agent = await WtAgent.connect(a.wt, a.ready.session_token as string, edge.cert.hash);
      const ids = [...a.ids.values()];
      await agent.waitFrames(ids, 5);
      for (const id of ids) {
        const frames = agent.frames.get(id)!;
        expect(frames[0]!.flags & (FLAG_KEYFRAME | FLAG_RESYNC)).toBe(FLAG_KEYFRAME | FLAG_RESYNC);
        for (let i = 1; i < frames.length; i++) expect(frames[i]!.seq).toBeGreaterThan(frames[i - 1]!.seq);
        // Byte for byte what the world wrote on its ws stream connection; except that when the world's
        // resync keyframe was replaced by a newer one while the stream opened, that one carries resync.
        frames.forEach((f, i) => {
          if (worldSent.has(digest(f.buf))) return;
          expect(i).toBe(0);
          const unmarked = Buffer.from(f.buf);
          unmarked[5] = unmarked[5]! & ~FLAG_RESYNC;
          expect(worldSent.has(digest(unmarked))).toBe(true);
        });
      }
      expect(agent.streamChannels.length).toBe(ids.length);
      for (const set of agent.streamChannels) expect(set.size).toBe(1);
      agent.close();
    });
  });

  it('AWP-TRN-013 command frames written back to back on an agent stream reach the world one ws message each', async () => {
    await withAgent(async (a) => {
      const agent = await WtAgent.connect(a.wt, a.ready.session_token as string, edge.cert.hash);
      const sent = [frame(9, 1, '{"a":1}'), frame(9, 2, '{"a":2}'), frame(9, 3, '{"a":3}')];
      const split = frame(9, 4, '{"split":"across two writes"}');
      const from = worldReceived.length;
      // Three frames in one write, then one frame cut across two writes.
      await agent.sendOnNewStream(Buffer.concat(sent), split.subarray(0, 11), split.subarray(11));
      await until(() => worldReceived.length >= from + 4, 5000, 'the frames at the world');
      expect(worldReceived.slice(from).map((b) => b.toString('hex'))).toEqual(
        [...sent, split].map((b) => b.toString('hex')),
      );
      // The stream connection is still up: frames keep coming.
      const before = agent.frames.get(a.ids.get('proprio')!)?.length ?? 0;
      await sleep(100);
      expect(agent.frames.get(a.ids.get('proprio')!)!.length).toBeGreaterThan(before);
      agent.close();
    });
  });

  it('a command frame in a datagram reaches the world as one ws message; a malformed one closes with AWP_MALFORMED', async () => {
    await withAgent(async (a) => {
      const agent = await WtAgent.connect(a.wt, a.ready.session_token as string, edge.cert.hash);
      const sent = [frame(9, 1, '{"d":1}'), frame(9, 2, '{"d":2}')];
      const from = worldReceived.length;
      await agent.sendDatagrams(...sent);
      await until(() => worldReceived.length >= from + 2, 5000, 'the datagram frames at the world');
      expect(worldReceived.slice(from).map((b) => b.toString('hex'))).toEqual(
        sent.map((b) => b.toString('hex')),
      );
      // Two frames in one datagram is not one frame.
      await agent.sendDatagrams(Buffer.concat(sent));
      expect(await agent.waitClosed()).toEqual({ closeCode: 1002, reason: 'AWP_MALFORMED' });
      expect(worldReceived.length).toBe(from + 2);
    });
  });

  it('AWP-TRN-013 AWP-DAT-010 a malformed frame closes the stream connection with 1002 AWP_MALFORMED; the agent may reconnect (AWP-TRN-010)', async () => {
    await withAgent(async (a) => {
      const token = a.ready.session_token as string;
      const agent = await WtAgent.connect(a.wt, token, edge.cert.hash);
      await agent.waitFrames([a.ids.get('proprio')!], 1);
      const streamsBefore = world.world.streams.size;
      const bad = frame(9, 1, 'x');
      bad[5] = 0x08; // resync without keyframe
      await agent.sendOnNewStream(bad);
      expect(await agent.waitClosed()).toEqual({ closeCode: 1002, reason: 'AWP_MALFORMED' });
      // Both hops are closed; the malformed frame never reached the world.
      await until(
        () => world.world.streams.size === streamsBefore - 1,
        5000,
        'the world stream connection to close',
      );
      expect(worldReceived.some((b) => b.equals(bad))).toBe(false);
      // Garbage that is not even a frame header.
      const again = await WtAgent.connect(a.wt, token, edge.cert.hash);
      await again.sendOnNewStream(Buffer.from('GET / HTTP/1.1\r\n\r\n'));
      expect(await again.waitClosed()).toEqual({ closeCode: 1002, reason: 'AWP_MALFORMED' });
      // A new stream connection restarts every channel with a resync keyframe.
      const third = await WtAgent.connect(a.wt, token, edge.cert.hash);
      await third.waitFrames([...a.ids.values()], 1);
      for (const id of a.ids.values()) {
        expect(third.frames.get(id)![0]!.flags & (FLAG_KEYFRAME | FLAG_RESYNC)).toBe(
          FLAG_KEYFRAME | FLAG_RESYNC,
        );
      }
      third.close();
    });
  });

  it('AWP-TRN-013 a bad token is refused, and the stream connection ends with its control session', async () => {
    await withAgent(async (a) => {
      await expect(WtAgent.connect(a.wt, 'not-a-session-token', edge.cert.hash)).rejects.toThrow();
      // The agent's own credential is not a session token.
      await expect(WtAgent.connect(a.wt, AGENT_TOKEN, edge.cert.hash)).rejects.toThrow();
      const agent = await WtAgent.connect(a.wt, a.ready.session_token as string, edge.cert.hash);
      await agent.waitFrames([a.ids.get('proprio')!], 1);
      await a.control.ok('session.close', {});
      const info = await agent.waitClosed();
      expect(info.closeCode).toBe(1000);
      await expect(WtAgent.connect(a.wt, a.ready.session_token as string, edge.cert.hash)).rejects.toThrow();
    });
  });
});
