/**
 * Observers over the edge's `webtransport` endpoint (served by the route's hub), in front of the demo
 * arm world: per-channel streams, each starting with a resync keyframe; a stalled channel holding back
 * nobody else; authentication and refusals like the `ws` endpoint's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoWorld, type RunningDemoWorld } from '../../src/demo/index.js';
import { FLAG_KEYFRAME, FLAG_RESYNC, createFrameHeader, peekFrame } from '../../src/protocol/frame.js';
import { AwpClient, initializeParams, type Json } from '../support/awp-client.js';
import { AGENT_TOKEN } from '../support/edge.js';
import { RawWtClient, type RawStream } from './raw-h2-client.js';
import { sleep, startWtEdge, until, WtAgent, type WtEdge } from './support.js';

let world: RunningDemoWorld;
let edge: WtEdge;
const controls: AwpClient[] = [];

beforeAll(async () => {
  world = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0 });
  edge = await startWtEdge([{ path: '/arm', upstream: world.url }]);
});

afterAll(async () => {
  for (const c of controls) c.close();
  await edge.close();
  await world.close();
});

interface Endpoint {
  binding: string;
  url?: string;
}

/** An observer's control connection and session (no embodiment: served by the hub). */
async function observer(
  channels: string[],
): Promise<{ control: AwpClient; ready: Json; ids: Map<string, number>; wt: string }> {
  const control = await AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN });
  controls.push(control);
  await control.ok('initialize', initializeParams());
  const ready = await control.ok('session.open', {
    mode: 'streaming',
    subscribe: channels.map((channel) => ({ channel })),
  });
  const grants = (ready.granted as { channels: { channel: string; channel_id: number }[] }).channels;
  const endpoints = ready.stream_endpoints as Endpoint[];
  return {
    control,
    ready,
    ids: new Map(grants.map((g) => [g.channel, g.channel_id])),
    wt: endpoints.find((e) => e.binding === 'webtransport')!.url!,
  };
}

describe('webtransport observer endpoint', () => {
  it('AWP-TRN-004 AWP-ROB-006 offers webtransport first, then ws, inline last', async () => {
    const o = await observer(['proprio']);
    const endpoints = o.ready.stream_endpoints as Endpoint[];
    expect(endpoints.map((e) => e.binding)).toEqual(['webtransport', 'ws', 'inline']);
    const port = new URL(endpoints[0]!.url!).port;
    expect(endpoints[0]!.url).toBe(`https://127.0.0.1:${port}/arm/stream`);
    expect(Number(port)).not.toBe(edge.edge.port);
    await o.control.ok('session.close', {});
  });

  it('AWP-TRN-012 frames arrive on one stream per channel, each starting with a keyframe carrying resync', async () => {
    const o = await observer(['proprio', 'camera', 'state']);
    const agent = await WtAgent.connect(o.wt, o.ready.session_token as string, edge.cert.hash);
    expect(agent.session.protocol).toBe('awp');
    const ids = [...o.ids.values()];
    await agent.waitFrames(ids, 5);
    for (const id of ids) {
      const frames = agent.frames.get(id)!;
      expect(frames[0]!.flags & (FLAG_KEYFRAME | FLAG_RESYNC)).toBe(FLAG_KEYFRAME | FLAG_RESYNC);
      // Strictly increasing seq on the channel (AWP-DAT-001), all on one stream.
      for (let i = 1; i < frames.length; i++) expect(frames[i]!.seq).toBeGreaterThan(frames[i - 1]!.seq);
      expect(new Set(frames.map((f) => f.stream)).size).toBe(1);
    }
    // One channel per stream, a stream per channel.
    expect(agent.streamChannels.length).toBe(ids.length);
    for (const set of agent.streamChannels) expect(set.size).toBe(1);
    // Nothing comes inline any more (AWP-TRN-012).
    const before = o.control.received.filter((m) => m.method === 'obs.frame').length;
    await sleep(200);
    expect(o.control.received.filter((m) => m.method === 'obs.frame').length).toBe(before);
    agent.close();
    await o.control.ok('session.close', {});
  });

  it('AWP-ROB-006 a stalled channel stream does not delay another channel (independent flow control)', async () => {
    const o = await observer(['proprio', 'camera']);
    const camera = o.ids.get('camera')!;
    const header = createFrameHeader();
    const streamOf = new Map<number, RawStream>();
    const classified = new Set<RawStream>();
    const client = await RawWtClient.connect(o.wt, edge.cert.cert, {
      // The Authorization header (clients that can set one), rather than the protocol list.
      authorization: `Bearer ${o.ready.session_token as string}`,
      protocols: ['awp'],
      onData: (s, c) => {
        if (classified.has(s) || s.received < 8) return;
        classified.add(s);
        const id = Buffer.concat(s.chunks).readUInt16LE(6); // channel_id of the stream's first frame
        streamOf.set(id, s);
        // The camera's stream gets no credit beyond the initial window: its reader has stalled.
        if (id !== camera) c.grant(s.id, 1 << 30);
      },
    });
    expect(client.status).toBe(200);
    client.grantSession(1 << 30);
    await until(() => streamOf.size === 2, 5000, 'both channel streams');
    const proprio = streamOf.get(o.ids.get('proprio')!)!;
    const cam = streamOf.get(camera)!;
    // The camera is held at the window the receiver granted; proprio keeps flowing at its rate.
    await sleep(300);
    const stalledAt = cam.received;
    const framesOf = (st: RawStream) => splitFrames(Buffer.concat(st.chunks));
    const p0 = framesOf(proprio).length;
    const t0 = performance.now();
    await sleep(1000);
    expect(cam.received).toBe(stalledAt);
    expect(cam.received).toBeLessThan(64 * 1024); // not even one whole camera frame got through
    const proprioHz = (framesOf(proprio).length - p0) / ((performance.now() - t0) / 1000);
    expect(proprioHz).toBeGreaterThan(50); // granted 100 Hz: unaffected by the stalled channel
    // Release the camera: what waited was replaced by newer frames, not queued (latest-wins).
    client.grant(cam.id, 1 << 30);
    await until(() => framesOf(cam).length >= 12, 5000, 'camera frames after release');
    const frames = framesOf(cam);
    expect(peekFrame(frames[0]!, header).flags & (FLAG_KEYFRAME | FLAG_RESYNC)).toBe(
      FLAG_KEYFRAME | FLAG_RESYNC,
    );
    const seqs = frames.map((f) => peekFrame(f, header).seq);
    const jumps = seqs.slice(1).map((q, i) => q - seqs[i]!);
    expect(Math.min(...jumps)).toBeGreaterThan(0);
    // ~40 frames were produced while it stalled: what reached the stream before the stall, then the newest.
    expect(Math.max(...jumps)).toBeGreaterThan(10);
    client.close();
    await o.control.ok('session.close', {});
  });

  it('AWP-TRN-013 a session token naming no live session, or none at all, is refused', async () => {
    const o = await observer(['proprio']);
    const refused = async (token: string | undefined, protocols = ['awp']) => {
      const c = await RawWtClient.connect(o.wt, edge.cert.cert, {
        protocols,
        ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}),
      });
      c.close();
      return c.status;
    };
    expect(await refused('made-up-token')).toBe(401);
    expect(await refused(undefined)).toBe(401);
    expect(await refused(o.ready.session_token as string, [])).toBe(400); // no "awp" offered
    // The library's client sees a refused handshake.
    await expect(WtAgent.connect(o.wt, 'made-up-token', edge.cert.hash)).rejects.toThrow();
    // A URL carrying a credential is refused before anything else (AWP-SEC-006).
    const c = await RawWtClient.connect(`${o.wt}?access_token=x`, edge.cert.cert, {
      protocols: ['awp'],
      authorization: `Bearer ${o.ready.session_token as string}`,
    });
    c.close();
    expect(c.status).toBe(400);
    // Once the control connection is gone the token no longer opens a stream connection.
    o.control.drop();
    await sleep(100);
    expect(await refused(o.ready.session_token as string)).toBe(401);
    // Counted with the edge's other refusals.
    const metrics = await (await fetch(`${edge.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/awp_edge_rejections_total\{route="r0",reason="stream_unauthorized"\} [3-9]/);
    expect(metrics).toMatch(/awp_edge_rejections_total\{route="r0",reason="credential_in_url"\} 1/);
  });

  it('AWP-TRN-013 AWP-DAT-010 a malformed frame from the observer closes the session with 1002 AWP_MALFORMED', async () => {
    const o = await observer(['proprio']);
    const client = await RawWtClient.connect(o.wt, edge.cert.cert, {
      protocols: ['awp', `awp.bearer.${o.ready.session_token as string}`],
    });
    expect(client.status).toBe(200);
    client.sendUni(Buffer.from('AWPX not a frame at all'));
    expect(await client.waitClosed()).toEqual({ code: 1002, reason: 'AWP_MALFORMED' });
    client.close();
    await o.control.ok('session.close', {});
  });
});

function splitFrames(bytes: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let at = 0;
  while (bytes.length - at >= 28) {
    const hasExt = (bytes[at + 5]! & 0x04) !== 0;
    if (hasExt && bytes.length - at < 30) break;
    const len = 28 + (hasExt ? 2 + bytes.readUInt16LE(at + 28) : 0) + bytes.readUInt32LE(at + 24);
    if (bytes.length - at < len) break;
    out.push(bytes.subarray(at, at + len));
    at += len;
  }
  return out;
}
