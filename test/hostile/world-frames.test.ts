/**
 * A hostile world behind an observer route (`observers: 'fanout'`): frames on channels it never granted
 * the edge's hub. The edge neither keeps them (they are not a keyframe cache's to hold: memory) nor serves
 * them to an observer that subscribes to the channel later (AWP-OBS-005: that would be historical replay).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { encodeFrame } from '../../src/protocol/frame-encode.js';
import { FLAG_KEYFRAME } from '../../src/protocol/frame.js';
import { hubsOf } from '../fanout/rig.js';
import { ObserverClient } from '../fanout/observer-client.js';
import { AGENT_TOKEN } from '../support/edge.js';
import type { Json } from '../support/awp-client.js';
import { pingOk, sleep, startRig, until, type HostileRig } from './support.js';

let rig: HostileRig | undefined;
const cleanups: (() => void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) c();
  await rig?.close();
  rig = undefined;
});

const STATE = { channel: 'state', channel_id: 1, rate_hz: 10 };
const CAM = { channel: 'cam', channel_id: 2, rate_hz: 10 };

/** The world declares `cam` too, and grants what the hub subscribes to (its complete list, AWP-NEG-004). */
function declareCam(r: HostileRig): void {
  const granted = new Map([['state', STATE]]);
  r.world.responder = (msg: Json) => {
    if (msg.method === 'initialize')
      return {
        protocol_version: '0.1',
        world: { name: 'hostile-test-world', version: '0.0.1' },
        embodiments: [{ id: 'e1', kind: 'test' }],
        observation_channels: [
          { id: 'state', loss_class: 'reliable', modality: 'proprio/json', rate_hz: 10 },
          { id: 'cam', loss_class: 'latest-wins', modality: 'image/raw', rate_hz: 10 },
        ],
        command_channels: [],
      };
    if (msg.method === 'obs.subscribe') {
      for (const c of (msg.params as { channels: { channel: string }[] }).channels)
        if (c.channel === 'cam') granted.set('cam', CAM);
      return { granted: [...granted.values()] };
    }
    return undefined;
  };
}

let tsNs = 1_000_000;
function frame(channel_id: number, seq: number, keyframe: boolean, bytes = 16): Buffer {
  tsNs += 1000;
  return encodeFrame({
    channel_id,
    seq,
    ts_mono_ns: tsNs,
    ts_send_ns: tsNs,
    flags: keyframe ? FLAG_KEYFRAME : 0,
    vendor: [],
    payload: Buffer.alloc(bytes, 7),
  });
}

/** An observer of `state` on the ws stream binding, with the world's stream connection up. */
async function observer(r: HostileRig): Promise<ObserverClient> {
  const o = await ObserverClient.open(r.edge.url('/w'), {
    kind: 'ws',
    credential: AGENT_TOKEN,
    subscribe: [{ channel: 'state' }],
  });
  cleanups.push(() => o.terminate());
  await until(() => r.world.streams.some((s) => !s.closed), 5000, "the hub's stream connection");
  return o;
}

/** Sends a state frame and waits for the observer to have it: everything sent before is in. */
async function barrier(r: HostileRig, o: ObserverClient, seq: number): Promise<void> {
  r.world.sendStream(frame(STATE.channel_id, seq, true));
  await until(() => o.channels.get(STATE.channel_id)?.lastSeq() === seq, 5000, `state frame ${seq}`);
}

describe('hostile world: frames on channels it did not grant', () => {
  it('AWP-OBS-005 a keyframe sent on a channel before it was granted is not served to an observer subscribing later', async () => {
    rig = await startRig({}, {}, { observers: 'fanout' });
    const r = rig;
    declareCam(r);
    const o = await observer(r);
    r.world.sendStream(frame(CAM.channel_id, 1, true)); // not granted: nobody asked for cam
    await barrier(r, o, 1);
    const answer = await o.call('obs.subscribe', { channels: [{ channel: 'cam' }] });
    expect(answer.error).toBeUndefined();
    await sleep(300);
    expect(o.channels.get(CAM.channel_id)?.seq ?? []).toEqual([]);
    // The world's first cam keyframe after the grant is the observer's first.
    r.world.sendStream(frame(CAM.channel_id, 2, true));
    await until(() => o.channels.get(CAM.channel_id)?.lastSeq() === 2, 5000, 'the granted keyframe');
    expect(o.channels.get(CAM.channel_id)!.seq).toEqual([2]);
  }, 30_000);

  it('keyframes on a thousand channel ids never granted are not kept; the granted channel still is, and the edge goes on', async () => {
    rig = await startRig({}, {}, { observers: 'fanout' });
    const r = rig;
    const o = await observer(r);
    await barrier(r, o, 1);
    const hub = hubsOf(r.edge)[0]!;
    const held = (): number => (hub['cache'] as { bytes: number }).bytes;
    const stateBytes = held();
    expect(stateBytes).toBeGreaterThan(0); // the state keyframe: a late joiner starts on it
    for (let id = 100; id < 1100; id++) r.world.sendStream(frame(id, 1, true, 64 * 1024));
    await barrier(r, o, 2);
    expect(held()).toBe(stateBytes);
    const late = await observer(r);
    await until(() => (late.channels.get(STATE.channel_id)?.count ?? 0) > 0, 5000, 'the cached keyframe');
    expect(late.channels.get(STATE.channel_id)!.seq).toEqual([2]);
    await pingOk(r.bystander);
  }, 30_000);
});
