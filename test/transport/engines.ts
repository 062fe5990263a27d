/**
 * The agent-facing engines that can run in this runtime, and a recording server for behaviour tests.
 * `ws` always runs; `uws` runs where uWebSockets.js loads (see .ci/runtimes.sh for old-glibc machines).
 */
import type {
  AgentServer,
  ConnectionHandlers,
  EngineOptions,
  ServerConnection,
  UpgradeOutcome,
  UpgradeRequest,
} from '../../src/transport/engine.js';
import { uwsAvailability } from '../../src/transport/uws-load.js';
import { listenWs } from '../../src/transport/ws-engine.js';

export type EngineName = 'ws' | 'uws' | 'uws-worker';

export interface EngineCase {
  readonly name: EngineName;
  /** Why the engine cannot run here; undefined when it can. */
  readonly unavailable: string | undefined;
  listen(opts: EngineOptions): Promise<AgentServer>;
}

const uws = uwsAvailability();

export const ENGINES: readonly EngineCase[] = [
  { name: 'ws', unavailable: undefined, listen: listenWs },
  {
    name: 'uws',
    unavailable: uws.ok ? undefined : uws.reason,
    listen: async (opts) => (await import('../../src/transport/uws-engine.js')).listenUws(opts),
  },
  {
    // uWebSockets.js on a worker thread, as observers' stream connections are served (`stream_listen`),
    // at a lower priority (`stream_worker_nice`): the engine behaves the same.
    name: 'uws-worker',
    unavailable: uws.ok ? undefined : uws.reason,
    listen: async (opts) =>
      (await import('../../src/transport/stream-worker.js')).listenStreamWorker({ ...opts, nice: 5 }),
  },
];

/** What the server side of one connection saw. */
export interface ServerSide {
  readonly conn: ServerConnection;
  readonly messages: { data: string | Uint8Array; binary: boolean }[];
  readonly closes: { code: number; reason: string }[];
  drains: number;
}

export interface Recorder {
  readonly server: AgentServer;
  readonly url: string;
  readonly requests: UpgradeRequest[];
  readonly sides: ServerSide[];
  /** The next connection's server side, once open. */
  nextSide(timeoutMs?: number): Promise<ServerSide>;
  close(): Promise<void>;
}

export interface RecorderOptions {
  readonly maxMessageBytes?: number;
  readonly pingIntervalMs?: number;
  /** Decides each upgrade; accepts by default. */
  readonly decide?: (req: UpgradeRequest) => Promise<UpgradeOutcome | 'accept'> | UpgradeOutcome | 'accept';
  /** Called on each message, after it is recorded. */
  readonly onMessage?: (side: ServerSide, data: string | Uint8Array, binary: boolean) => void;
  readonly port?: number;
}

/** Starts an engine whose connections record everything they see. */
export async function startRecorder(engine: EngineCase, o: RecorderOptions = {}): Promise<Recorder> {
  const requests: UpgradeRequest[] = [];
  const sides: ServerSide[] = [];
  const waiters: ((s: ServerSide) => void)[] = [];
  const open = (conn: ServerConnection): ConnectionHandlers => {
    const side: ServerSide = { conn, messages: [], closes: [], drains: 0 };
    sides.push(side);
    queueMicrotask(() => waiters.shift()?.(side));
    return {
      message: (data, binary) => {
        side.messages.push({ data, binary });
        o.onMessage?.(side, data, binary);
      },
      drain: () => side.drains++,
      close: (code, reason) => side.closes.push({ code, reason }),
    };
  };
  const server = await engine.listen({
    host: '127.0.0.1',
    port: o.port ?? 0,
    maxMessageBytes: o.maxMessageBytes ?? 4 * 1024 * 1024,
    pingIntervalMs: o.pingIntervalMs ?? 0,
    upgrade: async (req) => {
      requests.push(req);
      const d = o.decide ? await o.decide(req) : 'accept';
      return d === 'accept' ? { accept: true, protocol: 'awp', open } : d;
    },
  });
  let seen = 0;
  return {
    server,
    url: `ws://127.0.0.1:${server.port}`,
    requests,
    sides,
    nextSide: (timeoutMs = 5000) => {
      const i = seen++;
      if (sides[i] !== undefined) return Promise.resolve(sides[i]);
      return withTimeout(
        new Promise<ServerSide>((resolve) => waiters.push(resolve)),
        timeoutMs,
        'server-side open',
      );
    },
    close: () => server.close(),
  };
}

export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/** Polls until `pred` holds; fails after `ms`. */
export async function waitFor(pred: () => boolean, ms: number, what: string): Promise<void> {
  const start = Date.now();
  while (!pred()) {
    if (Date.now() - start > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
