/** `ws` clients for the engine tests, closed after each test by `closeClients`. */
import WebSocket from 'ws';
import { withTimeout } from './engines.js';

export interface Client {
  readonly ws: WebSocket;
  readonly received: { data: Buffer; binary: boolean }[];
  readonly closed: Promise<{ code: number; reason: string }>;
}

const open = new Set<WebSocket>();

export async function openClient(url: string, protocols: string[] = ['awp']): Promise<Client> {
  const ws = new WebSocket(url, protocols, { perMessageDeflate: false, maxPayload: 64 * 1024 * 1024 });
  open.add(ws);
  const received: Client['received'] = [];
  ws.on('message', (data: Buffer, binary: boolean) => received.push({ data, binary }));
  ws.on('error', () => undefined); // surfaced through `closed`
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.once('close', (code: number, reason: Buffer) => {
      open.delete(ws);
      resolve({ code, reason: reason.toString('utf8') });
    }),
  );
  await withTimeout(
    new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
      ws.once('error', reject);
    }),
    5000,
    'the client to open',
  );
  return { ws, received, closed };
}

export function closeClients(): void {
  for (const ws of open) ws.terminate();
  open.clear();
}

/** A port nothing listens on now (the kernel's pick, released at once). */
