/**
 * The handshake limits (handshake-guard.ts) on uWebSockets.js. uWS hands JavaScript no socket before it
 * has parsed a request, only its `filter` hook: a handle to each new TCP connection, and closes without
 * saying which socket closed. So each connection is keyed by its own handle, and the two per-socket
 * callbacks uWS keeps until a request arrives say when it stops being pending:
 * - `onAborted`: it closed before any request (the client left, uWS's own timeout, a parse error, ours);
 * - `onData`: uWS's end-of-request call, which follows the handler of every request that did not
 *   upgrade or close the socket synchronously: a request arrived, the connection is the handler's now.
 * The handle is used (to close it) only while pending, so never after its socket is gone.
 *
 * A synchronous upgrade (inside the request handler) skips the end-of-request call, and the request
 * handler's `res` is another object than the filter's, with nothing (no port) to match them by. So
 * the engine upgrades synchronously only when it can name the connection's entry: the only one pending
 * from its address (`releaseOnly`). Otherwise it upgrades on a later turn, after `onData` released it.
 */
import type { HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { PendingHandshakes, type HandshakeCloseReason, type HandshakeLimits } from './handshake-guard.js';

const decoder = new TextDecoder();

export function guardUwsHandshakes(
  app: TemplatedApp,
  limits: HandshakeLimits,
  closed: (reason: HandshakeCloseReason) => void,
): PendingHandshakes<HttpResponse> {
  const pending = new PendingHandshakes<HttpResponse>(limits, closed);
  app.filter((res, count) => {
    if (Number(count) < 0) return; // a close, of a socket uWS does not name: onAborted below tells which
    const address = decoder.decode(res.getRemoteAddressAsText());
    if (!pending.admit(res, address, () => res.close())) return;
    res.onAborted(() => pending.release(res));
    res.onData(() => pending.release(res));
  });
  return pending;
}

/**
 * Inside a request handler: releases the entry of the connection `res` (the handler's) arrived on, if
 * it is the only connection pending from its address (then it must be this one). Returns whether it did;
 * then the handler may upgrade synchronously.
 */
export function releaseOnly(pending: PendingHandshakes<HttpResponse>, res: HttpResponse): boolean {
  const key = pending.only(decoder.decode(res.getRemoteAddressAsText()));
  return key !== undefined && pending.release(key);
}

/** Resolves after uWS has finished with the current request's data (see above), on a later turn. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
