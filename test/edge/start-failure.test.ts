/**
 * A start that fails part-way leaves nothing behind: when the admin listener cannot listen, the agent
 * listener that did start is closed before the caller gets the error, so its port is free at once (on the
 * engine AWP_EDGE_ENGINE names; uWebSockets.js listens with an exclusive port, so a leaked listener would
 * keep it).
 */
import { createServer, type AddressInfo, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import { Edge } from '../../src/edge/edge.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { freePort } from '../support/ports.js';

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((resolve) => s.close(resolve));
});

async function listen(port: number): Promise<Server> {
  const s = createServer();
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject);
    s.listen(port, '127.0.0.1', () => resolve());
  });
  servers.push(s);
  return s;
}

describe('Edge.start when a later listener cannot listen', () => {
  it('closes the agent listener (and the viewer) before rejecting with the admin listener error', async () => {
    const taken = await listen(0);
    const adminPort = (taken.address() as AddressInfo).port;
    const agentPort = await freePort();
    const config = validateConfig(
      {
        listen: `127.0.0.1:${agentPort}`,
        admin: `127.0.0.1:${adminPort}`,
        engine: process.env.AWP_EDGE_ENGINE ?? 'ws',
        agents: { tokens: ['start-failure-token'] },
        viewer: { enabled: true },
        routes: [{ path: '/', upstream: 'ws://127.0.0.1:9/' }],
      },
      'test',
      {},
    );
    await expect(Edge.start(config, { log: createLogger('silent') })).rejects.toMatchObject({
      code: 'EADDRINUSE',
      port: adminPort,
    });
    // Nothing listens on the agent port any more: another server can take it, then the edge again.
    const free = await listen(agentPort);
    await new Promise((resolve) => free.close(resolve));
    servers.splice(servers.indexOf(free), 1);
    const edge = await Edge.start(
      { ...config, admin: { host: '127.0.0.1', port: 0 } },
      { log: createLogger('silent') },
    );
    try {
      expect(edge.port).toBe(agentPort);
    } finally {
      await edge.close();
    }
  });
});
