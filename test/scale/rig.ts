/**
 * What the scale-out tests share: a real redis-server, the demo arm world in this process (so the
 * tests can read what the world assigned), edge replicas as child processes, and an agent that
 * processes its statuses a little behind what it received and acknowledges in its own pings.
 */
import { spawn } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, onTestFailed } from 'vitest';
import { startDemoWorld, type RunningDemoWorld } from '../../src/demo/index.js';
import { AwpClient, initializeParams, type Json } from '../support/awp-client.js';
import {
  EDGE_AGENT_TOKEN,
  startEdgeProcess,
  type EdgeProcess,
  type EdgeProcessOptions,
} from '../support/edge-process.js';

export { EDGE_AGENT_TOKEN };

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** Registers teardown for the current test; run in reverse order after it. */
export function useCleanups(): (fn: () => Promise<void> | void) => void {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) {
      try {
        await c();
      } catch {
        // teardown goes on: every process must be stopped
      }
    }
  });
  return (fn) => {
    cleanups.push(fn);
  };
}

/** About 4 s of motion from the arm's home pose ([0, 0, 0.4]): progress every 250 ms. */
export const SLOW_MOVE = {
  pose: { frame: 'base', p_m: [0.2, 0, 0.4], q: [0, 0, 0, 1] },
  max_velocity_mps: 0.05,
};
/** Back home quickly (under a second). */
export const QUICK_MOVE = {
  pose: { frame: 'base', p_m: [0, 0, 0.4], q: [0, 0, 0, 1] },
  max_velocity_mps: 0.4,
};

export interface ArmWorldOptions {
  readonly watchdogMs?: number;
  readonly reconnectWindowMs?: number;
}

export async function startArmWorld(
  cleanup: ReturnType<typeof useCleanups>,
  o: ArmWorldOptions = {},
): Promise<RunningDemoWorld> {
  const world = await startDemoWorld({
    kind: 'arm',
    host: '127.0.0.1',
    port: 0,
    watchdogMs: o.watchdogMs ?? 8000,
    heartbeatIntervalMs: 1000,
    reconnectWindowMs: o.reconnectWindowMs ?? 20_000,
    progressIntervalMs: 250,
  });
  cleanup(() => world.close());
  return world;
}

/** A demo world as a child process (`src/demo/main.ts`), so its work does not load the test process. */
export async function startArmWorldProcess(
  cleanup: ReturnType<typeof useCleanups>,
  o: ArmWorldOptions = {},
): Promise<{ url: string; pid: number }> {
  const args = ['--import', 'tsx', 'src/demo/main.ts', '--kind', 'arm', '--port', '0'];
  args.push('--watchdog-ms', String(o.watchdogMs ?? 8000), '--heartbeat-interval-ms', '1000');
  args.push('--reconnect-window-ms', String(o.reconnectWindowMs ?? 20_000));
  const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  cleanup(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  let out = '';
  let err = '';
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  return new Promise((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`demo world did not start within 15 s:\n${err}`)), 15_000);
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      const line = out.split('\n').find((l) => l.startsWith('{"url"'));
      if (line === undefined) return;
      clearTimeout(timer);
      const info = JSON.parse(line) as { url: string; pid: number };
      done(info);
    });
    void exited.then(() => fail(new Error(`demo world exited:\n${err}`)));
  });
}

export async function startReplica(
  cleanup: ReturnType<typeof useCleanups>,
  options: EdgeProcessOptions,
): Promise<EdgeProcess> {
  const edge = await startEdgeProcess(options);
  cleanup(() => edge.stop());
  onTestFailed(() => {
    // What the replica said, for the failure report (its log carries no credentials).
    const lines = edge.logs.filter(
      (l) => typeof l.level === 'number' && (l.level >= 40 || l.event !== undefined),
    );
    console.log(
      `--- edge pid ${edge.pid} (port ${edge.port}) log:\n${lines.map((l) => JSON.stringify(l)).join('\n')}`,
    );
  });
  return edge;
}

/** The world's own record of a session (the demo world's Session, read-only here). */
export interface WorldSessionView {
  readonly statusSeq: number;
  readonly acked: number;
  readonly state: string;
  readonly conn: unknown;
  readonly embodiment: string | null;
  readonly actions: Map<string, { state: string }>;
}

export function worldSession(world: RunningDemoWorld, session_id: string): WorldSessionView {
  const s = world.world.sessions.get(session_id);
  if (s === undefined) throw new Error(`the world holds no session ${session_id}`);
  return s;
}

const SEQUENCED = ['action.status', 'world.event', 'session.state'];

/** The status_seq-bearing notifications a client received, in order. */
export function sequencedOf(client: AwpClient): Json[] {
  return client.received.filter((m) => m.id === undefined && SEQUENCED.includes(m.method as string));
}

/**
 * What a resumed client received up to and including its live session.state (resumed): the replay.
 * Live statuses may follow in the same read, before a waiter resumes, so they are cut off here.
 */
export function replayedOf(client: AwpClient): Json[] {
  const sequenced = sequencedOf(client);
  const resumed = sequenced.findIndex(
    (m) => m.method === 'session.state' && (m.params as { reason?: string }).reason === 'resumed',
  );
  return resumed < 0 ? sequenced : sequenced.slice(0, resumed + 1);
}

export function seqOf(m: Json): number {
  return (m.params as { status_seq: number }).status_seq;
}

/**
 * An agent on one connection that processes statuses `lag` behind what it received and says so in
 * its own pings (`last_status_seq`, every `pingMs`): the edge may then acknowledge more upstream
 * than the agent did (what the store holds), and a resume must be replayed partly from the store.
 */
export class LaggingAgent {
  private timer: NodeJS.Timeout | undefined;
  private pings = 0;
  private frozen = false;
  /** The highest status_seq this agent has processed (what it resumes with). */
  processed = 0;

  constructor(
    readonly client: AwpClient,
    private readonly lag: number,
  ) {}

  static async connect(url: string): Promise<AwpClient> {
    const client = await AwpClient.connect(url, { credential: EDGE_AGENT_TOKEN });
    traceOnFailure(client, url);
    await client.ok('initialize', initializeParams(['proprio/json', 'text/event+json']));
    return client;
  }

  startPinging(pingMs = 300): void {
    this.timer = setInterval(() => this.ping(), pingMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** The agent stops processing (it is busy): its pings go on, acknowledging no further. */
  freeze(): void {
    this.frozen = true;
  }

  private ping(): void {
    if (this.client.closed !== null) return this.stop();
    const seqs = this.client.statusSeqs();
    const target = (seqs.at(-1) ?? 0) - this.lag;
    if (!this.frozen && target > this.processed) this.processed = target;
    this.pings += 1;
    this.client.send({
      jsonrpc: '2.0',
      id: `agent-ping-${this.pings}`,
      method: 'ping',
      params: {
        origin_ns: Math.round(performance.now() * 1e6),
        ...(this.processed > 0 && { last_status_seq: this.processed }),
      },
    });
  }
}

/** On failure, prints what `client` received (sequenced notifications and responses, no frames). */
export function traceOnFailure(client: AwpClient, label: string): void {
  onTestFailed(() => {
    const lines = client.received
      .filter((m) => m.method !== 'obs.frame' && m.method !== 'session.telemetry' && m.method !== 'ping')
      .map((m) => JSON.stringify(m).slice(0, 300));
    console.log(`--- agent ${label} (closed: ${JSON.stringify(client.closed)}):\n${lines.join('\n')}`);
  });
}

export function range(from: number, toInclusive: number): number[] {
  return Array.from({ length: Math.max(0, toInclusive - from + 1) }, (_, i) => from + i);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export async function until(
  cond: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!(await cond())) {
    if (performance.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}
