/**
 * The hub's upstream grants (src/fanout/hub-upstream.ts) against a world that runs the hub's requests in
 * the order they were sent and answers them in any order, some with errors. What the hub holds as granted
 * is what observers are told they will get (AWP-MA-004: one observer's unsubscribe never takes a channel
 * from another), so it must never name a channel the world stops once it has run what was sent.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HubUpstream, type HubUpstreamEffect } from '../../src/fanout/hub-upstream.js';
import { params } from './arbitraries.js';

const CHANNELS = ['proprio', 'camera', 'state'] as const;
const IDS: Record<string, number> = { proprio: 1, camera: 2, state: 3 };
const MANIFEST = {
  protocol_version: '0.1',
  world: { name: 'w', version: '1', vendor: 'v' },
  time_models: ['streaming'],
  embodiments: [],
  observation_channels: CHANNELS.map((id) => ({
    id,
    modality: 'proprio/json',
    rate_hz: 10,
    loss_class: 'latest-wins',
    schema: {},
  })),
  action_schemas: [],
  safety_policy: { envelopes: [] },
};

/** A subscribe or unsubscribe the world may refuse; an answer handed to the hub. */
type Step =
  { s: 'subscribe' | 'unsubscribe'; channels: string[]; refuse: boolean } | { s: 'answer'; pick: number };

const channelSet = fc.subarray([...CHANNELS], { minLength: 1 });
const refuse = fc.integer({ min: 0, max: 5 }).map((n) => n === 0);
const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    s: fc.constantFrom('subscribe' as const, 'unsubscribe' as const),
    channels: channelSet,
    refuse,
  }),
  fc.record({ s: fc.constant('answer' as const), pick: fc.nat() }),
);

interface Sent {
  readonly id: unknown;
  readonly method: string;
  readonly params: { channels?: unknown[] };
}

/**
 * A world holding the hub's subscription. It runs each request when it arrives (in order); its answer,
 * taken then, reaches the hub whenever `deliver` picks it.
 */
class OrderedWorld {
  readonly channels = new Set<string>(['proprio']);
  readonly unanswered: { id: unknown; body: unknown }[] = [];
  errors = 0;

  receive(effects: readonly HubUpstreamEffect[], refuse = false): void {
    for (const e of effects) {
      if (e.kind !== 'send') continue;
      const m = JSON.parse(e.text) as Sent;
      if (!('id' in m) || m.id === undefined) continue;
      const names = (m.params.channels ?? []).map((c) =>
        typeof c === 'string' ? c : (c as { channel: string }).channel,
      );
      if (refuse) {
        this.errors++;
        this.unanswered.push({ id: m.id, body: { error: { code: 2007, message: 'refused' } } });
        continue;
      }
      if (m.method === 'obs.subscribe') for (const n of names) this.channels.add(n);
      if (m.method === 'obs.unsubscribe') for (const n of names) this.channels.delete(n);
      this.unanswered.push({ id: m.id, body: { result: this.answerTo(m.method) } });
    }
  }

  private answerTo(method: string): unknown {
    const granted = [...this.channels].map((c) => ({ channel: c, rate_hz: 10, channel_id: IDS[c] }));
    switch (method) {
      case 'initialize':
        return MANIFEST;
      case 'session.open':
        return { session_id: 's', session_token: 'T', granted: { channels: granted }, stream_endpoints: [] };
      case 'ping':
        return { origin_ns: 0, receive_ns: 1, transmit_ns: 1 };
      default:
        return { granted };
    }
  }

  /** Hands the hub one answer; returns what the hub sent in reply (run by the world right away). */
  deliver(up: HubUpstream, pick: number, now: number): HubUpstreamEffect[] {
    if (this.unanswered.length === 0) return [];
    const [a] = this.unanswered.splice(pick % this.unanswered.length, 1);
    return up.fromUpstream(JSON.stringify({ jsonrpc: '2.0', id: a!.id, ...(a!.body as object) }), now);
  }
}

function readyHub(world: OrderedWorld): HubUpstream {
  const up = new HubUpstream('streaming', () => [{ channel: 'proprio' }]);
  up.start();
  world.receive(up.connected(0));
  for (let i = 0; i < 3 && !up.isReady; i++) world.receive(world.deliver(up, 0, i));
  expect(up.isReady).toBe(true);
  return up;
}

describe('hub upstream grants', () => {
  it('AWP-MA-004 AWP-NEG-004 the hub never holds a channel granted that the world stops; once answered, it holds what the world sends', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 40 }), (steps) => {
        const world = new OrderedWorld();
        const up = readyHub(world);
        let now = 10;
        const check = (): void => {
          for (const name of up.grants.keys())
            expect(world.channels, `hub holds ${name} granted`).toContain(name);
        };
        for (const st of steps) {
          now++;
          if (st.s === 'answer') world.receive(world.deliver(up, st.pick, now));
          else {
            const sent =
              st.s === 'subscribe'
                ? up.subscribe(
                    st.channels.map((channel) => ({ channel })),
                    now,
                    now,
                  )
                : up.unsubscribe(st.channels, now);
            world.receive(sent, st.refuse);
          }
          check();
        }
        while (world.unanswered.length > 0) {
          world.receive(world.deliver(up, 0, ++now));
          check();
        }
        // Every answer in: the hub holds what the world sends (less a channel whose unsubscribe the
        // world refused: held back, the hub asks for it again when an observer needs it).
        if (world.errors === 0) expect([...up.grants.keys()].sort()).toEqual([...world.channels].sort());
      }),
      params(300),
    );
  });
});
