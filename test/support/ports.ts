/**
 * A free loopback port for a server a test starts later (a child process, or one restarted on the same
 * port). Chosen below the kernel's ephemeral range (Linux: 32768-60999), so that between the probe and the
 * bind no outgoing connection takes it as its local port, and a client redialling a stopped server on it
 * never connects to itself (TCP simultaneous open on loopback), both seen as rare failures on busy machines.
 */
import { createServer } from 'node:net';

const LOW = 20_000;
const HIGH = 32_767;

export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = LOW + Math.floor(Math.random() * (HIGH - LOW + 1));
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port in ${LOW}-${HIGH} after 50 tries`);
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => server.close(() => resolve(true)));
  });
}
