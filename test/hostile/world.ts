/**
 * A programmable world for the hostile-client suite: it answers the AWP requests an edge relays with
 * plausible results (its own session token and its own stream URL, which must never reach an agent),
 * records every text it receives per connection, and lets a test write anything at all on a control or
 * stream connection (deep nesting, lies about status_seq, oversized or malformed messages).
 */
import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import type { Json } from '../support/awp-client.js';

/** The world's own session token: the edge must replace it with one of its own in anything agent-bound. */
export const WORLD_TOKEN = 'world-own-session-token-5e1f2a3b4c';
const WORLD_SESSION_ID = 'world-session-1';

export interface WorldConn {
  readonly id: number;
  readonly path: string;
  readonly ws: WebSocket;
  /** Every text message received, as sent, in order. */
  readonly texts: string[];
  /** The parsed form of each text (undefined where it did not parse). */
  readonly messages: (Json | undefined)[];
  readonly binary: Buffer[];
  closed: boolean;
  closeCode: number | undefined;
}

/** A hook that answers a request instead of the default; return undefined to fall through. */
export type Responder = (msg: Json, conn: WorldConn) => Json | string | null | undefined;

export class HostileWorld {
  readonly control: WorldConn[] = [];
  readonly streams: WorldConn[] = [];
  /** Requests are answered unless this returns null (then nothing is sent). */
  responder: Responder = () => undefined;
  /** The manifest's observation channels (a test may declare more). */
  readonly observationChannels: Json[] = [
    { id: 'state', loss_class: 'reliable', modality: 'proprio/json', rate_hz: 10 },
  ];
  /** Fields of the session.open / session.resume result a test sets otherwise (heartbeat, endpoints). */
  sessionFields: Json = {};
  private nextSeq = 1;
  private readonly server: WebSocketServer;

  private constructor() {
    this.server = new WebSocketServer({
      host: '127.0.0.1',
      port: 0,
      // Big enough to be sure the edge's own limit is what is exercised, not this server's.
      maxPayload: 256 * 1024 * 1024,
      handleProtocols: (protocols) => (protocols.has('awp') ? 'awp' : false),
    });
    this.server.on('connection', (ws, req) => this.accept(ws, req));
  }

  static async start(): Promise<HostileWorld> {
    const world = new HostileWorld();
    await new Promise<void>((resolve, reject) => {
      world.server.once('listening', resolve);
      world.server.once('error', reject);
    });
    return world;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `ws://127.0.0.1:${this.port}`;
  }

  get streamUrl(): string {
    return `${this.url}/stream`;
  }

  /** Every text received on control connections, across connections, in arrival order per connection. */
  allTexts(): string[] {
    return this.control.flatMap((c) => c.texts);
  }

  /** Parsed requests/notifications received on control connections. */
  allMessages(): Json[] {
    return this.control.flatMap((c) => c.messages.filter((m): m is Json => m !== undefined));
  }

  /** The newest open control connection. */
  current(): WorldConn | undefined {
    for (let i = this.control.length - 1; i >= 0; i--) {
      const c = this.control[i]!;
      if (!c.closed) return c;
    }
    return undefined;
  }

  /** Writes text as is on the newest open control connection. */
  sendRaw(text: string | Buffer, binary = false): void {
    const c = this.current();
    if (c === undefined) throw new Error('the world has no open control connection');
    c.ws.send(text, { binary });
  }

  send(msg: Json): void {
    this.sendRaw(JSON.stringify(msg));
  }

  /** Writes bytes on the newest open stream connection. */
  sendStream(data: Buffer | string, binary = true): void {
    const c = this.streams.findLast((s) => !s.closed);
    if (c === undefined) throw new Error('the world has no open stream connection');
    c.ws.send(data, { binary });
  }

  /** The next status_seq this world will use (a test telling lies reads and sets its own). */
  seq(): number {
    return this.nextSeq++;
  }

  async close(): Promise<void> {
    for (const c of [...this.control, ...this.streams]) c.ws.terminate();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(ws: WebSocket, req: IncomingMessage): void {
    const path = req.url ?? '/';
    const isStream = path.startsWith('/stream');
    const list = isStream ? this.streams : this.control;
    const conn: WorldConn = {
      id: list.length + 1,
      path,
      ws,
      texts: [],
      messages: [],
      binary: [],
      closed: false,
      closeCode: undefined,
    };
    list.push(conn);
    ws.on('error', () => undefined); // an abrupt close by the edge is part of several cases; 'close' follows
    ws.on('close', (code) => {
      conn.closed = true;
      conn.closeCode = code;
    });
    ws.on('message', (data: Buffer, isBinary) => {
      if (isBinary) {
        conn.binary.push(data);
        return;
      }
      const text = data.toString('utf8');
      conn.texts.push(text);
      let msg: Json | undefined;
      try {
        const parsed = JSON.parse(text) as unknown;
        msg =
          typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
            ? (parsed as Json)
            : undefined;
      } catch {
        msg = undefined;
      }
      conn.messages.push(msg);
      if (!isStream && msg !== undefined && typeof msg.method === 'string' && msg.id !== undefined)
        this.answer(msg, conn);
    });
  }

  private answer(msg: Json, conn: WorldConn): void {
    const custom = this.responder(msg, conn);
    if (custom === null) return;
    if (typeof custom === 'string') return conn.ws.send(custom);
    const result = custom ?? this.defaultResult(msg);
    conn.ws.send(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }));
  }

  private defaultResult(msg: Json): Json {
    const params = (msg.params ?? {}) as Json;
    switch (msg.method) {
      case 'initialize':
        return {
          protocol_version: '0.1',
          world: { name: 'hostile-test-world', version: '0.0.1' },
          embodiments: [{ id: 'e1', kind: 'test' }],
          observation_channels: this.observationChannels,
          command_channels: [],
        };
      case 'world.manifest':
        return { world: { name: 'hostile-test-world', version: '0.0.1' } };
      case 'session.open':
      case 'session.resume':
        return {
          session_id: WORLD_SESSION_ID,
          session_token: WORLD_TOKEN,
          mode: 'streaming',
          heartbeat_interval_ms: 1000,
          reconnect_window_ms: 10_000,
          stream_endpoints: [{ binding: 'ws', url: this.streamUrl }, { binding: 'inline' }],
          granted: { channels: [{ channel: 'state', channel_id: 1, rate_hz: 10 }] },
          ...this.sessionFields,
          ...(msg.method === 'session.resume'
            ? { replay_to_status_seq: Number(params.last_status_seq ?? 0), safe_state: false }
            : {}),
        };
      case 'ping': {
        const t = Number(process.hrtime.bigint() % 1_000_000_000_000n);
        return { origin_ns: params.origin_ns ?? 0, receive_ns: t, transmit_ns: t };
      }
      case 'action.submit':
        return { action_id: params.action_id ?? 'a', state: 'accepted', status_seq: this.seq() };
      default:
        return {};
    }
  }
}
