import type { Socket } from 'node:net';
import type { WebSocket } from 'ws';
import type { ConnectionHandlers } from './engine.js';

/**
 * The TCP socket under a `ws` WebSocket. `ws` has no public drain event; the socket's own 'drain'
 * is the engine's real backpressure signal, so we read it rather than poll `bufferedAmount`.
 */
export function socketOf(ws: WebSocket): Socket | undefined {
  // `_socket` is ws's documented-by-convention internal, stable across ws 7 and 8.
  return (ws as unknown as { _socket?: Socket })._socket;
}

/**
 * Wires a `ws` socket (accepted from an agent, or dialled to a world) to the edge's handlers, with
 * WebSocket-level pings for hop liveness: never JSON-RPC, so they do not touch a world's watchdog.
 */
export function attach(
  ws: WebSocket,
  h: ConnectionHandlers,
  pingIntervalMs: number,
  onGone: () => void,
): void {
  let alive = true;
  const timer =
    pingIntervalMs > 0
      ? setInterval(() => {
          if (!alive) {
            // Two intervals without a pong: the hop is dead, unless the pong is already waiting to be
            // read behind a stalled event loop, so look once more after this turn's reads.
            setImmediate(() => {
              if (!alive) ws.terminate();
            });
            return;
          }
          alive = false;
          ws.ping();
        }, pingIntervalMs)
      : undefined;
  timer?.unref();
  ws.on('pong', () => (alive = true));
  ws.on('message', (data: Buffer, binary: boolean) => {
    alive = true;
    h.message(binary ? data : data.toString('utf8'), binary);
  });
  socketOf(ws)?.on('drain', () => h.drain());
  ws.on('error', () => ws.terminate());
  ws.once('close', (code: number, reason: Buffer) => {
    if (timer) clearInterval(timer);
    onGone();
    h.close(code, reason.toString('utf8'));
  });
}
