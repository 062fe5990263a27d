/**
 * Issue 13: a relay agent's stream connection through three tiers of edges (world <- C <- B <- A). The
 * leaf hands out its own `ws` endpoint; each tier bridges the stream to the one below with its own session
 * token. Frames arrive on the stream only, each channel in seq order from a resync keyframe, the reliable
 * channel without a gap; when the stream drops, the world's channel_degraded event crosses the tiers to
 * the agent and nothing falls back inline; a new stream connection restarts with resync.
 */
import { describe, expect, it } from 'vitest';
import { FLAG_KEYFRAME, FLAG_RESYNC, peekFrame } from '../../src/protocol/frame.js';
import { AwpClient } from '../support/awp-client.js';
import { LaggingAgent, sleep, startArmWorld, until, useCleanups } from '../scale/rig.js';
import { startTiers } from './rig.js';

const RESYNC = FLAG_RESYNC | FLAG_KEYFRAME;

describe('edges in front of edges: a relay agent’s stream connection (issue 13)', () => {
  const cleanup = useCleanups();

  it('AWP-TRN-012 AWP-TRN-010 AWP-DAT-001 frames through three bridges: resync first, in order, no inline while the stream is up or down', async () => {
    const world = await startArmWorld(cleanup);
    const rig = await startTiers(cleanup, world.url);
    const agent = await LaggingAgent.connect(rig.leaf.url());
    cleanup(() => agent.close());
    const ready = await agent.ok('session.open', {
      embodiment: 'arm_01',
      mode: 'streaming',
      subscribe: [{ channel: 'state' }, { channel: 'proprio', rate_hz: 20 }],
    });
    const grants = (ready.granted as { channels: { channel: string; channel_id: number }[] }).channels;
    const stateId = grants.find((g) => g.channel === 'state')!.channel_id;
    const endpoint = (ready.stream_endpoints as { binding: string; url?: string }[]).find(
      (e) => e.binding === 'ws',
    );
    expect(endpoint?.url).toBe(`${rig.leaf.url()}/stream`);

    const stream = await AwpClient.connect(
      endpoint!.url!,
      { credential: ready.session_token as string },
      10_000,
    );
    cleanup(() => stream.close());
    await until(() => stream.binary.length >= 30, 10_000, 'frames on the stream');
    await sleep(200);
    const inlineMark = agent.received.length;
    await sleep(500);
    expect(agent.received.slice(inlineMark).filter((m) => m.method === 'obs.frame')).toHaveLength(0);

    const byChannel = new Map<number, { seq: number; flags: number }[]>();
    for (const buf of stream.binary) {
      const h = peekFrame(buf);
      byChannel.set(h.channel_id, [...(byChannel.get(h.channel_id) ?? []), { seq: h.seq, flags: h.flags }]);
    }
    expect([...byChannel.keys()].sort()).toEqual(grants.map((g) => g.channel_id).sort());
    for (const [id, frames] of byChannel) {
      expect(frames[0]!.flags & RESYNC, `channel ${id} starts on a resync keyframe`).toBe(RESYNC);
      for (let i = 1; i < frames.length; i++)
        expect(frames[i]!.seq, `channel ${id}`).toBeGreaterThan(frames[i - 1]!.seq);
    }
    const state = byChannel.get(stateId)!;
    for (let i = 1; i < state.length; i++) expect(state[i]!.seq, 'state: no gap').toBe(state[i - 1]!.seq + 1);

    // The stream drops, control stays: the world's report crosses every tier; nothing comes inline.
    stream.drop();
    const mark = agent.received.length;
    const degraded = await agent.waitNotification(
      'world.event',
      (p) => p.event === 'channel_degraded',
      10_000,
      mark,
    );
    expect(degraded.detail).toMatchObject({ channel: 'state' });
    expect(agent.received.slice(mark).filter((m) => m.method === 'obs.frame')).toHaveLength(0);
    const again = await AwpClient.connect(
      endpoint!.url!,
      { credential: ready.session_token as string },
      10_000,
    );
    cleanup(() => again.close());
    await until(() => again.binary.length > 0, 10_000, 'frames on the new stream');
    expect(peekFrame(again.binary[0]!).flags & FLAG_RESYNC).toBe(FLAG_RESYNC);
  });
});
