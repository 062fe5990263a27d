/**
 * The agent-facing server behind one small interface, so the edge runs on uWebSockets.js where its
 * binary loads and on `ws` + `node:http` otherwise, with the same behaviour.
 */

import type { HandshakeCloseReason, HandshakeLimits } from './handshake-guard.js';

/** One accepted WebSocket connection, as the edge sees it. */
export interface ServerConnection {
  /** Queues a message; never blocks. */
  send(data: string | Uint8Array, binary: boolean): void;
  /** Bytes queued in the engine and not yet written to the socket (the engine's own backpressure). */
  readonly bufferedAmount: number;
  close(code: number, reason: string): void;
  /** Drops the TCP connection without a closing handshake. */
  terminate(): void;
  readonly remoteAddress: string;
  /** The engine's pub/sub, where it has one (uWebSockets.js; `ws` has none). */
  readonly topics?: ConnectionTopics;
}

/**
 * Pub/sub of an engine that fans a message out to many connections itself (uWebSockets.js topics): one
 * `publish` reaches every connection of the server subscribed to the topic, without a call per connection.
 * The engine applies no backpressure to what it publishes (its per-connection limit is off): the caller
 * reads each subscriber's `bufferedAmount` and unsubscribes the slow ones.
 */
export interface ConnectionTopics {
  /** Subscribes this connection; false when it cannot (closed). */
  subscribe(topic: string): boolean;
  unsubscribe(topic: string): void;
  /** One binary message to every connection of this server subscribed to `topic` (any connection's handle). */
  publish(topic: string, data: Uint8Array): void;
}

export interface ConnectionHandlers {
  /** Text arrives as a string; binary as a buffer the handler may keep (engines copy if they must). */
  message(data: string | Uint8Array, binary: boolean): void;
  /** The socket drained below the engine's high-water mark: pending output may be written. */
  drain(): void;
  close(code: number, reason: string): void;
}

/** The parts of an HTTP upgrade request the edge decides on. */
export interface UpgradeRequest {
  readonly path: string;
  readonly query: string;
  header(name: string): string | undefined;
  /** Subprotocols offered in Sec-WebSocket-Protocol, in order. */
  readonly protocols: readonly string[];
  readonly remoteAddress: string;
  /** Every header by lower-case name, where the engine copied them (to pass the request to another thread). */
  readonly headers?: ReadonlyMap<string, string>;
}

export type UpgradeOutcome =
  | {
      accept: true;
      protocol: string;
      open: (conn: ServerConnection) => ConnectionHandlers;
      /**
       * The connection never reached `open` (the client left, the handshake failed, `open` threw):
       * release what was set up for it, e.g. the credential's connection slot.
       */
      abandon?: () => void;
    }
  | { accept: false; status: number; body: string };

/** The answer to a plain HTTP request (no upgrade) on the agent listener. */
export interface PlainResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string | Uint8Array;
}

/** A plain HTTP request on the agent listener, e.g. a browser opening the viewer page. */
export interface PlainRequest {
  readonly method: string;
  readonly path: string;
  readonly query: string;
  header(name: string): string | undefined;
}

export interface EngineOptions {
  readonly host: string;
  readonly port: number;
  /** Largest message accepted; larger ones close the connection with 1009. */
  readonly maxMessageBytes: number;
  /** WebSocket-level ping interval for hop liveness; a connection silent for two intervals is dropped. */
  readonly pingIntervalMs: number;
  /**
   * Decides an upgrade. Answer synchronously where possible: uWebSockets.js completes a synchronous
   * upgrade on its own path, and an asynchronous one (corked, as it must be) can close the new socket
   * right after open in this release (uNetworking/uWebSockets#1928).
   */
  readonly upgrade: (req: UpgradeRequest) => Promise<UpgradeOutcome> | UpgradeOutcome;
  /** Serve wss:// with this certificate (PEM contents, and the files for engines that read files). */
  readonly tls?:
    | { readonly cert: string; readonly key: string; readonly cert_file: string; readonly key_file: string }
    | undefined;
  /** A bug surfaced while deciding or opening a connection (answered 500 / closed 1011): log it. */
  readonly onError?: (err: unknown) => void;
  /**
   * Limits on connections before their upgrade completes. The `ws` engine applies them as given; on
   * uWebSockets.js, which exposes no socket before its HTTP request is parsed, uWS's own idle timeout
   * (10 s without a complete request) applies instead.
   */
  readonly handshake?: HandshakeLimits;
  /** A connection was closed before its handshake completed (counted by the edge). */
  readonly onHandshakeClosed?: (reason: HandshakeCloseReason) => void;
  /**
   * Answers plain HTTP requests (synchronously: uWebSockets.js needs the answer before the handler returns);
   * undefined, or no handler: 426 with NOT_WEBSOCKET.
   */
  readonly plain?: (req: PlainRequest) => PlainResponse | undefined;
}

export interface AgentServer {
  readonly engine: 'uws' | 'ws';
  readonly port: number;
  /** Where the engine carries out writes on another thread, which can fall behind (stream-worker.ts). */
  readonly backlog?: EngineBacklog;
  /** Where the engine runs on a thread of its own. */
  readonly thread?: EngineThread;
  close(): Promise<void>;
}

/** An engine's writes not yet carried out: work that feeds it waits while it is behind. */
export interface EngineBacklog {
  /** Whether as much as the engine should hold is handed over and not yet carried out (stream worker: two batches). */
  behind(): boolean;
  /** Whether this turn has handed over as much as the engine should carry out at once. */
  full(): boolean;
  /** Calls `fn` each time the engine has caught up. */
  onCaughtUp(fn: () => void): void;
}

/** An engine that runs on a thread of its own, as operators see it (metrics). */
export interface EngineThread {
  /** Calls `fn` with each batch's time from being handed over to being carried out (seconds). */
  onBatch(fn: (seconds: number) => void): void;
  /** The thread's event loop's busy time so far (ms: its event-loop utilisation's `active`). */
  busyMs(): number;
}

/** Parses a Sec-WebSocket-Protocol header into the offered list. */
export function parseProtocols(header: string | undefined): string[] {
  if (header === undefined) return [];
  return header
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p.length > 0);
}

/** What a plain HTTP request to the agent listener is told (426 Upgrade Required). */
export const NOT_WEBSOCKET = 'this is an AWP WebSocket endpoint: connect with subprotocol "awp"\n';

/** Reason phrases of the statuses the edge refuses upgrades with. */
export const STATUS_TEXT: Readonly<Record<number, string>> = {
  200: 'OK',
  302: 'Found',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  405: 'Method Not Allowed',
  426: 'Upgrade Required',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
};

/** A WebSocket close reason holds at most 123 bytes: cut longer ones at a character boundary. */
export function closeReason(text: string): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= 123) return text;
  let end = 123;
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--; // back off continuation bytes
  return bytes.subarray(0, end).toString('utf8');
}
