/**
 * The flight recorder alone at the fan-out bench's rates (issue 14), without the edge, its sockets or the
 * load generators, so that its CPU is measured apart from theirs: a route recorder (a checkout's own
 * src/recorder, files in a temp dir) with N observer session logs and the hub log, hub frames at 100 Hz
 * (40 B) + 30 Hz (64 KiB), each observer delivered a share of them by reference, a session.telemetry per
 * observer per second and a ping and its answer every 5 s. The sessions open first, then a warm-up, then
 * the window: the steady state. Prints, per wall second of the window, the process CPU split by
 * thread: the main thread, and the others (the libuv pool writing the files: system time; V8's GC helpers:
 * user time). `--none` runs the same loop recording nothing (the loop's own cost).
 *
 *   node --import tsx bench/ab/recorder-sim.ts [--root DIR] [--observers 1000] [--seconds 20] [--share 0.2] [--none]
 *     [--skip refs,telemetry,pings,hub]
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';

type RecorderModule = typeof import('../../src/recorder/io/route-recorder.js');
type FrameModule = typeof import('../../src/protocol/frame.js');
type EncodeModule = typeof import('../../src/protocol/frame-encode.js');
type BodyModule = typeof import('../../src/recorder/frame-body.js');
type SessionLog = import('../../src/recorder/session-log.js').SessionLog;
type SliceLoopModule = typeof import('../../src/transport/slice-loop.js');
type SlicedPassModule = typeof import('../../src/transport/sliced-pass.js');

const { values } = parseArgs({
  options: {
    root: { type: 'string', default: '.' },
    observers: { type: 'string', default: '1000' },
    seconds: { type: 'string', default: '20' },
    share: { type: 'string', default: '0.2' },
    none: { type: 'boolean', default: false },
    skip: { type: 'string', default: '' },
  },
});
const root = resolve(values.root);
const N = Number(values.observers);
const WINDOW_S = Number(values.seconds);
const SHARE = Number(values.share);
/** Parts of the load not recorded, to attribute the cost: refs, telemetry, pings, hub. */
const SKIP = new Set(values.skip.split(','));
/**
 * Longer than the writer's FLUSH_MS (5 s): every file exists and has been written once before the window,
 * as in the bench, whose sessions open over tens of seconds before its window.
 */
const WARMUP_S = 6;
/** Clock ticks per second of /proc's utime and stime (USER_HZ, 100 on Linux). */
const TICKS = 100;

const load = <T>(path: string) => import(join(root, path)) as Promise<T>;
const { RouteRecorder } = await load<RecorderModule>('src/recorder/io/route-recorder.ts');
const { createFrameHeader, peekFrame } = await load<FrameModule>('src/protocol/frame.ts');
const { encodeFrame } = await load<EncodeModule>('src/protocol/frame-encode.ts');
const { binaryFrameBody } = await load<BodyModule>('src/recorder/frame-body.ts');
/** The edge's sliced pass for the recorder's tick, in checkouts that have one (transport/sliced-pass.ts). */
const sliced = await Promise.all([
  load<SliceLoopModule>('src/transport/slice-loop.ts'),
  load<SlicedPassModule>('src/transport/sliced-pass.ts'),
]).catch(() => undefined);

/** CPU ticks of this process's threads: the main thread's, and the others' user and system. */
function threadTicks(): { main: number; otherUser: number; otherSystem: number } {
  const out = { main: 0, otherUser: 0, otherSystem: 0 };
  for (const tid of readdirSync('/proc/self/task')) {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // fields from the 3rd on
    const user = Number(f[11]);
    const system = Number(f[12]);
    if (Number(tid) === process.pid) out.main += user + system;
    else {
      out.otherUser += user;
      out.otherSystem += system;
    }
  }
  return out;
}

const dir = mkdtempSync(join(tmpdir(), 'awp-recorder-sim-'));
const now = () => performance.now();
const token = 'agent-token-0123456789';
const recorder = await RouteRecorder.open(
  'arm',
  {
    dir,
    frames: 'hashes',
    rotateBytes: 1 << 26,
    rotateMs: 3_600_000,
    redactPaths: [],
    relay: false,
    observer: true,
    queueBytes: 16 << 20,
    retainFiles: 1e6,
    retainBytes: 2 ** 40,
  },
  {
    now,
    wallNow: () => Date.now(),
    isCredential: (v) => v === token,
    credentials: () => [token],
    maxJsonDepth: 64,
    header: { edge_version: 'recorder-sim' },
    // Only checkouts that have transport/sliced-pass.ts call it (older ones tick every log at once).
    sliced: <T>(each: (item: T, now: number) => void) => {
      const [{ SliceLoop }, { SlicedPass }] = sliced!;
      const ctx = {
        now,
        fault: (_where: string, err: unknown) => console.error(err),
        slices: new SliceLoop(now),
      };
      return new SlicedPass('recorder_tick', each, ctx);
    },
  },
  {
    written: () => undefined,
    dropped: () => undefined,
    deleted: () => undefined,
    closed: () => undefined,
    error: (file, err) => console.error(file, err),
  },
);

const rpc = (o: object) => JSON.stringify({ jsonrpc: '2.0', ...o });
const granted = [
  { channel: 'proprio', channel_id: 1 },
  { channel: 'camera', channel_id: 2 },
];
const logs: SessionLog[] = [];
for (let i = 0; i < N; i++) {
  const log = recorder.session('observer', `obs_${i.toString(16).padStart(8, '0')}`, 'opened');
  log.text('agent', rpc({ id: 1, method: 'session.open', params: { token } }), now());
  log.text('edge_to_agent', rpc({ id: 1, result: { granted, reconnect_window_ms: 30000 } }), now());
  logs.push(log);
}
const hub = recorder.hubLog('streaming');
const hubFile = hub.firstFile;
const header = createFrameHeader();
const frames = [40, 65536].map((bytes, i) =>
  encodeFrame({
    channel_id: i + 1,
    seq: 1,
    ts_mono_ns: 1,
    flags: 1,
    vendor: [],
    payload: Buffer.alloc(bytes, 7),
  }),
);

let numbered = 0;
function hubFrame(channel_id: number, at: number): number {
  const buf = frames[channel_id - 1]!;
  const n = numbered++;
  hub.sharedFrame(
    'world',
    {
      channel_id,
      payloadBytes: peekFrame(buf, header).payload_len,
      body: (keep) =>
        binaryFrameBody('obs.frame', buf, peekFrame(buf, header), undefined, keep, undefined, n),
    },
    at,
    channel_id === 1 ? 'proprio' : 'camera',
  );
  return n;
}

const telemetry = (i: number) =>
  rpc({
    method: 'session.telemetry',
    params: {
      window_ms: 1000,
      observation_latency_ns: { count: 25, p50: 120_000 + i, p95: 300_000, max: 900_000 },
      channels: { '1': { count: 20, p50: 110_000, p95: 200_000, max: 800_000 } },
    },
  });

/** One turn: the hub frames due since the last, and the observers whose second's slot this is. */
function turn(at: number, elapsedMs: number, due: number[]): void {
  for (const channel_id of due) {
    const n = values.none || SKIP.has('hub') ? numbered++ : hubFrame(channel_id, at);
    for (let i = 0; i < N; i++) {
      if (((i * 7919 + n * 104729) % 1000) / 1000 >= SHARE || values.none || SKIP.has('refs')) continue;
      logs[i]!.frameRef('edge_to_agent', hubFile, 'ws', n, at);
    }
  }
  if (values.none) return;
  const slot = Math.floor((elapsedMs % 1000) / 10);
  const second = Math.floor(elapsedMs / 1000);
  for (let i = Math.floor((slot * N) / 100); i < Math.floor(((slot + 1) * N) / 100); i++) {
    const log = logs[i]!;
    // The checkout before sentNumbers recorded telemetry like any message the edge sent.
    if (SKIP.has('telemetry')) {
      // not recorded
    } else if ('sentNumbers' in log) log.sentNumbers('edge_to_agent', telemetry(i), at);
    else (log as SessionLog).sent('edge_to_agent', telemetry(i), at);
    if (second % 5 === i % 5 && !SKIP.has('pings')) {
      const id = `hb_${Math.round(at)}`;
      log.sent('edge_to_agent', rpc({ id, method: 'ping', params: { origin_ns: Math.round(at * 1e6) } }), at);
      log.message('agent', rpc({ id, result: {} }), at);
    }
  }
}

const start = now();
let before: ReturnType<typeof threadTicks> | undefined;
let cpuBefore = process.cpuUsage();
let nextFrame = start;
let frameCount = 0;
await new Promise<void>((done) => {
  const timer = setInterval(() => {
    const at = now();
    const elapsed = at - start;
    if (before === undefined && elapsed >= WARMUP_S * 1000) {
      before = threadTicks();
      cpuBefore = process.cpuUsage();
    }
    if (elapsed >= (WARMUP_S + WINDOW_S) * 1000) {
      clearInterval(timer);
      done();
      return;
    }
    const due: number[] = [];
    for (; nextFrame < at; nextFrame += 1000 / 130) due.push(frameCount++ % 13 < 3 ? 2 : 1);
    turn(at, elapsed, due);
  }, 10);
});
const after = threadTicks();
const cpu = process.cpuUsage(cpuBefore);
const perS = (ticks: number) => Math.round((ticks * 1000) / TICKS / WINDOW_S);
console.log(
  JSON.stringify({
    root,
    recording: !values.none,
    observers: N,
    window_s: WINDOW_S,
    share: SHARE,
    cpu_ms_per_s: Math.round((cpu.user + cpu.system) / 1000 / WINDOW_S),
    main_ms_per_s: perS(after.main - before!.main),
    other_user_ms_per_s: perS(after.otherUser - before!.otherUser),
    other_system_ms_per_s: perS(after.otherSystem - before!.otherSystem),
  }),
);
await recorder.close('done');
rmSync(dir, { recursive: true, force: true });
