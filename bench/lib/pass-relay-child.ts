/**
 * The floor of any relay: a minimal pass-through WebSocket proxy (uWS or `ws` server side, `ws` client
 * upstream, as the edge) that forwards every message unchanged and parses nothing. What it adds to a
 * round trip is the cost of one more hop and process on this machine, not of the edge's logic.
 * argv[2]: JSON { upstream, engine: 'uws' | 'ws' }.
 */
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import { loadUws } from '../../src/transport/uws-load.js';
import { serve } from './ipc.js';

const { upstream, engine } = JSON.parse(process.argv[2] ?? '{}') as {
  upstream: string;
  engine: 'uws' | 'ws';
};

/** One upstream connection per client, messages queued until it is open. */
function dial(
  auth: string,
  toClient: (data: RawData | ArrayBuffer, binary: boolean) => void,
  onClose: () => void,
) {
  const up = new WebSocket(upstream, ['awp'], { headers: { authorization: auth }, perMessageDeflate: false });
  const queue: [Buffer | string, boolean][] = [];
  up.on('open', () => {
    for (const [d, b] of queue.splice(0)) up.send(d, { binary: b });
  });
  up.on('message', (d, binary) => toClient(d, binary));
  up.on('close', onClose);
  up.on('error', () => up.terminate());
  return {
    send: (d: Buffer | string, binary: boolean) => {
      if (up.readyState === WebSocket.OPEN) up.send(d, { binary });
      else queue.push([d, binary]);
    },
    close: () => up.close(),
  };
}

let port: number;
if (engine === 'uws') {
  const uws = loadUws();
  const app = uws.App();
  interface Data {
    auth: string;
    up?: ReturnType<typeof dial>;
  }
  app.ws<Data>('/*', {
    compression: uws.DISABLED,
    maxPayloadLength: 16 * 1024 * 1024,
    maxBackpressure: 0,
    idleTimeout: 0,
    upgrade: (res, req, context) => {
      res.upgrade<Data>(
        { auth: req.getHeader('authorization') },
        req.getHeader('sec-websocket-key'),
        'awp',
        req.getHeader('sec-websocket-extensions'),
        context,
      );
    },
    open: (ws) => {
      const d = ws.getUserData();
      let closed = false;
      d.up = dial(
        d.auth,
        (data, binary) => {
          if (!closed) ws.send(data as Buffer, binary);
        },
        () => {
          if (!closed) ws.end(1000);
        },
      );
      (d as { markClosed?: () => void }).markClosed = () => (closed = true);
    },
    message: (ws, message, binary) => {
      // uWS frees `message` on return: copy binary, decode text.
      const d = ws.getUserData();
      d.up?.send(
        binary ? Buffer.from(new Uint8Array(message)) : Buffer.from(message).toString('utf8'),
        binary,
      );
    },
    close: (ws) => {
      const d = ws.getUserData() as Data & { markClosed?: () => void };
      d.markClosed?.();
      d.up?.close();
    },
  });
  port = await new Promise<number>((resolve, reject) =>
    app.listen('127.0.0.1', 0, (ls) =>
      ls === false ? reject(new Error('listen failed')) : resolve(uws.us_socket_local_port(ls)),
    ),
  );
} else {
  const wss = new WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    perMessageDeflate: false,
    handleProtocols: () => 'awp',
  });
  await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
  wss.on('connection', (ws, req) => {
    const up = dial(
      req.headers.authorization ?? '',
      (data, binary) => ws.send(data as Buffer, { binary }),
      () => ws.close(),
    );
    ws.on('message', (d: Buffer, binary) => up.send(binary ? d : d.toString('utf8'), binary));
    ws.on('close', () => up.close());
  });
  port = (wss.address() as { port: number }).port;
}

serve({}, { url: `ws://127.0.0.1:${port}/`, port });
