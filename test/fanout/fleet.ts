/**
 * A fleet of observers in a child process, so that 200 clients do not share the edge's event loop
 * (on a 2-core machine the edge and the clients each get a core, as they would in production). The
 * parent drives it over IPC; receipt times are stamped on process.hrtime, which is the same monotonic
 * clock in both processes, so delivery latency is measured against the world's ts_send_ns exactly.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ObserverKind } from './observer-client.js';

export interface FleetPlan {
  readonly index: number;
  readonly kind: ObserverKind;
  readonly subscribe: { channel: string; rate_hz?: number }[];
  /** Stops reading (TCP level) right after its session is open. */
  readonly stalls: boolean;
}

export interface ChannelReport {
  readonly channel_id: number;
  readonly name: string;
  readonly rate_hz: number | null;
  /** Every frame received, in order: seq, capture time (ns), delivery latency (receipt - ts_send_ns, ns; -1 if unknown). */
  readonly seqs: number[];
  readonly ts: number[];
  readonly latencies: number[];
  readonly count: number;
  readonly lastSeq: number;
  readonly orderViolations: readonly { prev: number; got: number; streamed: boolean }[];
  readonly crossedInFlight: number;
  /**
   * Seq gaps not followed by a resync keyframe (reliable channels must have none), in arrival order (see
   * `resyncSeqs` for a check across the inline-to-stream hand-over, where two connections interleave).
   */
  readonly unexplainedGaps: number;
  /** The seqs that arrived as resync keyframes. */
  readonly resyncSeqs: number[];
  readonly resyncs: number;
  /** Frames captured within the report's `window`, if it asked. */
  readonly inWindow?: number;
}

export interface ObserverReport {
  readonly index: number;
  readonly kind: ObserverKind;
  readonly stalls: boolean;
  readonly session_id: string;
  readonly channels: ChannelReport[];
  readonly closed: { code: number; reason: string } | null;
  readonly streamCloses: number;
  readonly inlineAfterStream: number;
}

export type FleetRequest =
  | {
      type: 'open';
      url: string;
      credential: string;
      origin: string;
      plans: FleetPlan[];
      batch: number;
      certHash?: string;
    }
  | { type: 'stall' }
  | { type: 'unstall'; catchUpStateSeq: number; timeoutMs: number }
  | {
      type: 'report';
      /** Per-frame arrays (seqs, ts, latencies) only for these channels (default: all): a small reply. */
      perFrame?: readonly string[];
      /** Frames captured in this window (world ns), counted per channel as `inWindow`. */
      window?: { from: number; to: number };
    }
  | { type: 'close' };

export type FleetReply =
  | { type: 'ready' }
  | { type: 'opened'; sessions: { index: number; session_id: string }[] }
  | { type: 'stalled'; count: number }
  | { type: 'unstalled'; reopenedStreams: number }
  | { type: 'report'; observers: ObserverReport[] }
  | { type: 'closed' }
  | { type: 'error'; message: string };

export class Fleet {
  private constructor(private readonly child: ChildProcess) {}

  static start(): Promise<Fleet> {
    const entry = fileURLToPath(new URL('./fleet-child.ts', import.meta.url));
    const child = fork(entry, [], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error('the observer fleet did not start within 20 s')),
        20_000,
      );
      child.once('error', reject);
      child.once('message', (m: unknown) => {
        clearTimeout(timer);
        if ((m as { type?: string }).type === 'ready') resolve(new Fleet(child));
        else reject(new Error(`unexpected first message ${JSON.stringify(m)}`));
      });
    });
  }

  request<T extends FleetReply['type']>(
    req: FleetRequest,
    expect: T,
    timeoutMs: number,
  ): Promise<Extract<FleetReply, { type: T }>> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.child.off('message', on);
        reject(new Error(`the observer fleet did not answer ${req.type} within ${timeoutMs} ms`));
      }, timeoutMs);
      const on = (m: FleetReply) => {
        clearTimeout(timer);
        this.child.off('message', on);
        if (m.type === 'error') reject(new Error(`observer fleet: ${m.message}`));
        else if (m.type !== expect) reject(new Error(`observer fleet answered ${m.type} to ${req.type}`));
        else resolve(m as Extract<FleetReply, { type: T }>);
      };
      this.child.on('message', on);
      this.child.send(req);
    });
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.send({ type: 'close' } satisfies FleetRequest);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }
}
