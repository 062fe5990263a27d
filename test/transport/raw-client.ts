/** Handcrafted HTTP/WebSocket clients on a raw TCP socket, to see exactly what an engine writes. */
import { randomBytes } from 'node:crypto';
import { get, type IncomingHttpHeaders } from 'node:http';
import { connect, type Socket } from 'node:net';
import { withTimeout } from './engines.js';

export interface RawResponse {
  readonly status: number;
  /** The response head as sent, status line and header lines. */
  readonly head: string;
  /** Header lines by lowercased name (repeated names kept in order). */
  readonly headers: ReadonlyMap<string, readonly string[]>;
}

export interface RawUpgrade extends RawResponse {
  readonly socket: Socket;
  /** Bytes after the head received so far. */
  readonly rest: Buffer;
}

export type RawHeaders = Record<string, string> | readonly (readonly [string, string])[];

/** Sends a WebSocket upgrade request and resolves with the response head; the socket stays open. */
export function rawUpgrade(
  port: number,
  path: string,
  headers: RawHeaders = {},
  timeoutMs = 5000,
): Promise<RawUpgrade> {
  return startUpgrade(port, path, headers, timeoutMs).response;
}

/** Sends a WebSocket upgrade request; the socket is the caller's at once (to leave before an answer). */
export function startUpgrade(
  port: number,
  path: string,
  headers: RawHeaders = {},
  timeoutMs = 5000,
): { socket: Socket; response: Promise<RawUpgrade> } {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => socket.destroy());
  const extra: readonly (readonly [string, string])[] = Array.isArray(headers)
    ? headers
    : Object.entries(headers);
  const given = new Set(extra.map(([k]) => k.toLowerCase()));
  const lines = [
    `GET ${path} HTTP/1.1`,
    `Host: 127.0.0.1:${port}`,
    'Upgrade: websocket',
    'Connection: Upgrade',
    `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
    ...(given.has('sec-websocket-version') ? [] : ['Sec-WebSocket-Version: 13']),
    ...extra.map(([k, v]) => `${k}: ${v}`),
  ];
  socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  const response = withTimeout(readHead(socket), timeoutMs, 'the upgrade response').catch((err: unknown) => {
    socket.destroy();
    throw err;
  });
  return { socket, response };
}

function readHead(socket: Socket): Promise<RawUpgrade> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.pause();
      const head = buf.subarray(0, end).toString('latin1');
      resolve({ ...parseHead(head), socket, rest: buf.subarray(end + 4) });
    };
    const onClose = () =>
      reject(new Error(`connection closed before a response head: ${buf.toString('latin1')}`));
    socket.on('data', onData);
    socket.once('close', onClose);
  });
}

function parseHead(head: string): RawResponse {
  const [statusLine = '', ...rest] = head.split('\r\n');
  const status = Number(statusLine.split(' ')[1]);
  const headers = new Map<string, string[]>();
  for (const line of rest) {
    const i = line.indexOf(':');
    const name = line.slice(0, i).trim().toLowerCase();
    headers.set(name, [...(headers.get(name) ?? []), line.slice(i + 1).trim()]);
  }
  return { status, head, headers };
}

/** Reads the rest of a response (refusals close the connection): the body as text. */
export function readToEnd(up: RawUpgrade, timeoutMs = 5000): Promise<string> {
  const chunks: Buffer[] = [up.rest];
  return withTimeout(
    new Promise<string>((resolve) => {
      up.socket.on('data', (c: Buffer) => chunks.push(c));
      up.socket.once('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
      up.socket.resume();
    }),
    timeoutMs,
    'the server to close the connection',
  );
}

/** A plain HTTP request (no upgrade), through node:http so any transfer encoding is decoded. */
export function plainGet(
  port: number,
  path: string,
  timeoutMs = 5000,
): Promise<{ status: number; headers: IncomingHttpHeaders; body: string }> {
  return withTimeout(
    new Promise((resolve, reject) => {
      const req = get({ host: '127.0.0.1', port, path, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', reject);
      });
      req.on('error', reject);
    }),
    timeoutMs,
    'the HTTP response',
  );
}
