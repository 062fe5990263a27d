/**
 * Engine selection: `auto` takes uWS where it loads and falls back to `ws` (without an unhandled
 * rejection from the failed load, which vitest would report); `uws` where it cannot load is an error.
 * The edge test helper runs the engine named by AWP_EDGE_ENGINE.
 */
import { createServer, type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentServer, EngineOptions } from '../../src/transport/engine.js';
import { listenAgents } from '../../src/transport/select-engine.js';
import { createDevCertificate } from '../support/dev-certificate.js';
import { startEdge, type TestEdge } from '../support/edge.js';
import { ENGINES } from './engines.js';

const uwsLoads = ENGINES.find((e) => e.name === 'uws')!.unavailable === undefined;

const options: EngineOptions = {
  host: '127.0.0.1',
  port: 0,
  maxMessageBytes: 1024 * 1024,
  pingIntervalMs: 0,
  upgrade: () => ({ accept: false, status: 404, body: 'none\n' }),
};

let server: AgentServer | undefined;
let edge: TestEdge | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
  await edge?.close();
  edge = undefined;
});

describe('engine selection', () => {
  it(`auto runs ${uwsLoads ? 'uws (it loads here)' : 'ws (uWebSockets.js does not load here)'}`, async () => {
    server = await listenAgents('auto', options);
    expect(server.engine).toBe(uwsLoads ? 'uws' : 'ws');
  });

  it('ws runs ws', async () => {
    server = await listenAgents('ws', options);
    expect(server.engine).toBe('ws');
  });

  it(`uws ${uwsLoads ? 'runs uws' : 'is an error naming the cause'}`, async () => {
    if (uwsLoads) {
      server = await listenAgents('uws', options);
      expect(server.engine).toBe('uws');
    } else {
      await expect(listenAgents('uws', options)).rejects.toThrow(
        /engine "uws" was requested but uWebSockets\.js/,
      );
    }
  });

  it(`auto reports a port in use ${uwsLoads ? 'from uws (no second attempt on ws)' : 'from ws'}, with its system reason`, async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as AddressInfo).port;
    try {
      await expect(listenAgents('auto', { ...options, port })).rejects.toMatchObject({
        code: 'EADDRINUSE',
        port,
      });
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  });

  it.skipIf(!uwsLoads)(
    'auto reports a TLS pair uws cannot load instead of silently serving on ws',
    async () => {
      const { cert, key } = createDevCertificate();
      const tls = { cert_file: '/nonexistent/cert.pem', key_file: '/nonexistent/key.pem', cert, key };
      // ws would serve (it takes the PEM text read at start); uws reads the files, now gone.
      await expect(listenAgents('auto', { ...options, tls })).rejects.toThrow(
        /uWebSockets\.js cannot load the TLS certificate or private key \(\/nonexistent\/cert\.pem/,
      );
      server = await listenAgents('ws', { ...options, tls });
      expect(server.engine).toBe('ws');
    },
  );

  it('the edge under test runs the engine AWP_EDGE_ENGINE names', async () => {
    edge = await startEdge([{ path: '/', upstream: 'ws://127.0.0.1:9/' }]);
    const named = process.env.AWP_EDGE_ENGINE ?? 'ws';
    expect(edge.edge.engine).toBe(named === 'auto' ? (uwsLoads ? 'uws' : 'ws') : named);
  });
});
