/** After close(), the edge's WebTransport listener, sessions and relays hold nothing: the process exits by itself. */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createServer } from 'node:net';
import { startDemoWorld } from '../../src/demo/index.js';
import { runToExit } from '../support/run-child.js';
import { startWtEdge, until } from './support.js';

const child = fileURLToPath(new URL('./fixtures/sessions-and-close.ts', import.meta.url));

describe('webtransport shutdown', () => {
  it('closes live observer and relay sessions (1001) and lets the process exit', async () => {
    const { code, out } = await runToExit(child, [], 20_000);
    expect(out).toContain('frames 2 2');
    expect(out).toContain('sessions closed 1001 1001');
    expect(out).toContain('\nclosed\n');
    expect(code).toBe(0);
  }, 30_000);

  it('fails to start when its port is taken, releasing what did start', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    const world = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0 });
    const listeners = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPServerWrap').length;
    const before = listeners();
    try {
      await expect(
        startWtEdge([{ path: '/arm', upstream: world.url }], {}, `127.0.0.1:${port}`),
      ).rejects.toThrow(/EADDRINUSE/);
      // The agent and admin listeners it had opened are closed again (handles go a little later).
      await until(() => listeners() === before, 5000, 'the listeners to be released');
    } finally {
      await world.close();
      await new Promise((resolve) => blocker.close(resolve));
    }
  });
});
