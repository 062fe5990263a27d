/**
 * What the main thread and the stream worker (stream-worker.ts, stream-worker-thread.ts) say to each other.
 * The main thread decides and computes; the worker owns the sockets and does the engine's writes.
 *
 * Operations on connections travel in batches, one per turn of the main thread, in the order they were
 * made, so the engine sees them as it would in-process (a send before a publish stays before it). Each
 * payload travels once per batch however many operations name it.
 */
import type { HandshakeCloseReason, HandshakeLimits } from './handshake-guard.js';

/** What the worker listens with (the engine options that can cross threads). */
export interface WorkerSetup {
  readonly host: string;
  readonly port: number;
  readonly maxMessageBytes: number;
  readonly pingIntervalMs: number;
  readonly tls:
    | { readonly cert: string; readonly key: string; readonly cert_file: string; readonly key_file: string }
    | undefined;
  readonly handshake: HandshakeLimits | undefined;
  /** Added to the worker thread's niceness (0: the main thread's). */
  readonly nice: number;
  /** Set to 1 by the worker once its server is closed (all its sockets), for a main thread that exits. */
  readonly closedFlag: Int32Array;
}

/** Operation codes: each operation is four int32s, [op, connection id, a, b]. */
export const Op = {
  /** a: payload index. */
  SendBinary: 1,
  /** a: string index. */
  SendText: 2,
  /** a: close code, b: string index of the reason. */
  Close: 3,
  Terminate: 4,
  /** a: string index of the topic. */
  Subscribe: 5,
  Unsubscribe: 6,
  /** Through the connection's server: a: string index of the topic, b: payload index. */
  Publish: 7,
} as const;

export const OP_INTS = 4;

export type ToWorker =
  | {
      readonly t: 'batch';
      readonly seq: number;
      readonly ops: Int32Array;
      readonly payloads: readonly Uint8Array[];
      readonly strings: readonly string[];
    }
  | { readonly t: 'answer'; readonly req: number; readonly accept: true }
  | {
      readonly t: 'answer';
      readonly req: number;
      readonly accept: false;
      readonly status: number;
      readonly body: string;
    }
  /** The main thread has handled this many bytes of the connections' messages. */
  | { readonly t: 'consumed'; readonly bytes: number }
  | { readonly t: 'close' };

/** An upgrade request as it crosses threads (the decision reads it like the engine's). */
export interface WireRequest {
  readonly path: string;
  readonly query: string;
  readonly headers: readonly (readonly [string, string])[];
  readonly protocols: readonly string[];
  readonly remoteAddress: string;
}

export type WorkerEvent =
  | { readonly k: 'upgrade'; readonly req: number; readonly request: WireRequest }
  | { readonly k: 'open'; readonly req: number; readonly id: number; readonly remoteAddress: string }
  | { readonly k: 'abandon'; readonly req: number }
  | {
      readonly k: 'message';
      readonly id: number;
      readonly data: string | Uint8Array;
      readonly binary: boolean;
      /** What it counts against the messages in the main thread's hands (bytes, or characters of text). */
      readonly size: number;
    }
  | { readonly k: 'drain'; readonly id: number }
  | { readonly k: 'close'; readonly id: number; readonly code: number; readonly reason: string }
  | { readonly k: 'handshake'; readonly reason: HandshakeCloseReason }
  | { readonly k: 'error'; readonly message: string };

export type FromWorker =
  | { readonly t: 'listening'; readonly port: number }
  /** The engine could not listen: its error, with the system's code (EADDRINUSE, ...) where there is one. */
  | { readonly t: 'failed'; readonly message: string; readonly details: Readonly<Record<string, unknown>> }
  | {
      readonly t: 'events';
      /** The last batch the worker has carried out. */
      readonly acked: number;
      /** The time it spent carrying out batches since its last report (us). */
      readonly spentUs: number;
      readonly events: readonly WorkerEvent[];
      /** Pairs [connection id, bytes the engine holds for it], for the connections whose reading changed. */
      readonly buffered: Float64Array;
    }
  | { readonly t: 'closed' };
