/**
 * A small AWP agent for tests: JSON-RPC over a real WebSocket with subprotocol `awp`, answering the
 * world's pings like an agent's transport library, with bounded waits for results and notifications.
 */
import WebSocket from 'ws';
import { JsonInbox, type Json } from './json-inbox.js';

export type { Json };

export interface ClientOptions {
  readonly credential?: string;
  /** Present the credential as `awp.bearer.<credential>` instead of the Authorization header. */
  readonly viaSubprotocol?: boolean;
  /** Answer the world's JSON-RPC pings (default true). */
  readonly answerPings?: boolean;
  /** A CA (PEM) to trust for wss:// (the edge's test certificate). */
  readonly ca?: string;
}

export class AwpClient extends JsonInbox {
  readonly binary: Buffer[] = [];
  closed: { code: number; reason: string } | null = null;
  private nextId = 1;
  private readonly closeWaiters: ((c: { code: number; reason: string }) => void)[] = [];

  private constructor(readonly ws: WebSocket) {
    super();
  }

  static connect(url: string, options: ClientOptions = {}, timeoutMs = 5000): Promise<AwpClient> {
    const protocols = ['awp'];
    const headers: Record<string, string> = {};
    if (options.credential !== undefined) {
      if (options.viaSubprotocol === true) protocols.push(`awp.bearer.${options.credential}`);
      else headers.authorization = `Bearer ${options.credential}`;
    }
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, protocols, {
        headers,
        handshakeTimeout: timeoutMs,
        ...(options.ca !== undefined ? { ca: options.ca } : {}),
      });
      const client = new AwpClient(ws);
      ws.on('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => reject(new HttpRefusal(res.statusCode ?? 0, body)));
      });
      ws.once('error', reject);
      ws.once('open', () => resolve(client));
      ws.on('message', (data: Buffer, isBinary: boolean) => {
        if (isBinary) {
          client.binary.push(data);
          return;
        }
        const msg = JSON.parse(data.toString()) as Json;
        if (msg.method === 'ping' && msg.id !== undefined && options.answerPings !== false) {
          const origin = (msg.params as Json | undefined)?.origin_ns;
          const t = Number(process.hrtime.bigint() % 1_000_000_000_000n);
          ws.send(
            JSON.stringify({
              jsonrpc: '2.0',
              id: msg.id,
              result: { origin_ns: origin, receive_ns: t, transmit_ns: t },
            }),
          );
        }
        client.take(msg);
      });
      ws.on('close', (code: number, reason: Buffer) => {
        client.closed = { code, reason: reason.toString() };
        for (const w of client.closeWaiters.splice(0)) w(client.closed);
      });
    });
  }

  /** Sends a request and waits for its response (result or error). */
  async call(method: string, params?: unknown, timeoutMs = 5000): Promise<Json> {
    const id = this.nextId++;
    const response = this.waitFor(
      (m) => m.id === id && m.method === undefined,
      timeoutMs,
      `response to ${method}`,
    );
    this.send({ jsonrpc: '2.0', id, method, ...(params !== undefined ? { params } : {}) });
    const closed = this.waitClosed(timeoutMs + 1000).then(
      (c) =>
        Promise.reject(
          new Error(`connection closed (${c.code} ${c.reason}) before the response to ${method}`),
        ),
      () => new Promise<never>(() => undefined),
    );
    return Promise.race([response, closed]);
  }

  /** `call` that fails the test unless the result is a success; returns the result. */
  async ok(method: string, params?: unknown, timeoutMs = 5000): Promise<Json> {
    const r = await this.call(method, params, timeoutMs);
    if (r.error !== undefined) throw new Error(`${method} failed: ${JSON.stringify(r.error)}`);
    return r.result as Json;
  }

  notify(method: string, params?: unknown): void {
    this.send({ jsonrpc: '2.0', method, ...(params !== undefined ? { params } : {}) });
  }

  send(msg: unknown): void {
    this.ws.send(typeof msg === 'string' ? msg : JSON.stringify(msg));
  }

  /** Every status_seq-bearing notification received, in order. */
  statusSeqs(): number[] {
    return this.received
      .filter(
        (m) =>
          ['action.status', 'world.event', 'session.state'].includes(m.method as string) &&
          m.id === undefined,
      )
      .map((m) => (m.params as { status_seq: number }).status_seq);
  }

  waitClosed(timeoutMs = 5000): Promise<{ code: number; reason: string }> {
    if (this.closed !== null) return Promise.resolve(this.closed);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`connection still open after ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.closeWaiters.push((c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
  }

  /** Drops the connection without a closing handshake (a crashed agent or a cut cable). */
  drop(): void {
    this.ws.terminate();
  }

  close(): void {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING)
      this.ws.close(1000);
  }
}

/** The HTTP answer to a refused WebSocket upgrade. */
export class HttpRefusal extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`HTTP ${status}: ${body.trim()}`);
  }
}

export const AGENT = { name: 'awp-edge-test', version: '0.1.0', vendor: 'awp-edge' };

export function initializeParams(
  modalities: string[] = ['proprio/json', 'image/raw', 'text/event+json'],
): Json {
  return { protocol_versions: ['0.1'], agent: AGENT, consumes_modalities: modalities };
}
