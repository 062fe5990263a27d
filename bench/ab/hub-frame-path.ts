/**
 * The hub's frame path in one process, without sockets, for A/B comparisons of two checkouts: CPU time
 * per delivery of ChannelHub.binaryFrame -> peek -> fan-out -> each observer's Subscriber.deliver ->
 * WsStreamSink -> Outbox -> a socket stand-in, with the hub's timers running (heartbeats, telemetry).
 * The hub's upstream session is answered through its own messages; its dialler is replaced, so nothing is
 * dialled. Each checkout's src/ is compiled by its own bench/lib/build.ts (as the fan-out benchmark runs
 * it), and each measurement runs in a fresh process, alternating checkouts.
 *
 *   node --import tsx bench/ab/hub-frame-path.ts --base DIR --after DIR [--pairs 8] [--observers 1000]
 *        [--frames 8000]
 *   node --import tsx bench/ab/hub-frame-path.ts --one DIR [--observers N] [--frames K]   (one measurement)
 *
 * It reaches into ChannelHub's private members (link, upstream, run, binaryFrame) by name: both checkouts
 * must have them, and fan a frame out before binaryFrame returns (what is written later is not counted).
 */
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

type BuildModule = typeof import('../lib/build.js');

interface Measurement {
  readonly dir: string;
  readonly observers: number;
  readonly frames: number;
  readonly writes: number;
  /** CPU of opening the observers and subscribing them (obs.subscribe). */
  readonly setup_cpu_ms: number;
  readonly cpu_ms: number;
  readonly ns_per_delivery: number;
  readonly deliveries_per_cpu_s: number;
}

/** The parts of a ChannelHub this reaches (private ones by name). */
interface Hub {
  readonly size: number;
  readonly link: { dialControl(): void; dialStream(): void; send(text: string): void };
  readonly upstream: {
    readonly isReady: boolean;
    start(): readonly unknown[];
    connected(now: number): readonly unknown[];
    fromUpstream(text: string, now: number): readonly unknown[];
  };
  run(effects: readonly unknown[]): void;
  binaryFrame(buf: Buffer): void;
  tick(now: number): void;
  open(
    conn: unknown,
    id: number,
    params: unknown,
    initialize: unknown,
  ): { fromAgent(t: string, n: number): void };
  attachStream(observer: unknown, sink: unknown): void;
  shutdown(): void;
}

const MANIFEST = {
  protocol_version: '0.1',
  world: { name: 'w', version: '1', vendor: 'v' },
  time_models: ['streaming'],
  embodiments: [],
  observation_channels: [
    { id: 'proprio', modality: 'proprio/json', rate_hz: 1000, loss_class: 'latest-wins', schema: {} },
  ],
  action_schemas: [],
  safety_policy: { envelopes: [] },
};
const GRANT = [{ channel: 'proprio', rate_hz: 1000, channel_id: 1 }];

async function measure(dir: string, observers: number, frames: number): Promise<Measurement> {
  const { buildForBench } = (await import(resolve(dir, 'bench/lib/build.ts'))) as BuildModule;
  const build = buildForBench();
  const load = async <T>(path: string): Promise<T> =>
    (await import(pathToFileURL(resolve(build, path)).href)) as T;
  const { ChannelHub } = await load<{ ChannelHub: new (mode: string, ctx: unknown) => Hub }>(
    'src/fanout/channel-hub.js',
  );
  const { WsStreamSink } = await load<{ WsStreamSink: new (...a: unknown[]) => unknown }>(
    'src/fanout/ws-stream-sink.js',
  );
  const { encodeFrame } = await load<{ encodeFrame: (f: unknown) => Buffer }>('src/protocol/frame-encode.js');
  // Checkouts since the shared turn budget (slice-loop.ts) give their hubs one.
  const sliceLoop = await load<{ SliceLoop: new (now: () => number) => unknown }>(
    'src/transport/slice-loop.js',
  ).catch(() => undefined);

  let clock = 1000;
  let writes = 0;
  let minted = 0;
  const noop = (): void => undefined;
  const metrics = { count: noop, observeAge: noop, received: noop, written: noop, replaced: noop };
  const socket = () => ({
    send: () => {
      writes++;
    },
    bufferedAmount: 0,
    close: noop,
    terminate: noop,
    remoteAddress: '127.0.0.1',
  });
  const hub = new ChannelHub('streaming', {
    route: 'ab',
    upstreamUrl: 'ws://127.0.0.1:9/',
    upstreamToken: undefined,
    connectTimeoutMs: 1000,
    maxMessageBytes: 1 << 24,
    pingIntervalMs: 60_000,
    upstream: noop,
    upstreamFailed: noop,
    log: noop,
    fault: noop,
    highWaterBytes: 1 << 20,
    maxQueuedBytes: 1 << 24,
    lingerMs: 60_000,
    now: () => clock,
    ...(sliceLoop !== undefined && { slices: new sliceLoop.SliceLoop(() => clock) }),
    mintToken: () => `token-${minted++}`,
    endpoints: () => [{ binding: 'inline' }],
    frames: metrics,
    rejected: noop,
    noteSession: noop,
    retired: noop,
  });
  const sent: string[] = [];
  hub.link.dialControl = noop;
  hub.link.dialStream = noop;
  hub.link.send = (text) => void sent.push(text);
  const answer = (m: { method: string; params?: { origin_ns?: number } }): unknown => {
    if (m.method === 'initialize') return MANIFEST;
    if (m.method === 'ping')
      return { origin_ns: m.params?.origin_ns ?? 0, receive_ns: clock * 1e6, transmit_ns: clock * 1e6 };
    if (m.method !== 'session.open') return { granted: GRANT };
    return {
      session_id: 'hub',
      session_token: 'HUB-TOKEN',
      reconnect_window_ms: 30_000,
      heartbeat_interval_ms: 1e9, // the stand-in observers never answer pings
      granted: { channels: GRANT },
      stream_endpoints: [{ binding: 'inline' }],
    };
  };
  const world = (): void => {
    for (const text of sent.splice(0)) {
      const m = JSON.parse(text) as { id?: string; method: string };
      if (m.id === undefined) continue;
      const reply = JSON.stringify({ jsonrpc: '2.0', id: m.id, result: answer(m) });
      hub.run(hub.upstream.fromUpstream(reply, clock));
    }
  };
  hub.run(hub.upstream.start());
  hub.run(hub.upstream.connected(clock));
  for (let i = 0; i < 4 && sent.length > 0; i++) world();
  if (!hub.upstream.isReady) throw new Error('the hub session did not open');

  const s0 = process.cpuUsage();
  const opened = [];
  for (let i = 0; i < observers; i++) {
    const conn = { sink: socket(), close: noop, publicBase: 'ws://edge' };
    const init = { consumes_modalities: ['proprio/json'] };
    const o = hub.open(conn, 1, { mode: 'streaming', subscribe: [] }, init);
    hub.attachStream(o, new WsStreamSink(socket(), 1 << 20, 1 << 24, metrics));
    opened.push(o);
  }
  const subscribe =
    '{"jsonrpc":"2.0","id":2,"method":"obs.subscribe","params":{"channels":[{"channel":"proprio"}]}}';
  for (const o of opened) o.fromAgent(subscribe, clock);
  world();
  const setup = process.cpuUsage(s0);
  if (hub.size !== observers) throw new Error(`${hub.size} observers, not ${observers}`);

  const payload = Buffer.from(JSON.stringify({ p_m: [0, 0, 0.4], v_mps: [0, 0, 0] }));
  let seq = 0;
  const run = (k: number): void => {
    for (let i = 0; i < k; i++) {
      clock += 10; // 100 Hz
      const ns = clock * 1e6;
      hub.binaryFrame(
        encodeFrame({
          channel_id: 1,
          seq: ++seq,
          ts_mono_ns: ns,
          ts_send_ns: ns + 5,
          flags: 1,
          vendor: [],
          payload,
        }),
      );
      if (i % 10 === 0) hub.tick(clock); // the edge's hub timer (telemetry once a second per observer)
    }
  };
  run(1000); // warm-up
  writes = 0;
  const c0 = process.cpuUsage();
  run(frames);
  const c = process.cpuUsage(c0);
  hub.shutdown();
  const cpuUs = c.user + c.system;
  return {
    dir,
    observers,
    frames,
    writes,
    setup_cpu_ms: Math.round((setup.user + setup.system) / 1000),
    cpu_ms: Math.round(cpuUs / 1000),
    ns_per_delivery: Math.round((cpuUs * 1000) / writes),
    deliveries_per_cpu_s: Math.round(writes / (cpuUs / 1e6)),
  };
}

function median(xs: readonly number[]): number {
  const v = [...xs].sort((a, b) => a - b);
  const m = Math.floor(v.length / 2);
  return v.length % 2 === 1 ? v[m]! : (v[m - 1]! + v[m]!) / 2;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      one: { type: 'string' },
      base: { type: 'string' },
      after: { type: 'string' },
      pairs: { type: 'string', default: '8' },
      observers: { type: 'string', default: '1000' },
      frames: { type: 'string', default: '8000' },
    },
  });
  const n = values.observers;
  const k = values.frames;
  if (values.one !== undefined) {
    process.stdout.write(`${JSON.stringify(await measure(values.one, Number(n), Number(k)))}\n`);
    process.exit(0); // the hub's timers are not unref'd
  }
  if (values.base === undefined || values.after === undefined) {
    console.error('usage: bench/ab/hub-frame-path.ts --base DIR --after DIR [--pairs 8] | --one DIR');
    process.exitCode = 2;
    return;
  }
  const runs: Record<'base' | 'after', Measurement[]> = { base: [], after: [] };
  for (let i = 0; i < Number(values.pairs); i++) {
    const order = i % 2 === 0 ? (['base', 'after'] as const) : (['after', 'base'] as const);
    for (const side of order) {
      const dir = side === 'base' ? values.base : values.after;
      const self = new URL(import.meta.url).pathname;
      const r = spawnSync(
        process.execPath,
        ['--import', 'tsx', self, '--one', dir, '--observers', n, '--frames', k],
        {
          encoding: 'utf8',
        },
      );
      if (r.status !== 0) throw new Error(`${side}: ${r.stderr}`);
      const m = JSON.parse(r.stdout) as Measurement;
      runs[side].push(m);
      process.stderr.write(`${side} ${JSON.stringify(m)}\n`);
    }
  }
  const of = (side: 'base' | 'after') => runs[side].map((m) => m.deliveries_per_cpu_s);
  const stats = (xs: number[]) => ({
    n: xs.length,
    median: median(xs),
    min: Math.min(...xs),
    max: Math.max(...xs),
  });
  const setup = (side: 'base' | 'after') => stats(runs[side].map((m) => m.setup_cpu_ms));
  process.stdout.write(
    `${JSON.stringify(
      {
        deliveries_per_cpu_s: { base: stats(of('base')), after: stats(of('after')) },
        ratio_of_medians: Math.round((median(of('after')) / median(of('base'))) * 1000) / 1000,
        setup_cpu_ms: { base: setup('base'), after: setup('after') },
      },
      null,
      2,
    )}\n`,
  );
}

await main();
