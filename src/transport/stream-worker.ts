/**
 * An engine whose sockets live on a worker thread (stream-worker-thread.ts): the edge serves observers'
 * stream connections with it (`stream_listen`), so the engine's writes of fan-out frames, most of the
 * fan-out's cost under load (uWS's publish and its backpressure writes), no longer hold up the main
 * thread's event loop, where control messages, relay traffic and heartbeats are answered.
 *
 * To the edge it is an engine like the others (engine.ts): connections, topics, drain and close. What
 * differs is time: an operation is carried out when the worker reads its batch, and a connection's
 * `bufferedAmount` is the worker's last reading plus what was sent to it and is not yet carried out
 * (beyond a burst, where its socket keeps up; stream-worker-connection.ts). Its `backlog` says when two
 * batches are out or the turn's is full (by its estimated cost to the worker, stream-worker-cost.ts), for
 * the edge's sliced work to wait (slice-loop.ts); its `thread` tells operators how busy the worker is
 * (metrics).
 */
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import {
  type AgentServer,
  type EngineBacklog,
  type EngineOptions,
  type EngineThread,
  type UpgradeOutcome,
  type UpgradeRequest,
} from './engine.js';
import {
  Op,
  type FromWorker,
  type ToWorker,
  type WireRequest,
  type WorkerEvent,
  type WorkerSetup,
} from './stream-worker-wire.js';
import { RemoteConnection, type WorkerSide } from './stream-worker-connection.js';
import { BatchCost } from './stream-worker-cost.js';

/** How long a close waits for the worker to close its sockets before stopping it. */
const CLOSE_WAIT_MS = 5000;
/** How long an exiting process waits for the worker to close its sockets. */
const EXIT_WAIT_MS = 2000;

type Accepted = Extract<UpgradeOutcome, { accept: true }>;

class StreamWorker implements WorkerSide {
  acked = 0;
  readonly waiting = new Set<RemoteConnection>();
  private worker: Worker | undefined;
  private seq = 1;
  private ops: number[] = [];
  private payloads: Uint8Array[] = [];
  private payloadIndex = new Map<Uint8Array, number>();
  private strings: string[] = [];
  private stringIndex = new Map<string, number>();
  private scheduled = false;
  private readonly cost = new BatchCost();
  private readonly batchListeners: ((seconds: number) => void)[] = [];
  /** Members of each topic (subscribed here, whatever the worker has carried out yet). */
  private readonly members = new Map<string, number>();
  private readonly conns = new Map<number, RemoteConnection>();
  private readonly accepted = new Map<number, Accepted>();
  private closing = false;
  private closed: (() => void) | undefined;
  private closedFlag: Int32Array | undefined;
  private readonly caughtUp: (() => void)[] = [];
  /** See EngineBacklog: BATCHES_IN_FLIGHT batches posted are not yet carried out. */
  readonly backlog: EngineBacklog = {
    behind: () => this.cost.behind(),
    full: () => this.cost.full(),
    onCaughtUp: (fn) => this.caughtUp.push(fn),
  };
  readonly thread: EngineThread = {
    onBatch: (fn) => this.batchListeners.push(fn),
    busyMs: () => this.worker?.performance.eventLoopUtilization().active ?? 0,
  };
  /**
   * A process that exits with the worker's sockets open aborts (Node checks a worker's event loop has no
   * open handle when it ends it): on exit the worker closes its server first, waited for here, briefly.
   */
  readonly onExit = () => {
    if (this.worker === undefined || this.closedFlag === undefined) return;
    this.flush();
    this.worker.postMessage({ t: 'close' } satisfies ToWorker);
    Atomics.wait(this.closedFlag, 0, 0, EXIT_WAIT_MS);
  };
  port = 0;

  constructor(private readonly opts: StreamWorkerOptions) {}

  /** Starts the worker; rejects with the engine's reason when it cannot listen. */
  start(): Promise<void> {
    const setup: WorkerSetup = {
      host: this.opts.host,
      port: this.opts.port,
      maxMessageBytes: this.opts.maxMessageBytes,
      pingIntervalMs: this.opts.pingIntervalMs,
      tls: this.opts.tls,
      handshake: this.opts.handshake,
      nice: this.opts.nice,
      closedFlag: new Int32Array(new SharedArrayBuffer(4)),
    };
    const worker = spawnThread(setup);
    this.worker = worker;
    this.closedFlag = setup.closedFlag;
    return new Promise((resolve, reject) => {
      let listening = false;
      worker.on('message', (msg: FromWorker) => {
        switch (msg.t) {
          case 'listening':
            listening = true;
            this.port = msg.port;
            resolve();
            return;
          case 'failed':
            reject(Object.assign(new Error(msg.message), msg.details));
            void worker.terminate();
            return;
          case 'events':
            this.received(msg);
            return;
          case 'closed':
            this.closed?.();
            return;
        }
      });
      worker.on('error', (err) => {
        if (listening) this.opts.onError?.(err);
        else reject(err);
      });
      worker.on('exit', (code) => {
        if (this.worker !== worker) return;
        this.worker = undefined;
        this.lost();
        if (!listening) reject(new Error(`the stream worker ended (exit code ${code}) before listening`));
        else if (!this.closing) this.opts.onError?.(new Error(`the stream worker ended (exit code ${code})`));
      });
    });
  }

  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    process.off('exit', this.onExit);
    const worker = this.worker;
    if (worker === undefined) return;
    this.flush();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, CLOSE_WAIT_MS);
      this.closed = () => {
        clearTimeout(timer);
        resolve();
      };
      worker.postMessage({ t: 'close' } satisfies ToWorker);
    });
    this.worker = undefined;
    await worker.terminate();
    this.lost();
  }

  // ---- operations, batched once per turn ----

  op(code: number, id: number, a: number, b: number): void {
    this.ops.push(code, id, a, b);
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => this.flush());
  }

  str(s: string): number {
    let i = this.stringIndex.get(s);
    if (i === undefined) {
      i = this.strings.push(s) - 1;
      this.stringIndex.set(s, i);
    }
    return i;
  }

  /** The payload's index in this batch: copied once (a view may share its buffer with other data). */
  private payload(data: Uint8Array): number {
    let i = this.payloadIndex.get(data);
    if (i === undefined) {
      i = this.payloads.push(new Uint8Array(data)) - 1;
      this.payloadIndex.set(data, i);
    }
    return i;
  }

  send(c: RemoteConnection, data: string | Uint8Array, binary: boolean): void {
    if (typeof data === 'string' || !binary) {
      const text = typeof data === 'string' ? data : Buffer.from(data).toString('utf8');
      const bytes = Buffer.byteLength(text);
      this.op(Op.SendText, c.id, this.str(text), 0);
      c.pending.add(bytes, this.seq, this.acked);
      this.cost.write(bytes);
      return;
    }
    this.op(Op.SendBinary, c.id, this.payload(data), 0);
    c.pending.add(data.byteLength, this.seq, this.acked);
    this.cost.write(data.byteLength);
  }

  publish(c: RemoteConnection, topic: string, data: Uint8Array): void {
    this.op(Op.Publish, c.id, this.str(topic), this.payload(data));
    this.cost.write(data.byteLength, this.members.get(topic) ?? 0);
  }

  /** Counts the topic's members (a connection's subscribe and unsubscribe arrive in pairs, once each). */
  joined(c: RemoteConnection, topic: string, delta: 1 | -1): void {
    if (delta === 1 ? c.joined.has(topic) : !c.joined.has(topic)) return;
    if (delta === 1) c.joined.add(topic);
    else c.joined.delete(topic);
    const n = (this.members.get(topic) ?? 0) + delta;
    if (n > 0) this.members.set(topic, n);
    else this.members.delete(topic);
  }

  private flush(): void {
    this.scheduled = false;
    if (this.ops.length === 0) return;
    if (this.worker === undefined) {
      // The worker ended: nothing would carry the batch out, and its cost must not hold turns full.
      this.dropBatch();
      this.cost.clear();
      return;
    }
    this.cost.handedOver(this.seq, performance.now());
    const msg: ToWorker = {
      t: 'batch',
      seq: this.seq++,
      ops: Int32Array.from(this.ops),
      payloads: this.payloads,
      strings: this.strings,
    };
    this.worker.postMessage(msg, [
      msg.ops.buffer as ArrayBuffer,
      ...this.payloads.map((p) => p.buffer as ArrayBuffer),
    ]);
    this.dropBatch();
  }

  /** Starts the next batch afresh (after handing this one over, or when no worker is left to take it). */
  private dropBatch(): void {
    this.ops = [];
    this.payloads = [];
    this.payloadIndex = new Map();
    this.strings = [];
    this.stringIndex = new Map();
  }

  // ---- what the worker reports ----

  private received(msg: Extract<FromWorker, { t: 'events' }>): void {
    const wasBehind = this.backlog.behind();
    if (msg.acked > this.acked)
      for (const ms of this.cost.carriedOut(msg.acked, msg.spentUs, performance.now()))
        for (const fn of this.batchListeners) fn(ms / 1000);
    this.acked = msg.acked;
    const b = msg.buffered;
    for (let i = 0; i < b.length; i += 2) {
      const c = this.conns.get(b[i]!);
      if (c !== undefined) c.reported = b[i + 1]!;
    }
    let consumed = 0;
    for (const e of msg.events) {
      this.event(e);
      if (e.k === 'message') consumed += e.size;
    }
    if (consumed > 0) this.worker?.postMessage({ t: 'consumed', bytes: consumed } satisfies ToWorker);
    if (this.waiting.size > 0) {
      const waiting = [...this.waiting];
      this.waiting.clear();
      for (const c of waiting) if (!c.gone) c.handlers?.drain();
    }
    if (wasBehind && !this.backlog.behind()) for (const fn of this.caughtUp) fn();
  }

  private event(e: WorkerEvent): void {
    switch (e.k) {
      case 'upgrade':
        this.decide(e.req, e.request);
        return;
      case 'open':
        this.open(e.req, e.id, e.remoteAddress);
        return;
      case 'abandon':
        this.accepted.get(e.req)?.abandon?.();
        this.accepted.delete(e.req);
        return;
      case 'message': {
        const data =
          typeof e.data === 'string'
            ? e.data
            : Buffer.from(e.data.buffer, e.data.byteOffset, e.data.byteLength);
        this.conns.get(e.id)?.handlers?.message(data, e.binary);
        return;
      }
      case 'drain':
        this.conns.get(e.id)?.handlers?.drain();
        return;
      case 'close': {
        const c = this.conns.get(e.id);
        if (c === undefined) return;
        this.conns.delete(e.id);
        this.gone(c, e.code, e.reason);
        return;
      }
      case 'handshake':
        this.opts.onHandshakeClosed?.(e.reason);
        return;
      case 'error':
        this.opts.onError?.(new Error(`stream worker: ${e.message}`));
        return;
    }
  }

  private decide(req: number, wire: WireRequest): void {
    const headers = new Map(wire.headers);
    const request: UpgradeRequest = {
      path: wire.path,
      query: wire.query,
      header: (name) => headers.get(name.toLowerCase()),
      headers,
      protocols: wire.protocols,
      remoteAddress: wire.remoteAddress,
    };
    const refuse = (status: number, body: string) =>
      this.worker?.postMessage({ t: 'answer', req, accept: false, status, body } satisfies ToWorker);
    const answer = (outcome: UpgradeOutcome) => {
      if (!outcome.accept) return refuse(outcome.status, outcome.body);
      if (this.worker === undefined) return outcome.abandon?.();
      this.accepted.set(req, outcome);
      this.worker.postMessage({ t: 'answer', req, accept: true } satisfies ToWorker);
    };
    const failed = (err: unknown) => {
      this.opts.onError?.(err);
      refuse(500, 'internal error\n');
    };
    try {
      const decided = this.opts.upgrade(request);
      if (decided instanceof Promise) decided.then(answer, failed);
      else answer(decided);
    } catch (err) {
      failed(err);
    }
  }

  private open(req: number, id: number, remoteAddress: string): void {
    const outcome = this.accepted.get(req);
    this.accepted.delete(req);
    const c = new RemoteConnection(this, id, remoteAddress);
    if (outcome === undefined) {
      c.terminate();
      return;
    }
    this.conns.set(id, c);
    try {
      c.handlers = outcome.open(c);
    } catch (err) {
      this.opts.onError?.(err);
      outcome.abandon?.();
      c.close(1011, 'internal error');
    }
  }

  private gone(c: RemoteConnection, code: number, reason: string): void {
    c.gone = true;
    this.waiting.delete(c);
    for (const topic of [...c.joined]) this.joined(c, topic, -1);
    c.handlers?.close(code, reason);
  }

  /** The worker ended: its connections are closed (1006, as a dropped TCP connection reads). */
  private lost(): void {
    // Nothing is in flight any more: work held for the worker goes on (for the other connections).
    const wasBehind = this.backlog.behind();
    this.acked = this.seq - 1;
    if (wasBehind) for (const fn of this.caughtUp) fn();
    for (const outcome of this.accepted.values()) outcome.abandon?.();
    this.accepted.clear();
    const conns = [...this.conns.values()];
    this.conns.clear();
    for (const c of conns) this.gone(c, 1006, '');
    this.dropBatch();
    this.cost.clear(); // before a turn that the catching up scheduled runs
  }
}

/**
 * The worker. From source (tests, tsx) its module is TypeScript: the thread registers tsx's loader itself
 * first (Node 20 applies no `--import` to a worker).
 */
function spawnThread(setup: WorkerSetup): Worker {
  const ts = import.meta.url.endsWith('.ts');
  const file = new URL(`./stream-worker-thread.${ts ? 'ts' : 'js'}`, import.meta.url);
  // Named for `top -H` and the bench's per-thread CPU (a thread name holds 15 characters).
  const name = 'stream-worker';
  if (!ts) return new Worker(file, { workerData: setup, name });
  // tsx's ESM entry (`require.resolve` would name its CommonJS one).
  const pkg = pathToFileURL(createRequire(import.meta.url).resolve('tsx/package.json'));
  const tsx = new URL('dist/esm/api/index.mjs', pkg).href;
  const boot = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(file.href)}); })`;
  return new Worker(boot, { eval: true, workerData: setup, name });
}

/** The engine's options, and how much the worker thread's niceness exceeds the main thread's. */
export interface StreamWorkerOptions extends EngineOptions {
  readonly nice: number;
}

/**
 * Listens with uWebSockets.js on a worker thread. The options are the engine's; `plain` is not served
 * there (a plain request is answered 426), and `upgrade`, `onError` and `onHandshakeClosed` run on the
 * calling thread.
 */
export async function listenStreamWorker(opts: StreamWorkerOptions): Promise<AgentServer> {
  const w = new StreamWorker(opts);
  await w.start();
  process.on('exit', w.onExit);
  return {
    engine: 'uws',
    get port() {
      return w.port;
    },
    backlog: w.backlog,
    thread: w.thread,
    close: () => w.close(),
  };
}
