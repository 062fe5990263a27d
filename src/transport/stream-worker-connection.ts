/**
 * A stream worker's connection as the main thread holds it (stream-worker.ts): what the edge does to it
 * becomes operations in the next batch for the worker, and its `bufferedAmount` is the worker's last
 * reading plus what was sent to it and is not yet carried out.
 */
import {
  closeReason,
  type ConnectionHandlers,
  type ConnectionTopics,
  type ServerConnection,
} from './engine.js';
import { Op } from './stream-worker-wire.js';

/** What a connection asks of the worker's main-thread side. */
export interface WorkerSide {
  /** The last batch the worker has carried out. */
  readonly acked: number;
  /** Connections told of bytes held, to be told again (drain) once the worker has carried them out. */
  readonly waiting: Set<RemoteConnection>;
  op(code: number, id: number, a: number, b: number): void;
  str(s: string): number;
  send(c: RemoteConnection, data: string | Uint8Array, binary: boolean): void;
  publish(c: RemoteConnection, topic: string, data: Uint8Array): void;
  joined(c: RemoteConnection, topic: string, delta: 1 | -1): void;
}

/** Bytes sent to a connection that keeps up which may be in flight to the worker before they count. */
const IN_FLIGHT_CREDIT = 256 * 1024;

/** Bytes posted and not yet carried out, as of the batch they were last posted in. */
class Pending {
  bytes = 0;
  seq = 0;

  add(bytes: number, seq: number, acked: number): void {
    if (this.seq <= acked) this.bytes = 0;
    this.bytes += bytes;
    this.seq = seq;
  }

  /** What is still in flight once the worker has carried out batch `acked`. */
  after(acked: number): number {
    return this.seq > acked ? this.bytes : 0;
  }
}

export class RemoteConnection implements ServerConnection {
  handlers: ConnectionHandlers | undefined;
  /** What the engine held for it at the worker's last reading. */
  reported = 0;
  readonly pending = new Pending();
  /** Its topics (for the worker's cost of a publish, counted by members). */
  readonly joined = new Set<string>();
  /** Closed by the edge (operations after it are dropped) or by the worker (gone). */
  closing = false;
  gone = false;
  readonly topics: ConnectionTopics;

  constructor(
    private readonly w: WorkerSide,
    readonly id: number,
    readonly remoteAddress: string,
  ) {
    this.topics = {
      subscribe: (topic) => {
        if (this.closing || this.gone) return false;
        w.op(Op.Subscribe, id, w.str(topic), 0);
        w.joined(this, topic, 1);
        return true;
      },
      unsubscribe: (topic) => {
        if (this.gone) return;
        w.op(Op.Unsubscribe, id, w.str(topic), 0);
        w.joined(this, topic, -1);
      },
      publish: (topic, data) => w.publish(this, topic, data),
    };
  }

  send(data: string | Uint8Array, binary: boolean): void {
    if (!this.closing && !this.gone) this.w.send(this, data, binary);
  }

  get bufferedAmount(): number {
    if (this.closing || this.gone) return 0;
    // What was sent to it and is not yet carried out: where the worker's last reading says the socket
    // keeps up, the engine will most likely write it at once (as the kernel's buffer takes a burst
    // in-process), so only what exceeds IN_FLIGHT_CREDIT counts; where it is behind, all of it queues.
    // What was published to its topics is not counted: the worker reads every member after a publish.
    const inFlight = this.pending.after(this.w.acked);
    if (inFlight === 0) return this.reported;
    const amount = this.reported > 0 ? this.reported + inFlight : Math.max(0, inFlight - IN_FLIGHT_CREDIT);
    // A reader told of bytes held is told again (drain) once the worker has carried them out: the engine
    // itself fires drain only for bytes it could not write.
    if (amount > 0) this.w.waiting.add(this);
    return amount;
  }

  close(code: number, reason: string): void {
    if (this.closing || this.gone) return;
    this.closing = true;
    this.w.op(Op.Close, this.id, code, this.w.str(closeReason(reason)));
  }

  terminate(): void {
    if (this.gone) return;
    this.closing = true;
    this.w.op(Op.Terminate, this.id, 0, 0);
  }
}
