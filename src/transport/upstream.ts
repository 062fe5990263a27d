import { WebSocket } from 'ws';
import type { ConnectionHandlers } from './engine.js';
import { attach } from './ws-socket.js';

/** One connection from the edge to a world (control or stream), over `ws`. */
export interface UpstreamConnection {
  send(data: string | Uint8Array, binary: boolean): void;
  readonly bufferedAmount: number;
  close(code: number, reason: string): void;
  terminate(): void;
}

/** Text arrives as a string, binary as the Buffer `ws` received (the edge may keep it). */
export type UpstreamHandlers = ConnectionHandlers;

export interface DialOptions {
  readonly url: string;
  /** Bearer credential for the world (the edge's upstream credential, or a world session token). */
  readonly credential?: string | undefined;
  readonly connectTimeoutMs: number;
  readonly maxMessageBytes: number;
  /** WebSocket-level pings: never JSON-RPC, so they do not touch the world's watchdog (AWP-SAF-003). */
  readonly pingIntervalMs: number;
}

export class DialError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

/** Dials a world; resolves once the WebSocket is open with subprotocol `awp`. */
export function dialUpstream(opts: DialOptions, handlers: UpstreamHandlers): Promise<UpstreamConnection> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {};
    if (opts.credential !== undefined) headers.authorization = `Bearer ${opts.credential}`;
    const ws = new WebSocket(opts.url, ['awp'], {
      headers,
      perMessageDeflate: false,
      maxPayload: opts.maxMessageBytes,
      handshakeTimeout: opts.connectTimeoutMs,
    });
    let opened = false;
    ws.on('unexpected-response', (_req, res) => {
      ws.terminate();
      reject(new DialError(`world refused the connection: HTTP ${res.statusCode ?? 0}`, res.statusCode));
    });
    ws.once('error', (err: Error) => {
      if (!opened) reject(new DialError(`cannot reach the world: ${describe(err)}`));
    });
    ws.once('open', () => {
      if (ws.protocol !== 'awp') {
        ws.terminate();
        reject(new DialError('the world did not select subprotocol "awp"'));
        return;
      }
      opened = true;
      attach(ws, handlers, opts.pingIntervalMs, () => undefined);
      resolve({
        send: (data, binary) => ws.send(data, { binary }),
        get bufferedAmount() {
          return ws.bufferedAmount;
        },
        close: (code, reason) => ws.close(code, reason),
        terminate: () => ws.terminate(),
      });
    });
  });
}

function describe(err: Error): string {
  const code = (err as { code?: string }).code;
  return code !== undefined ? `${code} ${err.message}` : err.message;
}
