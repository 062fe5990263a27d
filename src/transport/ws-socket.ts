import type { Socket } from 'node:net';
import type { WebSocket } from 'ws';

/**
 * The TCP socket under a `ws` WebSocket. `ws` has no public drain event; the socket's own 'drain'
 * is the engine's real backpressure signal, so we read it rather than poll `bufferedAmount`.
 */
export function socketOf(ws: WebSocket): Socket | undefined {
  // `_socket` is ws's documented-by-convention internal, stable across ws 7 and 8.
  return (ws as unknown as { _socket?: Socket })._socket;
}
