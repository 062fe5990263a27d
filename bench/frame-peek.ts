/**
 * Frame peek micro-benchmark: header-only validation (peekFrame, reused `out`) against the full decode baseline
 * (decodeFrame) for a few frame shapes; time per frame and bytes allocated per frame.
 *
 * Run:  node --expose-gc --import tsx bench/frame-peek.ts
 * (Without --expose-gc the script enables gc itself through v8.setFlagsFromString.) Prints one JSON summary on
 * stdout. `measureFramePeek()` is exported so a test can call it.
 */
import { PerformanceObserver, constants } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import v8 from 'node:v8';
import vm from 'node:vm';
import { createFrameHeader, decodeFrame, peekFrame } from '../src/protocol/frame.js';
import { encodeFrame } from '../src/protocol/frame-encode.js';
import type { Frame } from '../src/protocol/frame.js';

export interface OpResult {
  ns_per_op: number;
  bytes_per_frame: number;
}

export interface CaseResult {
  shape: string;
  frame_bytes: number;
  peek: OpResult;
  decode: OpResult;
  ratio_decode_over_peek: number;
}

export interface FramePeekSummary {
  bench: 'frame-peek';
  node: string;
  cases: CaseResult[];
  method: string;
}

export interface MeasureOptions {
  /** Operations per timing round (5 rounds, median reported). */
  timeIterations?: number;
  /** Operations per allocation window (the window shrinks if a collection interrupts it). */
  allocIterations?: number;
  /** Allocation windows per operation (median reported). */
  allocWindows?: number;
}

const METHOD =
  'Time: after a warm-up that lets V8 optimise both functions, 5 rounds of N calls on the same frame bytes, ' +
  'timed with process.hrtime.bigint(); median round / N. Frames are Buffers, as sockets deliver them. Allocation: for each of several windows, gc() empties ' +
  'the heap, v8.getHeapStatistics().used_heap_size is read, N calls run, and it is read again; without a ' +
  'collection in between, the delta is exactly the bytes allocated. A PerformanceObserver on "gc" entries ' +
  '(forced collections excluded) detects any collection inside a window; such windows are discarded and ' +
  'retried with half N. The same harness around an empty operation gives the harness overhead, which is ' +
  'subtracted; median window / N. Results are kept in a sink so nothing is optimised away.';

function getGc(): () => void {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed !== undefined) return exposed;
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};
const round = (x: number, digits: number): number => Number(x.toFixed(digits));
const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

// Sinks keep results observable so nothing is optimised away; a Float64Array slot stores a number unboxed
// (a module-level `let` would box every non-small number on the heap and pollute the allocation count).
const sinkNumber = new Float64Array(1);
let sinkObject: unknown = null;

type Op = (buf: Uint8Array) => void;

function timeOp(op: Op, buf: Uint8Array, iterations: number): number {
  const rounds: number[] = [];
  for (let r = 0; r < 5; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < iterations; i++) op(buf);
    rounds.push(Number(process.hrtime.bigint() - t0) / iterations);
  }
  return median(rounds);
}

async function allocOp(
  op: Op,
  buf: Uint8Array,
  iterations: number,
  windows: number,
  gc: () => void,
  collections: () => number,
): Promise<number> {
  const perOp: number[] = [];
  let n = iterations;
  while (perOp.length < windows) {
    gc();
    await nextTurn();
    await nextTurn();
    const before = collections();
    const h0 = v8.getHeapStatistics().used_heap_size;
    for (let i = 0; i < n; i++) op(buf);
    const h1 = v8.getHeapStatistics().used_heap_size;
    await nextTurn();
    await nextTurn();
    if (collections() !== before) {
      if (n <= 16) throw new Error('allocation windows keep being interrupted by collections');
      n = Math.floor(n / 2);
      continue;
    }
    perOp.push((h1 - h0) / n);
  }
  return median(perOp);
}

const header = createFrameHeader();
const peekOp: Op = (buf) => {
  sinkNumber[0] = sinkNumber[0]! + peekFrame(buf, header).seq;
};
const decodeOp: Op = (buf) => {
  sinkObject = decodeFrame(buf);
};
const emptyOp: Op = (buf) => {
  sinkNumber[0] = sinkNumber[0]! + buf.length;
};

function shapes(): { shape: string; frame: Frame }[] {
  const base = { channel_id: 1, seq: 4211, ts_mono_ns: 913004112000, flags: 1, vendor: [] };
  const small = Buffer.from('{"q_rad":[0.12,-1.04,0.88]}');
  return [
    { shape: 'no-ext, 27 B payload', frame: { ...base, payload: small } },
    {
      shape: 'tick+ts_send_ns, 27 B payload',
      frame: { ...base, tick: 4212, ts_send_ns: 913004120200, payload: small },
    },
    {
      shape: 'ts_send_ns, 64 KiB payload',
      frame: { ...base, ts_send_ns: 913004120200, payload: Buffer.alloc(65536, 7) },
    },
  ];
}

export async function measureFramePeek(options: MeasureOptions = {}): Promise<FramePeekSummary> {
  const timeIterations = options.timeIterations ?? 1_000_000;
  const allocIterations = options.allocIterations ?? 2_000;
  const allocWindows = options.allocWindows ?? 9;
  const gc = getGc();
  let unforced = 0;
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const detail = (entry as { detail?: { flags?: number } }).detail;
      if (((detail?.flags ?? 0) & constants.NODE_PERFORMANCE_GC_FLAGS_FORCED) === 0) unforced += 1;
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  try {
    const cases = shapes().map(({ shape, frame }) => ({ shape, buf: encodeFrame(frame) }));
    // Warm-up: every op on every shape, so V8 optimises each for all the shapes it will see.
    for (let w = 0; w < 3; w++) {
      for (const c of cases) for (const op of [peekOp, decodeOp, emptyOp]) timeOp(op, c.buf, 20_000);
    }
    // The allocation harness itself gets compiled (code is heap too) during its first windows: warm it up.
    for (const op of [emptyOp, peekOp, decodeOp])
      await allocOp(op, cases[0]!.buf, allocIterations, 3, gc, () => unforced);
    const measure = async (op: Op, buf: Buffer): Promise<{ ns: number; bytes: number }> => {
      timeOp(op, buf, 50_000); // settle this op on this shape before counting
      const bytes = await allocOp(op, buf, allocIterations, allocWindows, gc, () => unforced);
      return { ns: timeOp(op, buf, timeIterations), bytes };
    };
    const results: CaseResult[] = [];
    for (const c of cases) {
      const harness = await measure(emptyOp, c.buf);
      const peek = await measure(peekOp, c.buf);
      const decode = await measure(decodeOp, c.buf);
      results.push({
        shape: c.shape,
        frame_bytes: c.buf.length,
        peek: { ns_per_op: round(peek.ns, 2), bytes_per_frame: round(peek.bytes - harness.bytes, 2) },
        decode: { ns_per_op: round(decode.ns, 2), bytes_per_frame: round(decode.bytes - harness.bytes, 2) },
        ratio_decode_over_peek: round(decode.ns / peek.ns, 2),
      });
    }
    if (sinkObject === null || !(sinkNumber[0]! > 0)) throw new Error('sink lost');
    return { bench: 'frame-peek', node: process.version, cases: results, method: METHOD };
  } finally {
    observer.disconnect();
  }
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) {
  const summary = await measureFramePeek();
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
}
