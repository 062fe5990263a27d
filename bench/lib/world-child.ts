/**
 * The demo arm world in its own process. argv[2]: JSON DemoServerOptions. Its hello carries the URL and
 * `origin`: process.hrtime.bigint() read right before startDemoWorld, which reads its session-clock
 * origin synchronously on entry. hrtime is CLOCK_MONOTONIC, shared by every process on the machine, so
 * a receiver computes delivery latency as (its hrtime - origin) - ts_send_ns. A first, throwaway world
 * is started and closed before, so that V8 has compiled startDemoWorld: otherwise compiling it on the
 * first call puts ~0.2 ms between `origin` and the world's own. The runner checks the remaining gap
 * with ping exchanges (clock.ts).
 */
import { startDemoWorld, type DemoServerOptions } from '../../src/demo/index.js';
import { memoryAfterGc, serve } from './ipc.js';

const options = JSON.parse(process.argv[2] ?? '{}') as Partial<DemoServerOptions>;
const first = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0 });
await first.close();
const origin = process.hrtime.bigint();
const world = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0, ...options });

serve(
  {
    memory: memoryAfterGc,
    sessions: () => ({
      sessions: world.world.sessions.size,
      connections: world.world.conns.size,
      /** Observer sessions (no embodiment) not closed: what the world serves observers with. */
      observers: [...world.world.sessions.values()].filter(
        (s) => s.embodiment === null && s.state !== 'closed',
      ).length,
    }),
    close: async () => {
      await world.close();
      return {};
    },
  },
  { url: world.url, port: world.port, origin: origin.toString() },
);
