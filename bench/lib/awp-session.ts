/**
 * An AWP session for load generators, on raw WebSocket connections (raw-ws.ts): JSON-RPC on the control
 * connection (answering the world's or the edge's pings like any agent), an observer or an acting
 * session, and the `ws` stream connection for frames.
 */
import { RawWs, type RawWsHandlers } from './raw-ws.js';

export type Json = Record<string, unknown>;

export const MODALITIES = ['proprio/json', 'image/raw', 'text/event+json'];

export interface Grant {
  readonly channel: string;
  readonly channel_id: number;
  readonly rate_hz: number | null;
}

export class AwpSession {
  ready: Json | null = null;
  grants: Grant[] = [];
  stream: RawWs | null = null;
  /** Notifications received (counted, not kept). */
  notifications = 0;
  closedCode: number | null = null;
  /** Told of every ping the peer (the world, or the edge for an observer) sends, at its receipt. */
  onPing: ((at: bigint) => void) | undefined;
  private nextId = 1;
  private readonly waiting = new Map<
    number,
    { resolve: (m: Json, at: bigint) => void; reject: (e: Error) => void }
  >();

  private constructor(readonly control: RawWs) {}

  static async connect(url: string, credential: string, timeoutMs = 15_000): Promise<AwpSession> {
    const ref: { s?: AwpSession } = {};
    const handlers: RawWsHandlers = {
      text: (t) => ref.s?.onText(t),
      close: (code) => ref.s?.onClose(code),
    };
    const ws = await RawWs.connect(url, { Authorization: `Bearer ${credential}` }, handlers, timeoutMs);
    ref.s = new AwpSession(ws);
    return ref.s;
  }

  private onText(text: string): void {
    const at = process.hrtime.bigint();
    const msg = JSON.parse(text) as Json;
    if (msg.method === 'ping' && msg.id !== undefined) {
      this.onPing?.(at);
      const t = Number(at % 1_000_000_000_000n);
      const origin = (msg.params as Json | undefined)?.origin_ns;
      this.control.sendText(
        JSON.stringify({
          jsonrpc: '2.0',
          id: msg.id,
          result: { origin_ns: origin, receive_ns: t, transmit_ns: t },
        }),
      );
      return;
    }
    if (msg.method === undefined && typeof msg.id === 'number') {
      const w = this.waiting.get(msg.id);
      if (w !== undefined) {
        this.waiting.delete(msg.id);
        w.resolve(msg, at);
      }
      return;
    }
    this.notifications++;
  }

  private onClose(code: number): void {
    this.closedCode = code;
    for (const w of this.waiting.values()) w.reject(new Error(`control connection closed (${code})`));
    this.waiting.clear();
  }

  /** Sends a request; resolves with the response and its round trip (ns, send to receipt). */
  call(method: string, params: unknown, timeoutMs = 15_000): Promise<{ msg: Json; rtt_ns: number }> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`no response to ${method} within ${timeoutMs} ms`));
      }, timeoutMs);
      let sent = 0n;
      this.waiting.set(id, {
        resolve: (msg, at) => {
          clearTimeout(timer);
          resolve({ msg, rtt_ns: Number(at - sent) });
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      const text = JSON.stringify({ jsonrpc: '2.0', id, method, params });
      sent = process.hrtime.bigint();
      this.control.sendText(text);
    });
  }

  async ok(method: string, params: unknown, timeoutMs?: number): Promise<Json> {
    const { msg } = await this.call(method, params, timeoutMs);
    if (msg.error !== undefined) throw new Error(`${method} failed: ${JSON.stringify(msg.error)}`);
    return msg.result as Json;
  }

  initialize(name = 'awp-edge-bench'): Promise<Json> {
    return this.ok('initialize', {
      protocol_versions: ['0.1'],
      agent: { name, version: '0.1.0', vendor: 'awp-edge-bench' },
      consumes_modalities: MODALITIES,
    });
  }

  /** session.open; `embodiment` undefined opens an observer session. */
  async open(
    subscribe: readonly { channel: string; rate_hz?: number }[],
    embodiment?: string,
  ): Promise<Json> {
    this.ready = await this.ok('session.open', {
      mode: 'streaming',
      subscribe,
      ...(embodiment !== undefined ? { embodiment } : {}),
    });
    const granted = (this.ready.granted as { channels?: Grant[] } | undefined)?.channels ?? [];
    this.grants = granted.map((g) => ({ channel: g.channel, channel_id: g.channel_id, rate_hz: g.rate_hz }));
    return this.ready;
  }

  /** Opens the `ws` stream connection named in session.ready (session token as bearer, AWP-TRN-013). */
  async openStream(handlers: RawWsHandlers, timeoutMs = 15_000): Promise<RawWs> {
    const eps = (this.ready?.stream_endpoints ?? []) as { binding: string; url?: string }[];
    const url = eps.find((e) => e.binding === 'ws')?.url;
    const token = this.ready?.session_token;
    if (url === undefined || typeof token !== 'string')
      throw new Error('no ws stream endpoint in session.ready');
    this.stream = await RawWs.connect(url, { Authorization: `Bearer ${token}` }, handlers, timeoutMs);
    return this.stream;
  }

  destroy(): void {
    this.stream?.destroy();
    this.control.destroy();
  }
}
