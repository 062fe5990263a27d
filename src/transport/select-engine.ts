import type { AgentServer, EngineOptions } from './engine.js';
import { listenWs } from './ws-engine.js';

/**
 * Starts the agent-facing server: uWebSockets.js where its binary loads (the production engine),
 * `ws` on `node:http` otherwise. `engine: 'uws'` makes a missing binary an error instead.
 */
export async function listenAgents(engine: 'auto' | 'uws' | 'ws', opts: EngineOptions): Promise<AgentServer> {
  if (engine !== 'ws') {
    try {
      const { listenUws } = await import('./uws-engine.js');
      return await listenUws(opts);
    } catch (err) {
      if (engine === 'uws') {
        throw new Error(
          `engine "uws" was requested but uWebSockets.js cannot run here: ${(err as Error).message}`,
          {
            cause: err,
          },
        );
      }
    }
  }
  return listenWs(opts);
}
