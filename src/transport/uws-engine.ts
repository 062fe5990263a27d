import type {
  HttpResponse,
  TemplatedApp,
  WebSocket,
  us_listen_socket,
  us_socket_context_t,
} from 'uWebSockets.js';
import {
  closeReason,
  NOT_WEBSOCKET,
  STATUS_TEXT,
  type AgentServer,
  type ConnectionHandlers,
  type EngineOptions,
  type PlainResponse,
  type ServerConnection,
  type UpgradeOutcome,
} from './engine.js';
import { createServer, type AddressInfo } from 'node:net';
import { loadUws, type UwsModule } from './uws-load.js';
import { copyUpgrade, type CopiedUpgrade } from './uws-request.js';
import { guardUwsHandshakes, nextTurn, releaseOnly } from './uws-handshake.js';

/** Per-connection state: the uWS user data of each socket, created when the edge accepts. */
interface Conn {
  readonly open: (conn: ServerConnection) => ConnectionHandlers;
  readonly abandon: (() => void) | undefined;
  readonly remoteAddress: string;
  ws: WebSocket<Conn> | undefined;
  handlers: ConnectionHandlers | undefined;
  /** uWS closed the socket: it must not be touched again. */
  closed: boolean;
  /** The edge's close handler ran (exactly once). */
  notified: boolean;
  /** The close was ours (close/terminate): uWS reports it synchronously, we report it later, as `ws` does. */
  selfClosed: boolean;
  /** Heard from since the last ping sweep. */
  alive: boolean;
  /** Inside one of our calls into uWS for the edge: a close seen now is reported later. */
  busy: number;
}

/** uWS's listen with options; its typings only declare the (port, options, cb) form. */
type ListenWithOptions = (
  host: string,
  port: number,
  options: number,
  cb: (listenSocket: us_listen_socket | false) => void,
) => TemplatedApp;

const OVERSIZE_GRACE_BYTES = 1024 * 1024;
const decoder = new TextDecoder();
/** Inside an `app.publish`: a close it causes (on any subscriber) is reported on a later turn. */
let publishing = 0;

/** The production engine: uWebSockets.js. Behaves as `listenWs` does (see ws-engine.ts). */
export async function listenUws(opts: EngineOptions): Promise<AgentServer> {
  const uws = loadUws();
  const app = createApp(uws, opts);
  const live = new Set<Conn>();
  let closing = false;
  const pending =
    opts.handshake !== undefined
      ? guardUwsHandshakes(app, opts.handshake, (reason) => opts.onHandshakeClosed?.(reason))
      : undefined;

  app.ws<Conn>('/*', {
    compression: uws.DISABLED,
    // uWS drops a frame over its limit from the header, without a close frame (the client sees 1006).
    // A grace above our limit lets us answer slightly oversized messages with 1009, as `ws` does;
    // beyond it, uWS's drop stands. Memory per connection stays bounded (limit + grace).
    maxPayloadLength: opts.maxMessageBytes + OVERSIZE_GRACE_BYTES,
    // 0 = no limit: uWS otherwise drops sends above 64 KiB of backpressure; the edge's outboxes
    // throttle on bufferedAmount and expect every send to be queued, as `ws` does.
    maxBackpressure: 0,
    closeOnBackpressureLimit: false,
    // Liveness is the ping sweep below: uWS's idleTimeout counts in 4 s steps from 8 s, too coarse
    // for short ping intervals, and the sweep gives both engines the same rule.
    idleTimeout: 0,
    sendPingsAutomatically: false,

    upgrade: (res, req, context) => {
      const copied = copyUpgrade(res, req); // req dies with this call
      let decided: UpgradeOutcome | Promise<UpgradeOutcome>;
      try {
        decided = opts.upgrade(copied.request);
      } catch (err) {
        opts.onError?.(err);
        refuse(res, 500, 'internal error\n');
        return;
      }
      // A decision made now is answered inside this handler, which uWS has corked (its own upgrade
      // path): a refusal always; an acceptance when the handshake limits can release this connection
      // first (an upgrade here skips the end-of-request call that releases it otherwise, and the
      // limits would keep a handle to the upgraded socket, see uws-handshake.ts).
      if (
        !(decided instanceof Promise) &&
        (!decided.accept || pending === undefined || releaseOnly(pending, res))
      )
        return answer(res, decided, copied, context);
      // Otherwise the acceptance waits for a later turn (end-of-request has released the connection),
      // and upgrades there uncorked: a corked upgrade outside the handler can close the new socket right
      // after open in this release (uNetworking/uWebSockets#1928: cork() checks the upgraded socket's
      // memory as HTTP state when realloc kept its address). uWS.js warns of an uncorked write.
      let aborted = false;
      let answered = false;
      res.onAborted(() => (aborted = true));
      void Promise.resolve(decided)
        .then(async (outcome) => {
          if (outcome.accept) await nextTurn();
          if (aborted || closing) {
            if (outcome.accept) outcome.abandon?.();
            return;
          }
          answered = true;
          if (outcome.accept && (copied.version === '13' || copied.version === '8'))
            answer(res, outcome, copied, context);
          else res.cork(() => answer(res, outcome, copied, context));
        })
        .catch((err: unknown) => {
          // A failed decision is a 500, as with `ws`; after an answer the response is gone.
          opts.onError?.(err);
          if (aborted || closing || answered) return;
          res.cork(() => refuse(res, 500, 'internal error\n'));
        });
    },

    open: (ws) => {
      const c = ws.getUserData();
      c.ws = ws;
      live.add(c);
      try {
        c.handlers = c.open(wrap(c, app));
      } catch (err) {
        opts.onError?.(err);
        c.abandon?.();
        if (!c.closed) ws.end(1011, 'internal error');
      }
    },

    message: (ws, message, isBinary) => {
      const c = ws.getUserData();
      if (c.closed) return;
      c.alive = true;
      if (message.byteLength > opts.maxMessageBytes) {
        c.selfClosed = true;
        ws.end(1009, ''); // what `ws` sends for a message over maxPayload
        return;
      }
      // uWS frees `message` when this returns: binary is copied, text is decoded into a new string.
      if (isBinary) c.handlers?.message(Buffer.from(new Uint8Array(message)), true);
      else c.handlers?.message(decoder.decode(message), false);
    },

    pong: (ws) => {
      ws.getUserData().alive = true;
    },

    drain: (ws) => {
      const c = ws.getUserData();
      if (!c.closed) c.handlers?.drain();
    },

    close: (ws, code, message) => {
      const c = ws.getUserData();
      c.closed = true;
      live.delete(c);
      const reason = decoder.decode(message);
      // A close we started (or one during open) is reported on a later turn, never inside the call
      // that caused it, like `ws`, whose close event waits for the peer's answer.
      if (c.selfClosed || c.busy > 0 || publishing > 0 || c.handlers === undefined)
        setImmediate(() => notifyClosed(c, code, reason));
      else notifyClosed(c, code, reason);
    },
  });

  app.any('/*', (res, req) => {
    let answer: PlainResponse | undefined;
    const method = req.getCaseSensitiveMethod();
    const query = req.getQuery() as string | undefined; // undefined without a query
    try {
      // Read synchronously: uWS's request object is valid only inside this handler.
      answer = opts.plain?.({
        method,
        path: req.getUrl(),
        query: query ?? '',
        header: (name) => req.getHeader(name.toLowerCase()) || undefined,
      });
    } catch (err) {
      opts.onError?.(err);
      answer = { status: 500, headers: { 'content-type': 'text/plain' }, body: 'internal error\n' };
    }
    if (answer === undefined) {
      res
        .writeStatus('426 Upgrade Required')
        .writeHeader('Content-Type', 'text/plain')
        .end(NOT_WEBSOCKET, true);
      return;
    }
    res.cork(() => {
      res.writeStatus(`${answer.status} ${STATUS_TEXT[answer.status] ?? 'OK'}`);
      for (const [k, v] of Object.entries(answer.headers)) res.writeHeader(k, v);
      // Close after the answer, as the 426 does: uWS's close() leaves keep-alive HTTP connections open,
      // and they keep the port from being listened on again.
      res.end(method === 'HEAD' ? '' : answer.body, true);
    });
  });

  const timer =
    opts.pingIntervalMs > 0
      ? setInterval(() => {
          const suspects: Conn[] = [];
          for (const c of live) {
            if (!c.alive) {
              suspects.push(c);
              continue;
            }
            c.alive = false;
            c.ws?.ping();
          }
          // Decide after this turn's I/O: a pong that arrived while the event loop was stalled
          // (timers run before socket reads) still counts. Two intervals without one: the hop is dead.
          if (suspects.length > 0) {
            setImmediate(() => {
              for (const c of suspects) if (!c.alive) terminate(c);
            });
          }
        }, opts.pingIntervalMs)
      : undefined;
  timer?.unref();

  const listenSocket = await listenOn(app, uws, opts.host, opts.port).catch(async (err: unknown) => {
    if (timer) clearInterval(timer);
    app.close();
    throw (await whyNotListening(opts.host, opts.port)) ?? err;
  });

  return {
    engine: 'uws',
    port: uws.us_socket_local_port(listenSocket),
    close: async () => {
      if (closing) return;
      closing = true;
      if (timer) clearInterval(timer);
      uws.us_listen_socket_close(listenSocket);
      pending?.clear(); // app.close() below closes them
      for (const c of [...live]) terminate(c);
      app.close(); // also the HTTP connections: upgrades still being decided are aborted
      // Let the close handlers of the terminated sockets run before resolving, as with `ws`.
      await new Promise<void>((resolve) => setImmediate(resolve));
    },
  };
}

/** Attempts at a port picked for `port: 0` (another process may take it between the pick and the bind). */
const PICK_ATTEMPTS = 5;

/**
 * Listens with an exclusive port: without it uWS sets SO_REUSEPORT, and a second server on the port would
 * silently share it. uSockets sets SO_REUSEADDR only when given a port: on port 0 the connections the server
 * closed would, in TIME_WAIT, keep it from listening on the port it got again for a minute (a restart on
 * it). So for port 0 the port is picked first, by node:net, and given to uWS.
 */
async function listenOn(
  app: TemplatedApp,
  uws: UwsModule,
  host: string,
  port: number,
): Promise<us_listen_socket> {
  const once = (p: number) =>
    new Promise<us_listen_socket | false>((resolve) =>
      (app.listen.bind(app) as unknown as ListenWithOptions)(host, p, exclusivePort(uws), resolve),
    );
  if (port !== 0) {
    const ls = await once(port);
    if (ls === false) throw new Error(`uWebSockets.js cannot listen on ${host}:${port}`);
    return ls;
  }
  for (let attempt = 1; ; attempt++) {
    const picked = await pickPort(host);
    const ls = await once(picked);
    if (ls !== false) return ls;
    if (attempt === PICK_ATTEMPTS) throw new Error(`uWebSockets.js cannot listen on ${host}:${picked}`);
  }
}

/** A port the system hands out on `host` now (listened on once, released at once: no connection lingers). */
function pickPort(host: string): Promise<number> {
  const probe = createServer();
  return new Promise((resolve, reject) => {
    probe.once('error', reject);
    probe.listen({ host, port: 0, exclusive: true }, () => {
      const port = (probe.address() as AddressInfo).port;
      probe.close(() => resolve(port));
    });
  });
}

/** The app; uWS reports a certificate or key it cannot load only as "App construction failed". */
function createApp(uws: UwsModule, opts: EngineOptions): TemplatedApp {
  if (opts.tls === undefined) return uws.App();
  try {
    return uws.SSLApp({ cert_file_name: opts.tls.cert_file, key_file_name: opts.tls.key_file });
  } catch (err) {
    throw new Error(
      `uWebSockets.js cannot load the TLS certificate or private key (${opts.tls.cert_file}, ${opts.tls.key_file}): ${(err as Error).message}`,
      { cause: err },
    );
  }
}

/**
 * uWS says only that it could not listen; the system's reason (EADDRINUSE, EACCES, EADDRNOTAVAIL, ...)
 * comes from trying the same address once with node:net, as the error `ws` would have raised.
 */
async function whyNotListening(host: string, port: number): Promise<Error | undefined> {
  const probe = createServer();
  return new Promise((resolve) => {
    probe.once('error', (err) => resolve(err));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(undefined)));
  });
}

/** The runtime exports the flag at top level; the typings only as a (non-existent) enum member. */
function exclusivePort(uws: UwsModule): number {
  return (uws as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT?: number }).LIBUS_LISTEN_EXCLUSIVE_PORT ?? 1;
}

function answer(
  res: HttpResponse,
  outcome: UpgradeOutcome,
  copied: CopiedUpgrade,
  context: us_socket_context_t,
): void {
  if (!outcome.accept) {
    refuse(res, outcome.status, outcome.body);
    return;
  }
  if (copied.version !== '13' && copied.version !== '8') {
    // uWS would upgrade any version; `ws` refuses others (a bad key uWS itself routes to the 426).
    outcome.abandon?.();
    refuse(res, 400, 'Missing or invalid Sec-WebSocket-Version header');
    return;
  }
  const conn: Conn = {
    open: outcome.open,
    abandon: outcome.abandon,
    remoteAddress: copied.request.remoteAddress,
    ws: undefined,
    handlers: undefined,
    closed: false,
    notified: false,
    selfClosed: false,
    alive: true,
    busy: 0,
  };
  // The edge chose `awp` before the upgrade; never echo an awp.bearer.* credential.
  const protocol = copied.request.protocols.length > 0 ? 'awp' : '';
  res.upgrade<Conn>(conn, copied.key, protocol, '', context);
}

function refuse(res: HttpResponse, status: number, body: string): void {
  res
    .writeStatus(`${status} ${STATUS_TEXT[status] ?? 'Error'}`)
    .writeHeader('Content-Type', 'text/plain')
    .end(body, true);
}

function notifyClosed(c: Conn, code: number, reason: string): void {
  if (c.notified) return;
  c.notified = true;
  c.handlers?.close(code, reason);
}

function terminate(c: Conn): void {
  if (c.closed || c.ws === undefined) return;
  c.selfClosed = true;
  c.ws.close();
}

function wrap(c: Conn, app: TemplatedApp): ServerConnection {
  const topics = {
    subscribe: (topic: string) => !c.closed && c.ws !== undefined && c.ws.subscribe(topic),
    unsubscribe: (topic: string) => {
      if (!c.closed && c.ws !== undefined) c.ws.unsubscribe(topic);
    },
    publish: (topic: string, data: Uint8Array) => {
      publishing++;
      try {
        app.publish(topic, data, true, false);
      } finally {
        publishing--;
      }
    },
  };
  return {
    topics,
    send: (data, binary) => {
      if (c.closed || c.ws === undefined) return;
      c.busy++;
      try {
        c.ws.send(data, binary, false);
      } finally {
        c.busy--;
      }
    },
    get bufferedAmount() {
      return c.closed || c.ws === undefined ? 0 : c.ws.getBufferedAmount();
    },
    close: (code, reason) => {
      if (c.closed || c.ws === undefined) return;
      c.selfClosed = true;
      c.ws.end(code, closeReason(reason));
    },
    terminate: () => terminate(c),
    remoteAddress: c.remoteAddress,
  };
}
