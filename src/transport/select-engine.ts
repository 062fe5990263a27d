import type { AgentServer, EngineOptions } from './engine.js';
import { uwsAvailability } from './uws-load.js';
import { listenWs } from './ws-engine.js';

/**
 * Starts the agent-facing server: uWebSockets.js where its binary loads (the production engine),
 * `ws` on `node:http` otherwise. `engine: 'uws'` makes a missing binary an error instead. Only a binary
 * that does not load falls back: once uWebSockets.js runs, its failure to listen (a port in use) is the
 * answer, never hidden behind a second attempt on `ws`.
 */
export async function listenAgents(engine: 'auto' | 'uws' | 'ws', opts: EngineOptions): Promise<AgentServer> {
  if (engine !== 'ws') {
    const uws = uwsAvailability();
    if (uws.ok) {
      const { listenUws } = await import('./uws-engine.js');
      return listenUws(opts);
    }
    if (engine === 'uws') {
      throw new Error(`engine "uws" was requested but uWebSockets.js cannot run here: ${uws.reason}`);
    }
  }
  return listenWs(opts);
}
