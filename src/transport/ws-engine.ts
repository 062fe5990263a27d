import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  closeReason,
  NOT_WEBSOCKET,
  parseProtocols,
  STATUS_TEXT,
  type AgentServer,
  type ConnectionHandlers,
  type EngineOptions,
  type PlainRequest,
  type PlainResponse,
  type ServerConnection,
  type UpgradeRequest,
} from './engine.js';
import { attach } from './ws-socket.js';
import { HandshakeGuard } from './handshake-guard.js';

/** The portable engine: `ws` on `node:http`. */
export async function listenWs(opts: EngineOptions): Promise<AgentServer> {
  const plain = (req: IncomingMessage, res: ServerResponse) => {
    let answer: PlainResponse | undefined;
    try {
      answer = opts.plain?.(plainRequest(req));
    } catch (err) {
      opts.onError?.(err);
      answer = { status: 500, headers: { 'content-type': 'text/plain' }, body: 'internal error\n' };
    }
    if (answer === undefined) {
      res.writeHead(426, { 'content-type': 'text/plain', connection: 'close' });
      res.end(NOT_WEBSOCKET);
      return;
    }
    res.writeHead(answer.status, { ...answer.headers, 'content-length': Buffer.byteLength(answer.body) });
    res.end(req.method === 'HEAD' ? undefined : answer.body);
  };
  const http =
    opts.tls !== undefined
      ? createHttpsServer({ cert: opts.tls.cert, key: opts.tls.key }, plain)
      : createServer(plain);
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: opts.maxMessageBytes,
    perMessageDeflate: false,
    // The edge chose the protocol before the upgrade; never echo an awp.bearer.* credential.
    handleProtocols: () => 'awp',
  });
  const live = new Set<WebSocket>();
  const guard =
    opts.handshake !== undefined
      ? new HandshakeGuard(opts.handshake, (reason) => opts.onHandshakeClosed?.(reason))
      : undefined;
  if (guard !== undefined) http.on('connection', (socket: Socket) => guard.admit(socket));

  http.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    const request = upgradeRequest(req);
    void Promise.resolve()
      .then(() => opts.upgrade(request))
      .then((outcome) => {
        if (socket.destroyed) {
          if (outcome.accept) outcome.abandon?.();
          return;
        }
        if (!outcome.accept) {
          refuse(socket, outcome.status, outcome.body);
          return;
        }
        // ws drops a socket whose handshake fails without calling back: the outcome is abandoned then.
        let opened = false;
        socket.once('close', () => {
          if (!opened) outcome.abandon?.();
        });
        wss.handleUpgrade(req, socket, head, (ws) => {
          opened = true;
          guard?.done(req.socket);
          live.add(ws);
          let handlers: ConnectionHandlers;
          try {
            handlers = outcome.open(wrap(ws, request.remoteAddress));
          } catch (err) {
            opts.onError?.(err);
            outcome.abandon?.();
            live.delete(ws);
            ws.close(1011, 'internal error');
            return;
          }
          attach(ws, handlers, opts.pingIntervalMs, () => live.delete(ws));
        });
      })
      .catch((err: unknown) => {
        opts.onError?.(err);
        refuse(socket, 500, 'internal error\n');
      });
  });

  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(opts.port, opts.host, () => resolve());
  });
  const address = http.address();
  const port = typeof address === 'object' && address !== null ? address.port : opts.port;
  return {
    engine: 'ws',
    port,
    close: async () => {
      for (const ws of live) ws.terminate();
      wss.close();
      const closed = new Promise<void>((resolve) => http.close(() => resolve()));
      // Also connections that never sent a request, which http.close() would wait for (up to its
      // headersTimeout): uWS's close ends them too.
      http.closeAllConnections();
      await closed;
    },
  };
}

function plainRequest(req: IncomingMessage): PlainRequest {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  return {
    method: req.method ?? 'GET',
    path: q < 0 ? url : url.slice(0, q),
    query: q < 0 ? '' : url.slice(q + 1),
    header: (name) => {
      const v = req.headers[name.toLowerCase()];
      return Array.isArray(v) ? v.join(', ') : v;
    },
  };
}

function upgradeRequest(req: IncomingMessage): UpgradeRequest {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  return {
    path: q < 0 ? url : url.slice(0, q),
    query: q < 0 ? '' : url.slice(q + 1),
    header: (name) => {
      const v = req.headers[name.toLowerCase()];
      return Array.isArray(v) ? v.join(', ') : v;
    },
    protocols: parseProtocols(req.headers['sec-websocket-protocol']),
    remoteAddress: req.socket.remoteAddress ?? '',
  };
}

function refuse(socket: Duplex, status: number, body: string): void {
  const reason = STATUS_TEXT[status] ?? 'Error';
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

function wrap(ws: WebSocket, remoteAddress: string): ServerConnection {
  return {
    send: (data, binary) => ws.send(data, { binary }),
    get bufferedAmount() {
      return ws.bufferedAmount;
    },
    close: (code, reason) => ws.close(code, closeReason(reason)),
    terminate: () => ws.terminate(),
    remoteAddress,
  };
}
