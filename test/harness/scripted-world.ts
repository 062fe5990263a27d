/**
 * A world that says exactly what the trace says. It listens on 127.0.0.1 (ephemeral port), accepts only the
 * `awp` subprotocol, takes any number of connections at any time, and attributes each message to the
 * connection it arrived on. It sends on the "current" connection: the one the latest message arrived on,
 * or (if that one is closed) the newest open one; so it never assumes one connection per agent connection,
 * which a proxy in between would not guarantee.
 */
import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import type { JsonObject } from './trace-types.js';
import { Inbox } from './inbox.js';
import { isSessionReadyResult, resultOf, stringField } from './message-view.js';
import { AWP_SUBPROTOCOL, decodeMessage, sendText, terminateAndWait } from './ws-io.js';

export interface WorldConnection {
  /** 1-based, in order of acceptance. */
  readonly id: number;
  /** The Authorization header of the opening request (what a proxy presents upstream). */
  readonly authorization: string | undefined;
  readonly received: JsonObject[];
  readonly sent: JsonObject[];
  closed: boolean;
  closeCode: number | undefined;
}

export interface WorldArrival {
  readonly connectionId: number;
  readonly msg: JsonObject;
}

export interface WorldSendOutcome {
  readonly connectionId: number | undefined;
  /** False when no open connection took the message (acceptable only for `delivered: false` lines). */
  readonly written: boolean;
}

export class ScriptedWorld {
  /** Every message received, in arrival order, across connections. */
  readonly transcript: JsonObject[] = [];
  readonly connections: WorldConnection[] = [];
  /** Handshakes refused for lacking the `awp` subprotocol. */
  rejectedHandshakes = 0;
  /** The session_token of the latest session.ready this world sent (what a session.resume must present). */
  issuedToken: string | undefined;

  private readonly sockets = new Map<number, WebSocket>();
  private readonly inbox = new Inbox<WorldArrival>();
  private readonly connectionWaiters = new Set<() => void>();
  private currentId: number | undefined;
  private aborted = false;

  private readonly server: WebSocketServer;

  private constructor() {
    this.server = new WebSocketServer({
      host: '127.0.0.1',
      port: 0,
      verifyClient: (info: { req: IncomingMessage }, callback) => {
        if (offersAwp(info.req)) return callback(true);
        this.rejectedHandshakes++;
        callback(false, 400, 'the awp subprotocol is required');
      },
      handleProtocols: (protocols) => (protocols.has(AWP_SUBPROTOCOL) ? AWP_SUBPROTOCOL : false),
    });
    this.server.on('connection', (ws, req) => this.accept(ws, req));
  }

  static async start(): Promise<ScriptedWorld> {
    const world = new ScriptedWorld();
    await new Promise<void>((resolve, reject) => {
      world.server.once('listening', resolve);
      world.server.once('error', reject);
    });
    return world;
  }

  get url(): string {
    const { port } = this.server.address() as AddressInfo;
    return `ws://127.0.0.1:${port}`;
  }

  /** Messages received but not yet consumed by `nextMessage`. */
  get pending(): number {
    return this.inbox.size;
  }

  private accept(ws: WebSocket, req: IncomingMessage): void {
    if (ws.protocol !== AWP_SUBPROTOCOL) {
      // verifyClient already refuses these; this is a second guard.
      this.rejectedHandshakes++;
      ws.terminate();
      return;
    }
    const conn: WorldConnection = {
      id: this.connections.length + 1,
      authorization: req.headers.authorization,
      received: [],
      sent: [],
      closed: false,
      closeCode: undefined,
    };
    this.connections.push(conn);
    this.sockets.set(conn.id, ws);
    ws.on('message', (data, isBinary) => {
      const msg = decodeMessage(data, isBinary);
      conn.received.push(msg);
      this.transcript.push(msg);
      this.inbox.push({ connectionId: conn.id, msg });
    });
    ws.on('close', (code) => {
      conn.closed = true;
      conn.closeCode = code;
    });
    ws.on('error', () => undefined); // a peer's abrupt close is expected; 'close' follows
    for (const wake of this.connectionWaiters) wake();
  }

  /** The next message from any connection; it makes that connection the current one. */
  async nextMessage(timeoutMs: number, describe: () => string): Promise<WorldArrival> {
    const arrival = await this.inbox.next(timeoutMs, describe);
    this.currentId = arrival.connectionId;
    return arrival;
  }

  /**
   * A session.resume on one connection replaces the session's other connections (AWP-SES-010): close them
   * (code 1000, reason "connection_replaced"). Returns the ids closed.
   */
  replaceOtherConnections(keepId: number): number[] {
    const closed: number[] = [];
    for (const [id, ws] of this.sockets) {
      if (id === keepId || ws.readyState !== WebSocket.OPEN) continue;
      ws.close(1000, 'connection_replaced');
      closed.push(id);
    }
    return closed;
  }

  /** Drains messages not consumed by the script (for the final "nothing extra arrived" check). */
  drainUnexpected(): WorldArrival[] {
    return this.inbox.drain();
  }

  /**
   * Sends on the current connection (falling back to the newest open one, waiting a bounded time for one).
   * With `mayBeLost` (a `delivered: false` line) it writes only to the connection the latest agent message
   * arrived on, open or not: that message belongs to the connection that died, never to its successor.
   */
  async send(msg: JsonObject, options: { timeoutMs: number; mayBeLost: boolean }): Promise<WorldSendOutcome> {
    let id: number | undefined;
    if (options.mayBeLost) {
      id = this.currentId ?? this.connections.at(-1)?.id;
    } else {
      id = this.pickConnection();
      if (id === undefined) {
        await this.waitForOpenConnection(options.timeoutMs);
        id = this.pickConnection();
      }
    }
    const ws = id === undefined ? undefined : this.sockets.get(id);
    if (id === undefined || ws === undefined) return { connectionId: undefined, written: false };
    const written = await sendText(ws, JSON.stringify(msg));
    if (written) {
      this.connections[id - 1]!.sent.push(msg);
      if (isSessionReadyResult(msg)) this.issuedToken = stringField(resultOf(msg), 'session_token');
    }
    return { connectionId: id, written };
  }

  private pickConnection(): number | undefined {
    const current = this.currentId === undefined ? undefined : this.sockets.get(this.currentId);
    if (current?.readyState === WebSocket.OPEN) return this.currentId;
    for (let i = this.connections.length - 1; i >= 0; i--) {
      const conn = this.connections[i]!;
      if (this.sockets.get(conn.id)?.readyState === WebSocket.OPEN) return conn.id;
    }
    return undefined;
  }

  private waitForOpenConnection(timeoutMs: number): Promise<void> {
    if (this.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.connectionWaiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.connectionWaiters.add(done);
    });
  }

  /** Stops every current and later wait (the other side of the play failed). */
  abort(reason: string): void {
    this.aborted = true;
    this.inbox.cancel(reason);
    for (const wake of [...this.connectionWaiters]) wake();
  }

  /** Terminates every connection and closes the server. */
  async close(): Promise<void> {
    this.abort('the scripted world closed');
    await Promise.all([...this.sockets.values()].map((ws) => terminateAndWait(ws, 1000)));
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

function offersAwp(req: IncomingMessage): boolean {
  const header = req.headers['sec-websocket-protocol'];
  if (typeof header !== 'string') return false;
  return header.split(',').some((p) => p.trim() === AWP_SUBPROTOCOL);
}
