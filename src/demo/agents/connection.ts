/**
 * A demo agent's control connection (the `ws` client): JSON-RPC requests with bounded waits, the world's
 * heartbeat answered (AWP-SAF-001), notifications handed to the agent. The credential is an
 * `Authorization: Bearer` header, never part of the URL.
 */
import WebSocket from 'ws';

export type Json = Record<string, unknown>;

export class RpcError extends Error {
  constructor(
    readonly method: string,
    readonly error: { code?: number; message?: string; data?: Json },
  ) {
    super(
      `${method}: ${error.message ?? 'error'} (${error.code ?? '?'}) ${JSON.stringify(error.data ?? {})}`,
    );
  }

  /** The world's `retry_after_ms` hint for a retryable refusal (e.g. the admission rate), if any. */
  get retryAfterMs(): number | undefined {
    const d = this.error.data;
    return d?.retryable === true && typeof d.retry_after_ms === 'number' ? d.retry_after_ms : undefined;
  }
}

export class AgentConnection {
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { method: string; resolve: (v: Json) => void; reject: (e: Error) => void }
  >();
  private closedWith: Error | undefined;
  /** One promise however often an agent waits on it (a listener per wait would pile up, a move each). */
  private readonly closedPromise: Promise<void>;

  private constructor(
    private readonly ws: WebSocket,
    private readonly onNotification: (method: string, params: Json) => void,
  ) {
    ws.on('message', (data, binary) => {
      if (!binary) this.receive(text(data));
    });
    this.closedPromise = new Promise((resolve) =>
      ws.on('close', (code) => {
        this.closedWith = new Error(`connection closed (${code})`);
        for (const p of this.pending.values()) p.reject(this.closedWith);
        this.pending.clear();
        resolve();
      }),
    );
  }

  static open(
    url: string,
    token: string,
    onNotification: (method: string, params: Json) => void,
  ): Promise<AgentConnection> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, ['awp'], { headers: { authorization: `Bearer ${token}` } });
      ws.once('open', () => resolve(new AgentConnection(ws, onNotification)));
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => reject(new Error(`${url}: HTTP ${res.statusCode}`)));
    });
  }

  get closed(): boolean {
    return this.closedWith !== undefined;
  }

  /** Resolves when the connection is closed (by either side). */
  whenClosed(): Promise<void> {
    return this.closedPromise;
  }

  call(method: string, params: Json, timeoutMs = 10_000): Promise<Json> {
    if (this.closedWith !== undefined) return Promise.reject(this.closedWith);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${method}: no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        method,
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    });
  }

  /**
   * The agent's own `ping` every `ms` while the connection is open: the world's watchdog (AWP-SAF-003)
   * counts only messages the agent originates, and a long move is otherwise silent.
   */
  keepAlive(ms: number): void {
    const timer = setInterval(() => {
      this.call('ping', { origin_ns: Number(process.hrtime.bigint()) }).catch(() => undefined);
    }, ms);
    timer.unref();
    this.ws.once('close', () => clearInterval(timer));
  }

  close(): void {
    this.ws.close(1000, 'agent done');
  }

  private receive(text: string): void {
    let msg: Json;
    try {
      msg = JSON.parse(text) as Json;
    } catch {
      return;
    }
    const params = (msg.params ?? {}) as Json;
    if (msg.method === 'ping' && msg.id !== undefined) {
      const now = Number(process.hrtime.bigint());
      this.ws.send(
        JSON.stringify({
          jsonrpc: '2.0',
          id: msg.id,
          result: { origin_ns: params.origin_ns ?? 0, receive_ns: now, transmit_ns: now },
        }),
      );
      return;
    }
    if (typeof msg.id === 'number' && msg.method === undefined) {
      const p = this.pending.get(msg.id);
      if (p === undefined) return;
      this.pending.delete(msg.id);
      if (msg.error !== undefined) p.reject(new RpcError(p.method, msg.error as RpcError['error']));
      else p.resolve((msg.result ?? {}) as Json);
      return;
    }
    if (typeof msg.method === 'string') this.onNotification(msg.method, params);
  }
}

/** A text message's contents (ws hands them over as a Buffer, an ArrayBuffer or fragments). */
function text(data: WebSocket.RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.from(data).toString('utf8');
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The payload of an inline `obs.frame` as JSON (the demo agents read JSON channels only). */
export function framePayload(params: Json): unknown {
  if (typeof params.payload_b64 !== 'string') return undefined;
  try {
    return JSON.parse(Buffer.from(params.payload_b64, 'base64').toString('utf8'));
  } catch {
    return undefined;
  }
}
