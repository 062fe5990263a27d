/**
 * The hub's upstream subscription while observers come and go (AWP-MA-004: one observer's unsubscribe
 * never takes a channel from another). Through a real edge in front of the demo arm world, its control
 * connection through a relay that holds the world's messages WORLD_DELAY_MS (a world far away): the
 * hub's `obs.unsubscribe` and `obs.subscribe` are in flight for longer than the hub's tick.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { PassThroughRelay, type RelayTransform } from '../harness/pass-through-relay.js';
import type { JsonObject } from '../harness/trace-types.js';
import type { Json, ObserverClient } from './observer-client.js';
import { hubsOf, sleep, startRig, until, type Rig } from './rig.js';

const WORLD_DELAY_MS = 150;
/** Longer than the hub's tick (50 ms), at which it narrows; shorter than WORLD_DELAY_MS. */
const AFTER_NARROW_MS = 80;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The rig, and the relay in front of its world. */
let relay: PassThroughRelay;
/** What the hub sent the world through the relay, in order. */
let toWorld: JsonObject[] = [];

async function rig(): Promise<Rig> {
  const r = await startRig({
    world: { cameraBytes: 1024 },
    upstream: async (url) => {
      toWorld = [];
      const record: RelayTransform = (direction, msg) => {
        if (direction === 'agent-to-world') toWorld.push(msg);
        return msg;
      };
      const started = await PassThroughRelay.start(url, record, { worldDelayMs: WORLD_DELAY_MS });
      cleanups.push(() => started.close());
      relay = started;
      return started.url;
    },
  });
  cleanups.push(() => r.close());
  return r;
}

function channelId(answer: Json, channel: string): number {
  const list = answer.granted as { channel: string; channel_id: number }[];
  const g = list.find((c) => c.channel === channel);
  if (g === undefined) throw new Error(`${channel} not granted: ${JSON.stringify(list)}`);
  return g.channel_id;
}

/** Frames of a granted channel keep arriving (the world still sends it to the hub). */
async function framesFlow(o: ObserverClient, channel_id: number): Promise<void> {
  const first = await o.waitFrame(channel_id, () => true, 3000);
  await o.waitFrame(channel_id, (seq) => seq > first.seq, 3000);
}

/**
 * Three rounds of: observer a on `aChannel`, observer b on state; `race` makes b subscribe proprio while
 * a leaves it and returns b's answer, after which b's proprio frames must flow.
 */
async function rounds(
  aChannel: { channel: string; rate_hz?: number },
  race: (a: ObserverClient, b: ObserverClient) => Promise<Json>,
): Promise<void> {
  const r = await rig();
  for (let round = 0; round < 3; round++) {
    const a = await r.observer({ kind: 'inline', subscribe: [aChannel] });
    const b = await r.observer({ kind: 'inline', subscribe: [{ channel: 'state' }] });
    const answer = await race(a, b);
    expect(answer.error).toBeUndefined();
    await framesFlow(b, channelId(answer.result as Json, 'proprio'));
    a.close();
    b.close();
  }
}

describe('the hub narrows its upstream subscription without taking a channel from anyone', () => {
  it('AWP-MA-004 a subscribe arriving while the hub unsubscribes the channel upstream gets its frames', async () => {
    await rounds({ channel: 'proprio' }, async (a, b) => {
      // a's unsubscribe leaves proprio unneeded: at its next tick the hub unsubscribes it upstream.
      // b asks for proprio before the world's answer to that is back.
      expect((await a.call('obs.unsubscribe', { channels: ['proprio'] })).error).toBeUndefined();
      await sleep(AFTER_NARROW_MS);
      return b.call('obs.subscribe', { channels: [{ channel: 'proprio' }] });
    });
  });

  it('AWP-MA-004 an observer leaving while another re-rates its channel upward does not stop the channel', async () => {
    await rounds({ channel: 'proprio', rate_hz: 10 }, async (a, b) => {
      // b needs proprio at a higher rate than the hub carries: the hub asks the world. a leaves the
      // channel meanwhile, and the hub narrows before the world's answer is back.
      const sub = b.call('obs.subscribe', { channels: [{ channel: 'proprio', rate_hz: 50 }] });
      expect((await a.call('obs.unsubscribe', { channels: ['proprio'] })).error).toBeUndefined();
      return sub;
    });
  });

  it('AWP-MA-004 a channel asked for by an observer that left before the world answered is dropped upstream', async () => {
    const r = await rig();
    const a = await r.observer({ kind: 'inline', subscribe: [{ channel: 'state' }] });
    const b = await r.observer({ kind: 'inline', subscribe: [{ channel: 'state' }] });
    const hub = r.hubs()[0]!;
    expect(hub.grants().has('proprio')).toBe(false);
    // b asks for proprio and leaves while the hub's subscribe is with the world.
    b.send({
      jsonrpc: '2.0',
      id: 'p',
      method: 'obs.subscribe',
      params: { channels: [{ channel: 'proprio' }] },
    });
    await until(() => r.worldSessions().length > 0 && b.log('state').count > 0, 3000, 'b streaming');
    b.close();
    // Nobody needs it once the world granted it: the hub unsubscribes it upstream at its next tick.
    // (Read from what the hub sent, not polled from its grants: they hold proprio for one tick only.)
    const names = (m: JsonObject): unknown => (m.params as { channels?: unknown } | undefined)?.channels;
    await until(
      () => toWorld.some((m) => m.method === 'obs.unsubscribe' && JSON.stringify(names(m)) === '["proprio"]'),
      5000,
      'proprio dropped upstream',
    );
    const asked = toWorld.findIndex(
      (m) => m.method === 'obs.subscribe' && JSON.stringify(names(m)).includes('proprio'),
    );
    const dropped = toWorld.findIndex((m) => m.method === 'obs.unsubscribe');
    expect(asked).toBeGreaterThanOrEqual(0);
    expect(dropped).toBeGreaterThan(asked);
    await until(() => !hub.grants().has('proprio'), 3000, 'the hub no longer carrying proprio');
    expect(a.log('state').count).toBeGreaterThan(0);
  });

  it('a subscribe in flight when the hub loses its world connection is answered once the hub resumes', async () => {
    const r = await rig();
    const b = await r.observer({ kind: 'inline', subscribe: [{ channel: 'state' }] });
    const sub = b.call('obs.subscribe', { channels: [{ channel: 'proprio' }] }, 10_000);
    await sleep(WORLD_DELAY_MS / 3); // the hub's subscribe is with the world
    relay.drop();
    const answer = await sub;
    expect(answer.error).toBeUndefined();
    await framesFlow(b, channelId(answer.result as Json, 'proprio'));
  });

  it("a subscribe of channels the observer already holds leaves the hub's channel index as it is (no rebuild for each of a thousand such requests)", async () => {
    const r = await rig();
    const o = await r.observer({ kind: 'inline', subscribe: [{ channel: 'state' }] });
    const hub = hubsOf(r.edge)[0]!;
    const index = (): unknown => hub['index'];
    await o.waitFrame(o.ids.get('state')!, () => true, 3000);
    const built = index();
    expect(built).not.toBeNull(); // a frame needed it
    const again = await o.call('obs.subscribe', { channels: [{ channel: 'state' }] });
    expect(again.error).toBeUndefined();
    expect(index()).toBe(built);
    // A new channel is a change: the next frame rebuilds the index with it.
    const more = await o.call('obs.subscribe', { channels: [{ channel: 'proprio' }] });
    await framesFlow(o, channelId(more.result as Json, 'proprio'));
    expect(index()).not.toBe(built);
  });
});
