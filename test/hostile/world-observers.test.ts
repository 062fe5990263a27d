/**
 * A hostile or stalled world behind an observer route (`observers: 'fanout'`). Frames on channels it never
 * granted the edge's hub are neither kept (memory) nor served to an observer subscribing to the channel
 * later (AWP-OBS-005: that would be historical replay). A world that stops answering does not make the
 * hub's requests, or an observer's, the edge's memory.
 */
import type { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { MAX_UNANSWERED_PINGS } from '../../src/fanout/hub-upstream.js';
import { MAX_SUBSCRIBES_IN_FLIGHT } from '../../src/fanout/observer-session.js';
import { encodeFrame } from '../../src/protocol/frame-encode.js';
import { FLAG_KEYFRAME } from '../../src/protocol/frame.js';
import { hubsOf } from '../fanout/rig.js';
import { ObserverClient } from '../fanout/observer-client.js';
import { AGENT_TOKEN } from '../support/edge.js';
import type { Json } from '../support/awp-client.js';
import { gc, pingOk, rigPerTest, sleep, until, type HostileRig } from './support.js';

const { cleanups, start } = rigPerTest();

const STATE = { channel: 'state', channel_id: 1, rate_hz: 10 };
const CAM = { channel: 'cam', channel_id: 2, rate_hz: 10 };

/**
 * The world declares `cam` too, and grants what the hub subscribes to (its complete list, AWP-NEG-004);
 * requests `held` says are kept unanswered in `unanswered`.
 */
function declareCam(r: HostileRig, held: (msg: Json) => boolean = () => false): Json[] {
  r.world.observationChannels.push({
    id: 'cam',
    loss_class: 'latest-wins',
    modality: 'image/raw',
    rate_hz: 10,
  });
  r.world.sessionFields = { heartbeat_interval_ms: HEARTBEAT_MS };
  const granted = new Map([['state', STATE]]);
  const unanswered: Json[] = [];
  r.world.responder = (msg: Json) => {
    if (held(msg)) {
      unanswered.push(msg);
      return null;
    }
    if (msg.method === 'obs.subscribe') {
      for (const c of (msg.params as { channels: { channel: string }[] }).channels)
        if (c.channel === 'cam') granted.set('cam', CAM);
      return { granted: [...granted.values()] };
    }
    return undefined;
  };
  return unanswered;
}

/** The hub pings the world every half heartbeat: this makes it once per hub tick (50 ms). */
const HEARTBEAT_MS = 100;

const answer = (msg: Json, result: Json): Json => ({ jsonrpc: '2.0', id: msg.id!, result });

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
    const r = await start({}, {}, { observers: 'fanout' });
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
    const r = await start({}, {}, { observers: 'fanout' });
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

  it('an observer pipelining subscribes while the world does not answer gets -32004 past MAX_SUBSCRIBES_IN_FLIGHT; the others are answered when the world answers', async () => {
    const r = await start({}, {}, { observers: 'fanout' });
    const held = declareCam(r, (msg) => msg.method === 'obs.subscribe');
    const o = await observer(r);
    const waiting = Array.from({ length: MAX_SUBSCRIBES_IN_FLIGHT }, () =>
      o.call('obs.subscribe', { channels: [{ channel: 'cam' }] }, 10_000),
    );
    await until(() => held.length === MAX_SUBSCRIBES_IN_FLIGHT, 5000, 'the hub to relay every subscribe');
    const over = await o.call('obs.subscribe', { channels: [{ channel: 'cam' }] });
    expect(over.error).toMatchObject({
      code: -32004,
      message: 'AWP_EDGE_BUDGET_EXCEEDED',
      data: { retryable: true },
    });
    await sleep(200);
    expect(held.length).toBe(MAX_SUBSCRIBES_IN_FLIGHT); // the refused one never went upstream
    for (const msg of held) r.world.send(answer(msg, { granted: [STATE, CAM] }));
    for (const a of await Promise.all(waiting)) expect(a.error).toBeUndefined();
    await pingOk(r.bystander);
  }, 30_000);

  it("a world that stops answering the hub's heartbeat pings is sent at most MAX_UNANSWERED_PINGS; they go on once it answers", async () => {
    const r = await start({}, {}, { observers: 'fanout' });
    let silent = false;
    const held = declareCam(r, (msg) => silent && msg.method === 'ping');
    const o = await observer(r);
    const pings = (): number => r.world.allMessages().filter((m) => m.method === 'ping').length;
    const before = pings();
    silent = true;
    await until(() => held.length === MAX_UNANSWERED_PINGS, 5000, 'unanswered pings');
    await sleep(40 * HEARTBEAT_MS); // about 40 more heartbeats were due
    expect(pings() - before).toBe(MAX_UNANSWERED_PINGS);
    silent = false;
    const t = (n: number) => ({ origin_ns: n, receive_ns: n, transmit_ns: n });
    for (const msg of held) r.world.send(answer(msg, t(1)));
    await until(() => pings() > before + MAX_UNANSWERED_PINGS + 2, 5000, 'heartbeats after the answers');
    await barrier(r, o, 1); // the hub still serves its observer
  }, 30_000);

  it("a world that takes the hub's connection but never opens its session: waiting observers are refused after timing.upstream_connect_timeout_ms, not left waiting", async () => {
    const r = await start({ timing: { upstream_connect_timeout_ms: 500 } }, {}, { observers: 'fanout' });
    let wedged = true;
    // The agent's own initialize is relayed and answered; the hub's (it names the edge) is not.
    declareCam(
      r,
      (msg) =>
        wedged &&
        msg.method === 'initialize' &&
        (msg.params as Json).agent !== undefined &&
        ((msg.params as Json).agent as Json).name === 'awp-edge',
    );
    const o = await ObserverClient.connect(r.edge.url('/w'), {
      kind: 'inline',
      credential: AGENT_TOKEN,
      subscribe: [{ channel: 'state' }],
    });
    cleanups.push(() => o.terminate());
    await o.initialize();
    const started = Date.now();
    const answer = await o.call(
      'session.open',
      { mode: 'streaming', subscribe: [{ channel: 'state' }] },
      10_000,
    );
    expect(answer.error).toMatchObject({
      code: -32001,
      message: 'AWP_EDGE_UPSTREAM_UNAVAILABLE',
      data: { retryable: true, detail: 'world did not open the session within 500 ms' },
    });
    expect(Date.now() - started).toBeLessThan(9000);
    await until(() => hubsOf(r.edge).length === 0, 5000, 'the failed hub to go');
    // Once the world answers, a new observer is served by a new hub.
    wedged = false;
    const next = await observer(r);
    await barrier(r, next, 1);
    await pingOk(r.bystander);
  }, 30_000);

  it('big world events reach every observer of the hub whole, in order, each with its own status_seq, and the edge goes on serving', async () => {
    const r = await start({}, {}, { observers: 'fanout' });
    const observers = await Promise.all(Array.from({ length: 12 }, () => observer(r)));
    const detail = 'x'.repeat(512 * 1024);
    const before = observers.map((o) => o.statusSeqs().at(-1) ?? 0);
    for (let i = 0; i < 6; i++)
      r.world.send({
        jsonrpc: '2.0',
        method: 'world.event',
        params: { event: `big-${i}`, ts_mono_ns: 1, status_seq: r.world.seq(), detail },
      });
    await pingOk(r.bystander); // served while the events are handed out
    await until(
      () => observers.every((o) => o.notifications('world.event').length === 6),
      15_000,
      'every observer to hear every event',
    );
    observers.forEach((o, k) => {
      const events = o.notifications('world.event');
      expect(events.map((e) => e.event)).toEqual([0, 1, 2, 3, 4, 5].map((i) => `big-${i}`));
      expect(events.every((e) => e.detail === detail)).toBe(true);
      // The observer's own sequence, past what it heard before (AWP-EVT-001), not the world's.
      const seqs = events.map((e) => e.status_seq as number);
      expect(seqs[0]).toBeGreaterThan(before[k]!);
      for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBeGreaterThan(seqs[i - 1]!);
      expect(seqs.at(-1)).toBeLessThan(before[k]! + 20);
    });
  }, 30_000);

  it("a big world event is held once for all of a hub's observers, not once per observer's journal", async () => {
    const r = await start({}, {}, { observers: 'fanout' });
    const n = 16;
    const observers = await Promise.all(Array.from({ length: n }, () => observer(r)));
    const bytes = 4 * 1024 * 1024;
    const forget = () => observers.forEach((o) => o.received.splice(0)); // the test's own copies
    await pingOk(r.bystander);
    forget();
    gc();
    const quiet = process.memoryUsage().heapUsed;
    r.world.send({
      jsonrpc: '2.0',
      method: 'world.event',
      params: { event: 'big', ts_mono_ns: 1, status_seq: r.world.seq(), detail: 'x'.repeat(bytes) },
    });
    await until(
      () => observers.every((o) => o.notifications('world.event').some((e) => e.event === 'big')),
      15_000,
      'every observer to hear the event',
    );
    forget();
    await pingOk(r.bystander); // the sockets' writes are done with
    gc();
    // The observers never acknowledge: each journal keeps the event. Held per observer, that is 64 MB.
    const grown = process.memoryUsage().heapUsed - quiet;
    expect(grown).toBeLessThan((n * bytes) / 4);
  }, 30_000);

  it("frames an observer sends on its stream connection go nowhere but count against its credential's message budget: past it, the stream is closed 1008", async () => {
    const r = await start({ budgets: { max_messages_per_second: 50 } }, {}, { observers: 'fanout' });
    const o = await observer(r);
    const stream = o.stream!;
    // Fast, in one burst: far past 50 a second, whatever the machine's load.
    for (let seq = 1; seq <= 500 && stream.readyState === stream.OPEN; seq++)
      stream.send(frame(STATE.channel_id, seq, false));
    await until(() => o.streamCloses.length > 0, 10_000, 'the stream connection to be closed');
    expect(o.streamCloses[0]).toMatchObject({ code: 1008, reason: 'messages per second budget exceeded' });
    await sleep(200); // the bystander has the same credential: its budget refills
    await pingOk(r.bystander);
  }, 30_000);

  it("a world that sends pings and does not read the hub's answers loses that connection past transport.max_queued_bytes; the hub resumes its session on a new one", async () => {
    // Liveness checks slower than the test: only the send budget can drop the connection.
    const r = await start(
      { transport: { max_queued_bytes: 65_536 }, timing: { hop_ping_interval_ms: 0 } },
      {},
      { observers: 'fanout' },
    );
    r.world.sessionFields = { heartbeat_interval_ms: 60_000 };
    const o = await observer(r);
    await barrier(r, o, 1);
    const conn = r.world.current()!;
    (conn.ws as unknown as { _socket: Socket })._socket.pause(); // the world stops reading
    const id = 'p'.repeat(200);
    for (let i = 0; i < 60_000; i++)
      conn.ws.send(`{"jsonrpc":"2.0","id":"${id}${i}","method":"ping","params":{"origin_ns":1}}`);
    await until(
      () => r.world.control.some((c) => c !== conn && !c.closed),
      20_000,
      'the hub to drop the connection it could not write to, and dial a new one',
    );
    await until(
      () => r.world.streams.filter((s) => !s.closed).length === 1,
      5000,
      "the resumed session's stream connection",
    );
    await barrier(r, o, 2); // the same observer, served by the resumed hub session
    await pingOk(r.bystander);
  }, 40_000);

  it("a world's session timing that is not a count (a negative window, a fractional heartbeat) is not handed to observers: the hub keeps its defaults", async () => {
    const r = await start({}, {}, { observers: 'fanout' });
    r.world.sessionFields = { reconnect_window_ms: -1, heartbeat_interval_ms: 0.5 };
    const o = await observer(r);
    expect(o.ready).toMatchObject({ reconnect_window_ms: 30_000, heartbeat_interval_ms: 5000 });
    await barrier(r, o, 1);
  }, 30_000);
});
