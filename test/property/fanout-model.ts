/**
 * A model world and observers around the fan-out cores (src/fanout/hub-upstream.ts, observer-session.ts,
 * subscriber.ts), for property tests. Observer sessions run in their shells (observer-shell.ts) and read
 * the HubUpstream as channel-hub.ts has them read it (`observerHost`); their requests for channels go
 * to the hub's HubSubscription (hub-subscription.ts), which narrows at ticks, as in channel-hub.ts, without
 * sockets. Steps are world messages to the hub (answers to its requests,
 * well formed or hostile, in any order; notifications; frames; pings; garbage), hub connection events,
 * and observers opening, sending arbitrary requests, dropping, resuming, and timers.
 */
import fc from 'fast-check';
import { FrameError } from '../../src/protocol/frame.js';
import { encodeFrame } from '../../src/protocol/frame-encode.js';
import { inlineToFrame } from '../../src/protocol/inline-frame.js';
import { HubUpstream, type HubUpstreamEffect } from '../../src/fanout/hub-upstream.js';
import { HubSubscription } from '../../src/fanout/hub-subscription.js';
import { indexChannels } from '../../src/fanout/hub-passes.js';
import { ObserverSession } from '../../src/fanout/observer-session.js';
import {
  ObserverShell,
  type ObserverConnection,
  type ObserverHubSide,
} from '../../src/fanout/observer-shell.js';
import type { StreamSink } from '../../src/fanout/subscriber.js';
import {
  garbageText,
  hostileJson,
  hostileObject,
  jsonText,
  nestedText,
  nestingDepth,
} from './arbitraries.js';

type Id = number | string;

export type ObserverMsg =
  | { t: 'ping'; id: Id; ack: 'none' | 'honest' | number }
  | { t: 'subscribe'; id: Id; channels: unknown }
  | { t: 'unsubscribe'; id: Id; channels: unknown }
  | { t: 'request'; id: Id; method: string; params: Record<string, unknown> }
  | { t: 'garbage'; text: string }
  | { t: 'deep'; depth: number };

export type FanoutStep =
  | { s: 'worldAnswer'; pick: number; hostile: unknown }
  | { s: 'worldEvent'; params: Record<string, unknown> | null }
  | { s: 'worldFrame'; channel_id: number; keyframe: boolean; hostile: Record<string, unknown> | null }
  | { s: 'worldText'; text: string }
  | { s: 'worldPing' }
  | { s: 'hubLost' }
  | { s: 'hubConnected' }
  | { s: 'hubClose' }
  | { s: 'open'; params: Record<string, unknown> | null }
  | { s: 'observer'; which: number; m: ObserverMsg }
  | { s: 'drop'; which: number }
  | { s: 'resume'; which: number; seq: 'honest' | number }
  | { s: 'tick'; ms: number }
  | { s: 'stream'; which: number; up: boolean };

export type FanoutViolation =
  | 'exception'
  | 'leak'
  | 'seq-order'
  | 'seq-gap'
  | 'seq-duplicate'
  | 'hub-event-order'
  | 'hub-invalid-send'
  | 'invalid-count-accepted'
  | 'frame-order'
  /** The hub's channel index, rebuilt only when told an observer's channels changed, went stale. */
  | 'stale-index';

const WORLD_TOKEN = 'WORLD-TOKEN-HUB';
const WORLD_HOST = 'world.internal';

const MANIFEST = {
  protocol_version: '0.1',
  world: { name: 'w', version: '1', vendor: 'v' },
  time_models: ['streaming'],
  embodiments: [],
  observation_channels: [
    { id: 'proprio', modality: 'proprio/json', rate_hz: 100, loss_class: 'latest-wins', schema: {} },
    { id: 'state', modality: 'text/event+json', rate_hz: 10, loss_class: 'reliable', schema: {} },
  ],
  action_schemas: [],
  safety_policy: { envelopes: [] },
};
const CHANNEL_IDS: Record<string, number> = { proprio: 1, state: 2 };

// ------------------------------------------------------------------ generators

const id: fc.Arbitrary<Id> = fc.constantFrom<Id>(1, 2, 'a', 'awp-edge:hb:1', 'awp-edge-hub:1');
const channelList = fc.oneof(
  fc.constant([{ channel: 'proprio' }]),
  fc.constant([{ channel: 'state', rate_hz: 5 }]),
  fc.constant(['proprio']),
  hostileJson,
  fc.array(hostileObject, { maxLength: 2 }),
);

const observerMsg: fc.Arbitrary<ObserverMsg> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant('ping' as const),
      id,
      ack: fc.oneof(
        fc.constantFrom('none' as const, 'honest' as const),
        fc.constantFrom(-5, 1.5, 100, 2 ** 53),
      ),
    }),
  },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('subscribe' as const), id, channels: channelList }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('unsubscribe' as const), id, channels: channelList }) },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant('request' as const),
      id,
      method: fc.constantFrom(
        'initialize',
        'world.manifest',
        'session.open',
        'session.resume',
        'session.close',
        'action.submit',
        'world.tick',
        'action.cancel',
        'x-vendor.q',
      ),
      params: hostileObject,
    }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('garbage' as const), text: garbageText }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('deep' as const), depth: nestingDepth }) },
);

/** Hostile stand-ins for a result the world owes the hub (null: answer it properly). */
const hostileResult: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: hostileJson.map((v) => ({ result: v })) },
  { weight: 1, arbitrary: hostileObject.map((o) => ({ result: { ...o, granted: o } })) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(hostileJson, nestingDepth)
      .map(([v, d]) => ({ error: { code: 2005, message: 'no', data: { v, deep: d > 60 ? 'deep' : v } } })),
  },
);

export function fanoutStepArb(): fc.Arbitrary<FanoutStep> {
  return fc.oneof(
    {
      weight: 8,
      arbitrary: fc.record({
        s: fc.constant('worldAnswer' as const),
        pick: fc.nat(3),
        hostile: hostileResult,
      }),
    },
    {
      weight: 3,
      arbitrary: fc.record({
        s: fc.constant('worldEvent' as const),
        params: fc.oneof(
          { weight: 3, arbitrary: fc.constant(null) },
          { weight: 1, arbitrary: hostileObject },
        ),
      }),
    },
    {
      weight: 3,
      arbitrary: fc.record({
        s: fc.constant('worldFrame' as const),
        channel_id: fc.constantFrom(1, 2, 3),
        keyframe: fc.boolean(),
        hostile: fc.oneof(
          { weight: 4, arbitrary: fc.constant(null) },
          { weight: 1, arbitrary: hostileObject },
        ),
      }),
    },
    {
      weight: 1,
      arbitrary: fc
        .oneof(
          garbageText,
          nestingDepth.map((d) => `{"jsonrpc":"2.0","method":"world.event","params":{"x":${nestedText(d)}}}`),
          fc
            .tuple(fc.constantFrom('session.state', 'world.event', 'obs.frame', 'x-v.n'), hostileJson)
            .map(([method, p]) => jsonText({ jsonrpc: '2.0', method, params: p })),
          fc
            .tuple(fc.constantFrom('ping', 'x-v.req'), hostileJson)
            .map(([method, p]) => jsonText({ jsonrpc: '2.0', id: 'w1', method, params: p })),
        )
        .map((text) => ({ s: 'worldText' as const, text })),
    },
    { weight: 1, arbitrary: fc.constant({ s: 'worldPing' as const }) },
    { weight: 1, arbitrary: fc.constant({ s: 'hubLost' as const }) },
    { weight: 2, arbitrary: fc.constant({ s: 'hubConnected' as const }) },
    { weight: 1, arbitrary: fc.constant({ s: 'hubClose' as const }) },
    {
      weight: 3,
      arbitrary: fc.record({
        s: fc.constant('open' as const),
        params: fc.oneof(
          { weight: 4, arbitrary: fc.constant(null) },
          { weight: 1, arbitrary: hostileObject },
        ),
      }),
    },
    {
      weight: 8,
      arbitrary: fc.record({ s: fc.constant('observer' as const), which: fc.nat(2), m: observerMsg }),
    },
    { weight: 1, arbitrary: fc.record({ s: fc.constant('drop' as const), which: fc.nat(2) }) },
    {
      weight: 2,
      arbitrary: fc.record({
        s: fc.constant('resume' as const),
        which: fc.nat(2),
        seq: fc.oneof(
          { weight: 4, arbitrary: fc.constant('honest' as const) },
          { weight: 1, arbitrary: fc.constantFrom(0, 1, 50) },
        ),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({ s: fc.constant('stream' as const), which: fc.nat(2), up: fc.boolean() }),
    },
    {
      weight: 3,
      arbitrary: fc.record({
        s: fc.constant('tick' as const),
        ms: fc.constantFrom(1, 500, 1000, 6000, 40000),
      }),
    },
  );
}

/** Most scenarios begin with the hub connected and its session opened, and one observer in. */
const PREFIX: readonly FanoutStep[] = [
  { s: 'open', params: null },
  { s: 'hubConnected' },
  { s: 'worldAnswer', pick: 0, hostile: null }, // initialize
  { s: 'worldAnswer', pick: 0, hostile: null }, // session.open
  { s: 'worldAnswer', pick: 0, hostile: null }, // the first ping (clock sample): observers are answered
];

export function fanoutScenarioArb(): fc.Arbitrary<FanoutStep[]> {
  const body = fc.array(fanoutStepArb(), { minLength: 1, maxLength: 60, size: 'medium' });
  return fc.oneof(
    { weight: 4, arbitrary: body.map((b) => [...PREFIX, ...b]) },
    { weight: 1, arbitrary: body },
  );
}

// ------------------------------------------------------------------ the driver

interface Conn {
  readonly texts: string[];
  closed: boolean;
  prev: number;
}

interface Observer {
  readonly session: ObserverShell;
  conn: Conn;
  /** The connection as the session sees it (named when it closes). */
  oc: ObserverConnection;
  /** Highest status_seq this observer read, across its connections; whether it only acknowledged that. */
  last: number;
  honest: boolean;
  /** Highest frame seq this observer received per channel, inline or on a stream (AWP-DAT-001). */
  readonly frameSeq: Map<number, number>;
  stream: StreamSink | null;
}

export interface FanoutResult {
  readonly violations: { cls: FanoutViolation; detail: string }[];
  readonly stats: {
    readyObservers: number;
    resumed: number;
    frames: number;
    events: number;
    framesSeen: number;
  };
}

class Stop extends Error {}

function parse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function runFanout(steps: readonly FanoutStep[]): FanoutResult {
  const violations: { cls: FanoutViolation; detail: string }[] = [];
  const stats = { readyObservers: 0, resumed: 0, frames: 0, events: 0, framesSeen: 0 };
  const violate = (cls: FanoutViolation, detail: string): void => void violations.push({ cls, detail });
  let now = 1000;
  const observers: Observer[] = [];
  const onReady: (() => void)[] = [];
  /** The hub's requests the world has not answered yet (the world answers them in any order). */
  const worldPending: { id: unknown; method: string; params: Record<string, unknown> }[] = [];
  let worldSeq = 0;
  let hubEventSeq = 0;
  let connected = false as boolean;
  let dialing = false as boolean;
  let minted = 0;

  const up: HubUpstream = new HubUpstream('streaming', () => subscription.union());
  const subscription: HubSubscription<ObserverShell> = new HubSubscription<ObserverShell>({
    upstream: up,
    observers: () => observers.map((o) => o.session),
    needed: () => new Set(observers.flatMap((o) => [...o.session.needs()].map((g) => g.name))),
    run: (effects) => run(effects),
    now: () => now,
    dropped: () => undefined,
  });

  const guard = <T>(what: string, f: () => T): T => {
    try {
      return f();
    } catch (err) {
      const e = err as Error;
      violate(
        'exception',
        `${what}: ${e.name}: ${e.message} ${(e.stack ?? '').split('\n').slice(1, 3).join(' ')}`,
      );
      throw new Stop();
    }
  };

  function run(effects: readonly HubUpstreamEffect[]): void {
    for (const e of effects) {
      switch (e.kind) {
        case 'dial':
          dialing = true;
          connected = false;
          worldPending.length = 0;
          break;
        case 'send': {
          const m = parse(e.text);
          if (!isRecord(m) || m.jsonrpc !== '2.0') violate('hub-invalid-send', e.text.slice(0, 200));
          else if (connected && typeof m.method === 'string' && 'id' in m)
            worldPending.push({ id: m.id, method: m.method, params: isRecord(m.params) ? m.params : {} });
          break;
        }
        case 'close':
          connected = false;
          worldPending.length = 0;
          break;
        case 'ready':
          for (const f of onReady.splice(0)) guard('open (hub ready)', f);
          guard('ready', () => subscription.ready());
          break;
        case 'grants':
          break;
        case 'subscribed':
          guard('channelsEnsured', () => subscription.subscribed(e.ref, e.ok));
          break;
        case 'event':
          if (e.status_seq <= hubEventSeq)
            violate('hub-event-order', `event ${e.status_seq} after ${hubEventSeq}`);
          hubEventSeq = Math.max(hubEventSeq, e.status_seq);
          stats.events++;
          for (const o of observers) guard('worldEvent', () => o.session.worldEvent(e.event));
          break;
        case 'frame':
          deliverInline(e.params);
          break;
        case 'failed':
          for (const f of onReady.splice(0)) guard('open (hub failed)', f);
          guard('channelsEnsured(false)', () => subscription.failed());
          for (const o of observers)
            guard('close', () => o.session.close('world_shutdown', now, 1011, 'world session lost'));
          break;
      }
    }
  }

  function deliverInline(params: Record<string, unknown>): void {
    let frame;
    try {
      frame = inlineToFrame(params);
    } catch (err) {
      if (err instanceof FrameError) return;
      throw err;
    }
    const buf = encodeFrame(frame);
    const hubFrame = {
      buf,
      channel_id: frame.channel_id,
      seq: frame.seq,
      ts_mono_ns: frame.ts_mono_ns,
      ts_send_ns: frame.ts_send_ns,
      flags: frame.flags,
    };
    stats.frames++;
    for (const o of observers) {
      const sub = o.session.sub;
      if (sub === null) continue;
      guard('deliver', () => sub.deliver(hubFrame, { received_at: now, channel: 'x' }));
      guard('firstActivity', () => o.session.firstActivity(now));
    }
  }

  /**
   * The hub's channel index as ChannelHub keeps it: dropped when the side says channels changed, rebuilt
   * when a frame next needs it (here after every step), and checked against a fresh one meanwhile.
   */
  let index: string | null = null;
  const freshIndex = (): string =>
    JSON.stringify(
      [...indexChannels(observers.map((o) => o.session)).targets]
        .map(([id, list]) => [id, list.map((s) => s.session_id).sort()] as const)
        .sort((a, b) => a[0] - b[0]),
    );
  const checkIndex = (): void => {
    const fresh = freshIndex();
    if (index !== null && index !== fresh) violate('stale-index', `kept ${index}, now ${fresh}`);
    index = fresh;
  };

  const host = up.observerHost((base) => [{ binding: 'ws', url: `${base}/stream` }, { binding: 'inline' }]);
  const side: ObserverHubSide = {
    mode: 'streaming',
    highWaterBytes: 1 << 20,
    maxQueuedBytes: 1 << 22,
    frameObserver: { written: () => undefined, replaced: () => undefined },
    ensureChannels: (shell, ref, wants) => subscription.ensure(shell, ref, wants),
    startChannel: () => undefined,
    grantsChanged: () => (index = null),
    subscriptionsChanged: () => {
      index = null;
      subscription.narrowLater();
    },
    ended: () => {
      index = null;
      subscription.narrowLater();
    },
    detached: () => undefined,
    note: () => undefined,
  };

  function connection(): { conn: Conn; oc: ObserverConnection } {
    const conn: Conn = { texts: [], closed: false, prev: -Infinity };
    const oc: ObserverConnection = {
      sink: {
        send: (data) => {
          if (conn.closed) return;
          conn.texts.push(typeof data === 'string' ? data : Buffer.from(data).toString('utf8'));
        },
        bufferedAmount: 0,
      },
      close: () => void (conn.closed = true),
      publicBase: 'ws://edge.example',
    };
    return { conn, oc };
  }

  /** The observer reads what reached it: leaks and status_seq order are checked here. */
  function read(o: Observer): void {
    const conn = o.conn;
    for (const text of conn.texts.splice(0)) {
      if (text.includes(WORLD_TOKEN) || text.includes(WORLD_HOST))
        violate('leak', `observer-bound text carries the hub's world token or URL: ${text.slice(0, 300)}`);
      const m = parse(text);
      if (!isRecord(m)) continue;
      if (isRecord(m.result) && typeof m.result.session_token === 'string') {
        if (!('replay_to_status_seq' in m.result)) stats.readyObservers++;
        else stats.resumed++;
        continue;
      }
      const p = isRecord(m.params) ? m.params : undefined;
      if (m.method === 'obs.frame' && typeof p?.channel_id === 'number' && typeof p.seq === 'number')
        sawFrame(o, p.channel_id, p.seq);
      if (typeof m.method !== 'string' || 'id' in m || typeof p?.status_seq !== 'number') continue;
      const seq = p.status_seq;
      if (seq <= conn.prev) violate('seq-order', `status_seq ${seq} after ${conn.prev} on one connection`);
      conn.prev = Math.max(conn.prev, seq);
      if (o.honest) {
        if (seq <= o.last) violate('seq-duplicate', `status_seq ${seq} again (read up to ${o.last})`);
        else if (seq > o.last + 1) violate('seq-gap', `status_seq ${seq} after ${o.last}`);
      }
      o.last = Math.max(o.last, seq);
    }
  }

  function sawFrame(o: Observer, channel: number, seq: number): void {
    stats.framesSeen++;
    const prev = o.frameSeq.get(channel) ?? -Infinity;
    if (seq <= prev) violate('frame-order', `channel ${channel}: frame seq ${seq} after ${prev}`);
    o.frameSeq.set(channel, Math.max(prev, seq));
  }

  function streamSink(o: Observer): StreamSink {
    const sink: StreamSink = {
      push: (frame) => {
        if (o.stream === sink) sawFrame(o, frame.channel_id, frame.seq);
        return 'sent';
      },
      close: () => {
        if (o.stream === sink) o.stream = null;
      },
    };
    return sink;
  }

  function answer(pick: number, hostile: unknown): void {
    if (!connected || worldPending.length === 0) return;
    const [rq] = worldPending.splice(pick % worldPending.length, 1);
    const r = rq!;
    let body: Record<string, unknown>;
    if (isRecord(hostile)) {
      body = hostile;
    } else {
      const ready = {
        session_id: 'hub-sess',
        session_token: WORLD_TOKEN,
        reconnect_window_ms: 30000,
        heartbeat_interval_ms: 5000,
        granted: { channels: [{ channel: 'proprio', rate_hz: 100, channel_id: 1 }] },
        stream_endpoints: [{ binding: 'ws', url: `ws://${WORLD_HOST}/hub` }, { binding: 'inline' }],
      };
      const grantedFor = (list: unknown): { channel: string; rate_hz: number; channel_id: number }[] =>
        (Array.isArray(list) ? list : [])
          .map((c) => (isRecord(c) ? c.channel : undefined))
          .filter((c): c is string => typeof c === 'string' && c in CHANNEL_IDS)
          .map((c) => ({ channel: c, rate_hz: c === 'proprio' ? 100 : 10, channel_id: CHANNEL_IDS[c]! }));
      switch (r.method) {
        case 'initialize':
          body = { result: MANIFEST };
          break;
        case 'session.open':
          body = { result: ready };
          break;
        case 'session.resume':
          body = { result: { ...ready, replay_to_status_seq: worldSeq, safe_state: false } };
          break;
        case 'ping':
          body = {
            result: { origin_ns: r.params.origin_ns ?? 0, receive_ns: now * 1e6, transmit_ns: now * 1e6 },
          };
          break;
        case 'obs.subscribe':
          body = {
            result: {
              granted: [
                ...new Set([...up.grants.keys(), ...grantedFor(r.params.channels).map((g) => g.channel)]),
              ].map((c) => ({
                channel: c,
                rate_hz: c === 'proprio' ? 100 : 10,
                channel_id: CHANNEL_IDS[c] ?? 9,
              })),
            },
          };
          break;
        case 'obs.unsubscribe':
          body = { result: { granted: [] } };
          break;
        default:
          body = { result: {} };
      }
    }
    const text = JSON.stringify({ jsonrpc: '2.0', id: r.id, ...body });
    run(guard('fromUpstream', () => up.fromUpstream(text, now)));
  }

  const worldText = (text: string): void => {
    if (!connected) return;
    run(guard('fromUpstream', () => up.fromUpstream(text, now)));
  };

  try {
    for (const step of steps) {
      now += 1;
      switch (step.s) {
        case 'worldAnswer':
          answer(step.pick, step.hostile);
          break;
        case 'worldEvent':
          worldText(
            JSON.stringify({
              jsonrpc: '2.0',
              method: 'world.event',
              params: step.params ?? { event: 'e', status_seq: ++worldSeq, ts_mono_ns: now * 1e6 },
            }),
          );
          break;
        case 'worldFrame': {
          const p = {
            channel_id: step.channel_id,
            seq: now,
            ts_mono_ns: now * 1e6,
            ts_send_ns: now * 1e6 + 5,
            flags: step.keyframe ? 1 : 0,
            payload_b64: 'AAEC',
            ...(step.hostile ?? {}),
          };
          worldText(JSON.stringify({ jsonrpc: '2.0', method: 'obs.frame', params: p }));
          break;
        }
        case 'worldText':
          worldText(step.text);
          break;
        case 'worldPing':
          worldText(
            JSON.stringify({ jsonrpc: '2.0', id: `wp${now}`, method: 'ping', params: { origin_ns: now } }),
          );
          break;
        case 'hubLost':
          if (!connected) break;
          connected = false;
          subscription.lost(); // the hub's session drops its unanswered requests
          run(guard('lost', () => up.lost()));
          break;
        case 'hubConnected':
          if (up.isClosed) break;
          if (!dialing) run(guard('start', () => up.start()));
          if (!dialing) break;
          dialing = false;
          connected = true;
          run(guard('connected', () => up.connected(now)));
          break;
        case 'hubClose':
          run(guard('close', () => up.close(now)));
          break;
        case 'open': {
          const { conn, oc } = connection();
          const s = new ObserverShell(
            new ObserverSession<ObserverConnection>(
              `obs-${++minted}`,
              `EDGE-OBS-${minted}`,
              host,
              ['proprio/json', 'text/event+json'],
              undefined,
            ),
            side,
          );
          const o: Observer = {
            session: s,
            conn,
            oc,
            last: 0,
            honest: true,
            frameSeq: new Map(),
            stream: null,
          };
          observers.push(o);
          const params = step.params ?? { mode: 'streaming', subscribe: [{ channel: 'proprio' }] };
          const open = (): void => s.open(oc, 1, params, now);
          if (up.isReady) guard('open', open);
          else onReady.push(open);
          if (up.isClosed) for (const f of onReady.splice(0)) guard('open', f);
          run(guard('start', () => up.start()));
          read(o);
          break;
        }
        case 'observer': {
          const o = observers[step.which % Math.max(1, observers.length)];
          if (o === undefined || o.conn.closed) break;
          read(o);
          const attached = o.session.attached && o.session.state !== 'opening';
          const text = observerText(step.m, o);
          guard('fromAgent', () => o.session.fromAgent(text, now));
          // Observer pings are answered by the edge and validated like everything else (issue 12, 5, 7).
          const m = step.m;
          if (
            attached &&
            m.t === 'ping' &&
            typeof m.ack === 'number' &&
            !(Number.isSafeInteger(m.ack) && m.ack >= 0) &&
            m.ack <= 2 ** 53 - 1
          ) {
            const answered = o.conn.texts.some((t) => {
              const r = parse(t);
              return isRecord(r) && r.id === m.id && isRecord(r.error) && r.error.code === -32602;
            });
            if (!answered)
              violate('invalid-count-accepted', `ping last_status_seq ${m.ack} not answered -32602`);
          }
          break;
        }
        case 'drop': {
          const o = observers[step.which % Math.max(1, observers.length)];
          if (o === undefined) break;
          read(o);
          o.conn.closed = true;
          guard('connectionLost', () => o.session.connectionLost(o.oc, now));
          break;
        }
        case 'resume': {
          const o = observers[step.which % Math.max(1, observers.length)];
          if (o === undefined || o.session.state === 'closed' || o.session.state === 'opening') break;
          read(o);
          o.conn.closed = true;
          const { conn, oc } = connection();
          const replaced = o.oc;
          o.conn = conn;
          o.oc = oc;
          const last = step.seq === 'honest' ? o.last : step.seq;
          if (last !== o.last) o.honest = false;
          guard('resume', () => o.session.resume(oc, 'r', last, now));
          // The engine reports the replaced connection's close afterwards (the session closed it, or it was lost).
          guard('connectionLost (replaced)', () => o.session.connectionLost(replaced, now));
          break;
        }
        case 'stream': {
          const o = observers[step.which % Math.max(1, observers.length)];
          const sub = o?.session.sub;
          if (o === undefined || sub === null || sub === undefined) break;
          if (step.up) {
            const sink = streamSink(o);
            o.stream = sink;
            guard('attachStream', () => sub.attachStream(sink));
            o.stream = sink;
          } else if (o.stream !== null) {
            const gone = o.stream;
            const reliable = guard('streamLost', () => sub.streamLost(gone));
            o.stream = null;
            for (const id of reliable) {
              const g = [...sub.subscribed()].find((c) => c.channel_id === id);
              if (g !== undefined) guard('channelDegraded', () => o.session.channelDegraded(g, now));
            }
          }
          break;
        }
        case 'tick':
          now += step.ms;
          run(guard('tickTimers', () => up.tickTimers(now)));
          guard('narrow', () => subscription.tick());
          for (const o of observers) guard('tickTimers', () => o.session.tickTimers(now));
          break;
      }
      for (const o of observers) read(o);
      checkIndex();
    }
  } catch (err) {
    if (!(err instanceof Stop)) throw err;
  }
  return { violations, stats };
}

function observerText(m: ObserverMsg, o: Observer): string {
  const rq = (i: Id, method: string, p: unknown): string =>
    jsonText({ jsonrpc: '2.0', id: i, method, params: p });
  switch (m.t) {
    case 'ping': {
      const p: Record<string, unknown> = { origin_ns: 1 };
      if (m.ack === 'honest') p.last_status_seq = o.last;
      else if (m.ack !== 'none') {
        p.last_status_seq = m.ack;
        if (m.ack > o.last) o.honest = false;
      }
      return rq(m.id, 'ping', p);
    }
    case 'subscribe':
      return rq(m.id, 'obs.subscribe', { channels: m.channels });
    case 'unsubscribe':
      return rq(m.id, 'obs.unsubscribe', { channels: m.channels });
    case 'request':
      return rq(m.id, m.method, m.params);
    case 'garbage':
      return m.text;
    case 'deep':
      return `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":${nestedText(m.depth)}}}`;
  }
}
