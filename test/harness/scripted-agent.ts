/**
 * An agent that says exactly what the trace says. It connects with the `awp` subprotocol and, if given a
 * credential, `Authorization: Bearer <credential>`. It opens a connection lazily when it has something to
 * send and none is open, so a dropped connection is followed by a new one, as in the reconnect traces.
 * It remembers the session_token of the latest session.ready it received and presents that token in its
 * session.resume (a proxy may hand out its own token).
 */
import { WebSocket } from 'ws';
import type { JsonObject } from './trace-types.js';
import { cloneJson, isJsonObject } from './trace-types.js';
import { Inbox, WaitTimeoutError } from './inbox.js';
import { isSessionReadyResult, methodOf, resultOf, stringField } from './message-view.js';
import { AWP_SUBPROTOCOL, decodeMessage, sendText, terminateAndWait } from './ws-io.js';

export interface AgentOptions {
  /** Resolves the URL to dial; called for every new connection. */
  readonly url: () => Promise<string>;
  /** Sent as `Authorization: Bearer <credential>` when set. */
  readonly credential?: string;
  readonly connectTimeoutMs: number;
}

export interface AgentConnection {
  /** 1-based, in order of opening. */
  readonly id: number;
  readonly url: string;
  readonly received: JsonObject[];
  readonly sent: JsonObject[];
  /** True once the agent abandoned it (a dropped control connection in the trace). */
  dropped: boolean;
  closed: boolean;
  closeCode: number | undefined;
}

export interface AgentArrival {
  readonly connectionId: number;
  readonly msg: JsonObject;
}

export class ScriptedAgent {
  /** Every message received, in arrival order, across connections. */
  readonly transcript: JsonObject[] = [];
  readonly connections: AgentConnection[] = [];
  /** The session_token of the latest session.ready received. */
  token: string | undefined;

  private readonly inbox = new Inbox<AgentArrival>();
  private socket: WebSocket | undefined;
  private readonly sockets: WebSocket[] = [];

  constructor(private readonly options: AgentOptions) {}

  get pending(): number {
    return this.inbox.size;
  }

  /** The trace message as this agent sends it: session.resume carries the token it actually received. */
  prepare(msg: JsonObject): JsonObject {
    if (methodOf(msg) !== 'session.resume' || this.token === undefined || !isJsonObject(msg.params))
      return msg;
    const out = cloneJson(msg);
    (out.params as JsonObject).session_token = this.token;
    return out;
  }

  /** Sends on the open connection, opening one first if there is none. Throws if it cannot be written. */
  async send(msg: JsonObject): Promise<AgentConnection> {
    const { ws, conn } = await this.ensureConnected();
    if (!(await sendText(ws, JSON.stringify(msg)))) {
      throw new Error(`the agent could not write on its connection #${conn.id} (${describeState(conn)})`);
    }
    conn.sent.push(msg);
    return conn;
  }

  async nextMessage(timeoutMs: number, describe: () => string): Promise<AgentArrival> {
    return this.inbox.next(timeoutMs, describe);
  }

  drainUnexpected(): AgentArrival[] {
    return this.inbox.drain();
  }

  /** Abandons the current connection abruptly (no close handshake), as a dropped network path would. */
  async dropConnection(timeoutMs: number): Promise<void> {
    const ws = this.socket;
    this.socket = undefined;
    const conn = this.connections.at(-1);
    if (ws === undefined || conn === undefined) return;
    conn.dropped = true;
    await terminateAndWait(ws, timeoutMs);
  }

  private async ensureConnected(): Promise<{ ws: WebSocket; conn: AgentConnection }> {
    const open = this.socket;
    const last = this.connections.at(-1);
    if (open?.readyState === WebSocket.OPEN && last !== undefined) return { ws: open, conn: last };
    const url = await this.options.url();
    const conn: AgentConnection = {
      id: this.connections.length + 1,
      url,
      received: [],
      sent: [],
      dropped: false,
      closed: false,
      closeCode: undefined,
    };
    const headers: Record<string, string> = {};
    if (this.options.credential !== undefined) headers.authorization = `Bearer ${this.options.credential}`;
    const ws = new WebSocket(url, [AWP_SUBPROTOCOL], {
      headers,
      handshakeTimeout: this.options.connectTimeoutMs,
    });
    this.connections.push(conn);
    this.sockets.push(ws);
    ws.on('message', (data, isBinary) => {
      const msg = decodeMessage(data, isBinary);
      conn.received.push(msg);
      this.transcript.push(msg);
      if (isSessionReadyResult(msg)) this.token = stringField(resultOf(msg), 'session_token');
      this.inbox.push({ connectionId: conn.id, msg });
    });
    ws.on('close', (code) => {
      conn.closed = true;
      conn.closeCode = code;
    });
    await waitOpen(ws, conn, this.options.connectTimeoutMs);
    if (ws.protocol !== AWP_SUBPROTOCOL) {
      ws.terminate();
      throw new Error(
        `connection #${conn.id} to ${url}: the server selected subprotocol "${ws.protocol}", not awp`,
      );
    }
    this.socket = ws;
    return { ws, conn };
  }

  /** Stops every current and later wait (the other side of the play failed). */
  abort(reason: string): void {
    this.inbox.cancel(reason);
  }

  /** Closes every connection (teardown). */
  async close(): Promise<void> {
    this.abort('the scripted agent closed');
    this.socket = undefined;
    await Promise.all(this.sockets.map((ws) => terminateAndWait(ws, 1000)));
  }
}

function waitOpen(ws: WebSocket, conn: AgentConnection, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const fail = (why: string): void => {
      cleanup();
      ws.terminate();
      reject(new Error(`agent connection #${conn.id} to ${conn.url} failed: ${why}`));
    };
    const onOpen = (): void => {
      cleanup();
      resolve();
    };
    const onError = (err: Error): void => fail(err.message);
    const onUnexpected = (_req: unknown, res: { statusCode?: number }): void =>
      fail(`HTTP ${res.statusCode ?? '?'} instead of an upgrade`);
    const timer = setTimeout(
      () => fail(new WaitTimeoutError(`no open after ${timeoutMs} ms`).message),
      timeoutMs,
    );
    const cleanup = (): void => {
      clearTimeout(timer);
      ws.off('open', onOpen);
      ws.off('error', onError);
      ws.off('unexpected-response', onUnexpected);
      ws.on('error', () => undefined); // later errors surface as 'close'
    };
    ws.on('open', onOpen);
    ws.on('error', onError);
    ws.on('unexpected-response', onUnexpected);
  });
}

function describeState(conn: AgentConnection): string {
  if (conn.dropped) return 'dropped';
  return conn.closed ? `closed with code ${conn.closeCode ?? '?'}` : 'open';
}
