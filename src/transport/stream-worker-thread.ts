/**
 * The stream worker's thread: a uWebSockets.js server (uws-engine.ts, unchanged) whose sockets live here,
 * so the engine's writes (its publishes and the socket backpressure it works off) take this thread's time,
 * not the main thread's, which answers control messages. Every decision stays on the main thread: this
 * thread forwards upgrades and socket events there, and carries out the operations it sends back.
 */
import { getPriority, setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import type { ConnectionHandlers, ServerConnection, UpgradeOutcome } from './engine.js';
import { listenUws } from './uws-engine.js';
import {
  Op,
  OP_INTS,
  type FromWorker,
  type ToWorker,
  type WorkerEvent,
  type WorkerSetup,
} from './stream-worker-wire.js';

/** The least the main thread may have of the connections' messages in hand (see `maxInbound`). */
const MIN_INBOUND_BYTES = 1024 * 1024;

interface Live {
  readonly conn: ServerConnection;
  /** The bytes the engine held for it when last reported. */
  reported: number;
  readonly topics: Set<string>;
}

const port = parentPort!;
const setup = workerData as WorkerSetup;
// Added to the niceness this thread started with (the main thread's), as `nice -n` adds: lowering a
// priority needs no privilege. On Linux setpriority(pid 0) is this thread's alone.
if (setup.nice !== 0) setPriority(0, Math.min(19, getPriority(0) + setup.nice));
const conns = new Map<number, Live>();
/** Members of each topic, to report what a publish added to their buffers. */
const members = new Map<string, Set<number>>();
const upgrades = new Map<number, (outcome: UpgradeOutcome) => void>();
let nextReq = 1;
let nextId = 1;
let acked = 0;
/** Time spent carrying out batches since the last report (us): the main thread scales its estimates by it. */
let spentUs = 0;
let events: WorkerEvent[] = [];
const touched = new Set<number>();
let flushing = false;
/** Bytes of messages handed to the main thread and not yet handled there, and how many may be. */
let inbound = 0;
const maxInbound = Math.max(MIN_INBOUND_BYTES, 4 * setup.maxMessageBytes);

function emit(e: WorkerEvent): void {
  events.push(e);
  scheduleFlush();
}

/** Once per turn of this thread: its events, the last batch carried out and changed buffer readings. */
function scheduleFlush(): void {
  if (flushing) return;
  flushing = true;
  setImmediate(flush);
}

function flush(): void {
  flushing = false;
  const readings: number[] = [];
  for (const id of touched) {
    const live = conns.get(id);
    if (live === undefined) continue;
    const now = live.conn.bufferedAmount;
    if (now === live.reported) continue;
    live.reported = now;
    readings.push(id, now);
  }
  touched.clear();
  const msg: FromWorker = { t: 'events', acked, spentUs, events, buffered: Float64Array.from(readings) };
  events = [];
  spentUs = 0;
  port.postMessage(msg, [msg.buffered.buffer as ArrayBuffer]);
}

function fault(err: unknown): void {
  emit({ k: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
}

// The containment boundary of this thread: a worker that ended with its sockets open would take the process
// with it (Node checks that a worker's event loop holds no open handle), so what escapes is reported.
process.on('uncaughtException', fault);
process.on('unhandledRejection', fault);

const server = await listenUws({
  host: setup.host,
  port: setup.port,
  maxMessageBytes: setup.maxMessageBytes,
  pingIntervalMs: setup.pingIntervalMs,
  tls: setup.tls,
  ...(setup.handshake !== undefined && { handshake: setup.handshake }),
  onHandshakeClosed: (reason) => emit({ k: 'handshake', reason }),
  onError: fault,
  upgrade: (req) =>
    new Promise<UpgradeOutcome>((resolve) => {
      const id = nextReq++;
      upgrades.set(id, resolve);
      const headers = [...(req.headers ?? new Map<string, string>())];
      const request = {
        path: req.path,
        query: req.query,
        headers,
        protocols: req.protocols,
        remoteAddress: req.remoteAddress,
      };
      emit({ k: 'upgrade', req: id, request });
    }),
}).catch((err: unknown) => {
  const e = err instanceof Error ? (err as Error & Record<string, unknown>) : undefined;
  const details = Object.fromEntries(
    ['code', 'errno', 'syscall', 'address', 'port'].flatMap((k) => (e?.[k] !== undefined ? [[k, e[k]]] : [])),
  );
  const msg: FromWorker = { t: 'failed', message: e?.message ?? String(err), details };
  port.postMessage(msg);
  return undefined;
});

if (server !== undefined) {
  port.on('message', (msg: ToWorker) => {
    switch (msg.t) {
      case 'batch':
        carryOut(msg);
        return;
      case 'answer':
        answer(msg);
        return;
      case 'consumed':
        inbound -= msg.bytes;
        return;
      case 'close':
        void server.close().then(() => {
          flush(); // the closes of its connections, before it says it is closed
          Atomics.store(setup.closedFlag, 0, 1);
          Atomics.notify(setup.closedFlag, 0);
          port.postMessage({ t: 'closed' } satisfies FromWorker);
        });
        return;
    }
  });
  port.postMessage({ t: 'listening', port: server.port } satisfies FromWorker);
}

function answer(msg: Extract<ToWorker, { t: 'answer' }>): void {
  const resolve = upgrades.get(msg.req);
  if (resolve === undefined) return;
  upgrades.delete(msg.req);
  if (!msg.accept) {
    resolve({ accept: false, status: msg.status, body: msg.body });
    return;
  }
  const req = msg.req;
  resolve({
    accept: true,
    protocol: 'awp',
    open: (conn) => opened(req, conn),
    abandon: () => emit({ k: 'abandon', req }),
  });
}

function opened(req: number, conn: ServerConnection): ConnectionHandlers {
  const id = nextId++;
  conns.set(id, { conn, reported: 0, topics: new Set() });
  emit({ k: 'open', req, id, remoteAddress: conn.remoteAddress });
  return {
    message: (data, binary) => {
      // A peer that sends faster than the main thread handles its messages would fill this process's
      // memory with them (no engine here pauses reading): it is closed instead, as a queue that overflows.
      const size = data.length;
      if (inbound + size > maxInbound) {
        conn.close(1008, 'messages arrive faster than the edge handles them');
        return;
      }
      inbound += size;
      emit({ k: 'message', id, data, binary, size });
    },
    drain: () => {
      touched.add(id);
      emit({ k: 'drain', id });
    },
    close: (code, reason) => {
      const live = conns.get(id);
      conns.delete(id);
      for (const topic of live?.topics ?? []) leave(topic, id);
      emit({ k: 'close', id, code, reason });
    },
  };
}

/** Carries out one batch in order; an operation on a connection that has closed is dropped, as in-process. */
function carryOut(b: Extract<ToWorker, { t: 'batch' }>): void {
  const started = performance.now();
  const { ops, payloads, strings } = b;
  for (let i = 0; i < ops.length; i += OP_INTS) {
    const id = ops[i + 1]!;
    const a = ops[i + 2]!;
    if (ops[i] === Op.Publish) {
      try {
        publish(strings[a]!, payloads[ops[i + 3]!]!);
      } catch (err) {
        fault(err);
      }
      continue;
    }
    const live = conns.get(id);
    if (live === undefined) continue;
    const c = live.conn;
    try {
      switch (ops[i]) {
        case Op.SendBinary:
          c.send(payloads[a]!, true);
          touched.add(id);
          break;
        case Op.SendText:
          c.send(strings[a]!, false);
          touched.add(id);
          break;
        case Op.Close:
          c.close(a, strings[ops[i + 3]!]!);
          break;
        case Op.Terminate:
          c.terminate();
          break;
        case Op.Subscribe:
          if (c.topics?.subscribe(strings[a]!)) join(strings[a]!, live, id);
          break;
        case Op.Unsubscribe:
          c.topics?.unsubscribe(strings[a]!);
          leave(strings[a]!, id);
          live.topics.delete(strings[a]!);
          break;
      }
    } catch (err) {
      fault(err);
      c.terminate();
    }
  }
  acked = b.seq;
  spentUs += (performance.now() - started) * 1000;
  scheduleFlush();
}

/**
 * One message to every member of the topic, through any member's handle (the server's publish): the
 * connection the main thread named may have closed here since.
 */
function publish(topic: string, data: Uint8Array): void {
  const set = members.get(topic);
  if (set === undefined) return;
  for (const id of set) {
    conns.get(id)!.conn.topics!.publish(topic, data);
    break;
  }
  for (const id of set) touched.add(id);
}

function join(topic: string, live: Live, id: number): void {
  let set = members.get(topic);
  if (set === undefined) members.set(topic, (set = new Set()));
  set.add(id);
  live.topics.add(topic);
}

function leave(topic: string, id: number): void {
  const set = members.get(topic);
  set?.delete(id);
  if (set?.size === 0) members.delete(topic);
}
