// A plain TCP forwarder on 127.0.0.1 in front of the world: the simplest through-something target.
// It proves the harness end to end (the same suite via an extra hop, compared per requirement) and
// shows what the bypass check catches: the world's `stream_endpoints` still name the world itself,
// so stream connections go around the forwarder. Opt-in (INTEROP_PASSTHROUGH=1); not the edge.
import { createServer, connect } from 'node:net';
import type { Socket } from 'node:net';
import type { Target, TargetFactory } from './targets.js';
import type { World } from './world.js';

export const tcpPassthrough: TargetFactory = {
  name: 'tcp-passthrough',
  open: async (world: World): Promise<Target> => {
    const upstream = new URL(world.url);
    const sockets = new Set<Socket>();
    const server = createServer((client) => {
      const up = connect(Number(upstream.port), upstream.hostname);
      client.setNoDelay(true);
      up.setNoDelay(true);
      sockets.add(client).add(up);
      const drop = (): void => {
        client.destroy();
        up.destroy();
        sockets.delete(client);
        sockets.delete(up);
      };
      client.on('error', drop).on('close', drop);
      up.on('error', drop).on('close', drop);
      client.pipe(up);
      up.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no TCP address');
    let closed: Promise<void> | undefined;
    return {
      name: 'tcp-passthrough',
      url: `ws://127.0.0.1:${address.port}`,
      token: world.token,
      close: () =>
        (closed ??= new Promise<void>((resolve) => {
          for (const s of sockets) s.destroy();
          server.close(() => resolve());
        })),
    };
  },
};
