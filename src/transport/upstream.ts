import { WebSocket } from 'ws';
import type { ConnectionHandlers } from './engine.js';
import { attach } from './ws-socket.js';
import { containHandlers, type FaultReporter } from './contain.js';
import { DialGate, upstreamKey } from './dial-gate.js';

/** Handshakes in flight per upstream, shared by every route, hub and stream of this process. */
const gate = new DialGate();

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
  /** Faults in the handlers (bugs met on the world's input) are reported here; the connection closes 1011. */
  readonly onFault: FaultReporter;
}

export class DialError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

/**
 * Dials a world; resolves once the WebSocket is open with subprotocol `awp`. At most
 * MAX_PENDING_DIALS_PER_UPSTREAM handshakes toward one upstream run at once (dial-gate.ts); the wait
 * for a turn counts against `connectTimeoutMs`.
 */
export async function dialUpstream(
  opts: DialOptions,
  handlers: UpstreamHandlers,
): Promise<UpstreamConnection> {
  const started = performance.now();
  const release = await gate.acquire(upstreamKey(opts.url), opts.connectTimeoutMs).catch((err: unknown) => {
    throw new DialError(`cannot reach the world: ${(err as Error).message}`);
  });
  const left = Math.max(1, Math.round(opts.connectTimeoutMs - (performance.now() - started)));
  return new Promise<UpstreamConnection>((resolve, reject) => {
    const headers: Record<string, string> = {};
    if (opts.credential !== undefined) headers.authorization = `Bearer ${opts.credential}`;
    const ws = new WebSocket(opts.url, ['awp'], {
      headers,
      perMessageDeflate: false,
      maxPayload: opts.maxMessageBytes,
      handshakeTimeout: left,
    });
    let opened = false;
    ws.once('close', release);
    ws.on('unexpected-response', (_req, res) => {
      release();
      ws.terminate();
      reject(new DialError(`world refused the connection: HTTP ${res.statusCode ?? 0}`, res.statusCode));
    });
    ws.once('error', (err: Error) => {
      release();
      if (!opened) reject(new DialError(`cannot reach the world: ${describe(err)}`));
    });
    ws.once('open', () => {
      release();
      if (ws.protocol !== 'awp') {
        ws.terminate();
        reject(new DialError('the world did not select subprotocol "awp"'));
        return;
      }
      opened = true;
      const contained = containHandlers('upstream', handlers, opts.onFault, () =>
        ws.close(1011, 'internal error'),
      );
      attach(ws, contained, opts.pingIntervalMs, () => undefined);
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
