/** A virtual-clock driver for the demo world cores: deterministic, no sockets, no timers. */
import { decodeFrame } from '../../src/protocol/frame.js';
import type { Frame } from '../../src/protocol/frame.js';
import { inlineToFrame } from '../../src/protocol/inline-frame.js';
import type { DemoWorld } from '../../src/demo/world.js';
import type { ConnId, FrameOutput, JsonObject, Output } from '../../src/demo/types.js';

export const MS = 1_000_000;

/** Deterministic "randomness": 0, 1, 2, ... */
export function counterRandom(): (n: number) => Uint8Array {
  let k = 0;
  return (n) => Uint8Array.from({ length: n }, () => k++ & 0xff);
}

export interface Msg extends JsonObject {
  id?: string | number;
  method?: string;
  params?: JsonObject;
  result?: JsonObject;
  error?: { code: number; message: string; data?: JsonObject };
}

/** A decoded frame output (inline or binary), with where it went. */
export interface SeenFrame {
  conn: ConnId;
  binding: 'inline' | 'ws';
  latestWins: boolean;
  frame: Frame;
  payloadJson?: unknown;
}

export class Harness {
  now = 0;
  /** Every output, in order. */
  readonly log: Output[] = [];
  private nextId = 1000;

  constructor(
    readonly world: DemoWorld,
    /** ns between `advance` calls when time passes. */
    readonly stepNs = 2 * MS,
  ) {}

  private take(outs: Output[]): Output[] {
    this.log.push(...outs);
    return outs;
  }

  connect(conn: ConnId): Output[] {
    return this.take(this.world.connect(conn, this.now));
  }

  disconnect(conn: ConnId): Output[] {
    return this.take(this.world.disconnect(conn, this.now));
  }

  attachStream(conn: ConnId, token: string): Output[] {
    return this.take(this.world.attachStream(conn, token, this.now));
  }

  text(conn: ConnId, msg: unknown): Output[] {
    return this.take(
      this.world.receiveText(conn, typeof msg === 'string' ? msg : JSON.stringify(msg), this.now),
    );
  }

  binary(conn: ConnId, data: Uint8Array): Output[] {
    return this.take(this.world.receiveBinary(conn, data, this.now));
  }

  /** Send a request; returns its response and every output of the call (messages decoded). */
  request(conn: ConnId, method: string, params?: unknown): { response: Msg; outs: Output[]; msgs: Msg[] } {
    const id = this.nextId++;
    const outs = this.text(conn, { jsonrpc: '2.0', id, method, ...(params !== undefined && { params }) });
    const msgs = messages(outs, conn);
    const response = msgs.find((m) => m.id === id && m.method === undefined);
    if (response === undefined) throw new Error(`no response to ${method}: ${JSON.stringify(msgs)}`);
    return { response, outs, msgs };
  }

  /** A request whose result is expected: the result. */
  call(conn: ConnId, method: string, params?: unknown): JsonObject {
    const { response } = this.request(conn, method, params);
    if (response.error !== undefined) throw new Error(`${method} failed: ${JSON.stringify(response.error)}`);
    return response.result!;
  }

  /** Let virtual time pass, calling `advance` every `stepNs`; returns the outputs. */
  advance(ns: number): Output[] {
    const outs: Output[] = [];
    const end = this.now + ns;
    while (this.now < end) {
      this.now = Math.min(end, this.now + this.stepNs);
      outs.push(...this.take(this.world.advance(this.now)));
    }
    return outs;
  }

  /** Initialize and open a session on `conn`; returns the session.ready result. */
  open(
    conn: ConnId,
    params: JsonObject,
    consumes = ['text/event+json', 'proprio/json', 'image/raw'],
  ): JsonObject {
    this.connect(conn);
    this.call(conn, 'initialize', {
      protocol_versions: ['0.1'],
      agent: { name: 'test-agent', version: '0.0.1', vendor: 'test' },
      consumes_modalities: consumes,
    });
    return this.call(conn, 'session.open', params);
  }

  /** Initialize a fresh connection and resume; returns response and outputs. */
  resume(conn: ConnId, token: string, last: number): { response: Msg; outs: Output[]; msgs: Msg[] } {
    this.connect(conn);
    this.call(conn, 'initialize', {
      protocol_versions: ['0.1'],
      agent: { name: 'test-agent', version: '0.0.1', vendor: 'test' },
      consumes_modalities: ['text/event+json', 'proprio/json', 'image/raw'],
    });
    return this.request(conn, 'session.resume', { session_token: token, last_status_seq: last });
  }

  /** Encode a frame output as the server would at `now` (stamps ts_send_ns) and decode it back. */
  frameOf(o: FrameOutput): SeenFrame {
    const data = this.world.encodeFrame(o, this.now);
    const frame =
      typeof data === 'string'
        ? inlineToFrame((JSON.parse(data) as { params: JsonObject }).params)
        : decodeFrame(data);
    const text = new TextDecoder().decode(frame.payload);
    let payloadJson: unknown;
    try {
      payloadJson = JSON.parse(text);
    } catch {
      payloadJson = undefined;
    }
    return { conn: o.conn, binding: o.binding, latestWins: o.latestWins, frame, payloadJson };
  }

  frames(outs: Output[], channelId?: number): SeenFrame[] {
    return outs
      .filter((o): o is FrameOutput => o.kind === 'frame')
      .filter((o) => channelId === undefined || o.frame.channel_id === channelId)
      .map((o) => this.frameOf(o));
  }
}

/** Text outputs (optionally to one connection) as messages. */
export function messages(outs: Output[], conn?: ConnId): Msg[] {
  return outs
    .filter((o) => o.kind === 'text' && (conn === undefined || o.conn === conn))
    .map((o) => (o as { msg: Msg }).msg);
}

export function notifications(outs: Output[], method: string, conn?: ConnId): JsonObject[] {
  return messages(outs, conn)
    .filter((m) => m.method === method && m.id === undefined)
    .map((m) => m.params!);
}

/** Every status_seq-carrying notification, in order. */
export function sequenced(outs: Output[], conn?: ConnId): JsonObject[] {
  return messages(outs, conn)
    .filter(
      (m) => m.id === undefined && ['action.status', 'world.event', 'session.state'].includes(m.method ?? ''),
    )
    .map((m) => ({ method: m.method, ...m.params }));
}

export function closes(outs: Output[], conn?: ConnId): { conn: ConnId; code: number; reason: string }[] {
  return outs.filter((o) => o.kind === 'close' && (conn === undefined || o.conn === conn)) as {
    conn: ConnId;
    code: number;
    reason: string;
  }[];
}

/** A label per output in order: method (or result/error) for texts, `frame:<channel_id>@<tick|seq>` for frames. */
export function labels(outs: Output[], conn?: ConnId): string[] {
  return outs
    .filter((o) => conn === undefined || o.conn === conn)
    .map((o) => {
      if (o.kind === 'close') return `close:${o.code}`;
      if (o.kind === 'frame') return `frame:${o.frame.channel_id}@${o.frame.tick ?? o.frame.seq}`;
      const m = o.msg as Msg;
      if (m.method !== undefined) return m.method;
      return m.error !== undefined ? 'error' : 'result';
    });
}
