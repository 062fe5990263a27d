/**
 * A Redis look-alike on loopback that can stop answering while it keeps accepting connections (what a
 * SIGSTOPped server, a stuck script or a blackholed path look like to the client). While it answers it
 * speaks just enough RESP for RedisSessionStore: INFO gets a ready server's reply, scripts get `:1` (a
 * done write), anything else `+OK`. Once `hang()` is called nothing more is answered: not on the
 * connections open then (ever), nor the handshake of new ones until `answer()`.
 */
import { createServer, type Server, type Socket } from 'node:net';

export class FakeRedis {
  /** Connections accepted so far, and those the client has closed. */
  accepted = 0;
  closedByClient = 0;
  /** Bytes of commands received while hung (what the client sent that never got a reply). */
  unanswered = 0;
  private hung = false;
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(): Promise<FakeRedis> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no TCP address');
    const fake = new FakeRedis(server, address.port);
    server.on('connection', (socket) => fake.serve(socket));
    return fake;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Stops answering (every connection, new ones included). */
  hang(): void {
    this.hung = true;
  }

  /** New connections are answered again; one that saw the hang stays silent (its replies would be out of order). */
  answer(): void {
    this.hung = false;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private serve(socket: Socket): void {
    this.accepted++;
    this.sockets.add(socket);
    let silent = false;
    let pending = Buffer.alloc(0);
    socket.on('error', () => undefined);
    socket.on('end', () => {
      this.closedByClient++;
      socket.destroy();
    });
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('data', (chunk: Buffer) => {
      if (this.hung) silent = true;
      if (silent) {
        this.unanswered += chunk.length;
        return;
      }
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const parsed = parseCommand(pending);
        if (parsed === null) break;
        pending = pending.subarray(parsed.length);
        socket.write(reply(parsed.name));
      }
    });
  }
}

function reply(name: string): string {
  if (name === 'info') {
    const info = 'loading:0\r\n';
    return `$${info.length}\r\n${info}\r\n`;
  }
  return name === 'evalsha' || name === 'eval' ? ':1\r\n' : '+OK\r\n';
}

/** One RESP array command at the start of `buf`: its name (lower case) and byte length, or null if partial. */
function parseCommand(buf: Buffer): { name: string; length: number } | null {
  const line = (at: number): { text: string; next: number } | null => {
    const end = buf.indexOf('\r\n', at);
    return end < 0 ? null : { text: buf.toString('latin1', at, end), next: end + 2 };
  };
  const head = line(0);
  if (head === null) return null;
  if (!head.text.startsWith('*')) throw new Error(`not a RESP array: ${head.text}`);
  let at = head.next;
  let name = '';
  for (let i = 0; i < Number(head.text.slice(1)); i++) {
    const bulk = line(at);
    if (bulk === null) return null;
    const size = Number(bulk.text.slice(1));
    if (buf.length < bulk.next + size + 2) return null;
    if (i === 0) name = buf.toString('latin1', bulk.next, bulk.next + size).toLowerCase();
    at = bulk.next + size + 2;
  }
  return { name, length: at };
}
