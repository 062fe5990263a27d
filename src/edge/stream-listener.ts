/**
 * The stream listener (`stream_listen`, issue 15): observers' stream connections on a listener of their
 * own, served by uWebSockets.js on a worker thread (transport/stream-worker.ts), so the engine's fan-out
 * writes leave the main thread's event loop to control messages, relay traffic and heartbeats. Upgrades are
 * decided as on the agent listener; the observers' `ws` endpoints name this listener (`stream_public_url`,
 * or the agent listener's public host with this port); the edge's sliced work follows the worker's backlog
 * (slice-loop.ts).
 */
import type { ListenAddress } from '../config/schema.js';
import type { AgentServer, EngineOptions, UpgradeOutcome, UpgradeRequest } from '../transport/engine.js';
import type { HandshakeCloseReason } from '../transport/handshake-guard.js';
import type { SliceLoop } from '../transport/slice-loop.js';
import { listenStreamWorker } from '../transport/stream-worker.js';
import type { RouteRuntime } from './route.js';
import type { Refusal, UpgradeDecision } from './upgrade-decision.js';

export async function openStreamListener(
  agentListener: EngineOptions,
  address: ListenAddress,
  publicUrl: string | undefined,
  nice: number,
  routes: readonly RouteRuntime[],
  slices: SliceLoop,
  hooks: {
    readonly upgrade: (req: UpgradeRequest) => UpgradeOutcome;
    readonly handshakeClosed: (reason: HandshakeCloseReason) => void;
  },
): Promise<AgentServer> {
  const server = await listenStreamWorker({
    ...agentListener,
    host: address.host,
    port: address.port,
    upgrade: hooks.upgrade,
    onHandshakeClosed: hooks.handshakeClosed,
    plain: undefined, // the viewer is the agent listener's
    nice,
  });
  for (const r of routes) r.enableStreamListener(server.port, publicUrl);
  if (server.backlog !== undefined) slices.follow(server.backlog);
  return server;
}

/** On the stream listener, an accepted upgrade that is not an observer's stream connection is refused. */
export function onStreamListener(decision: UpgradeDecision): UpgradeDecision {
  if (!decision.accept || decision.target.kind === 'observer-stream') return decision;
  if (decision.target.kind === 'control') decision.target.budget.closeConnection(); // the slot it took
  return streamListenerOnly(decision.target.route.name);
}

function streamListenerOnly(route: string): Refusal {
  const body = "this listener serves observers' stream connections only: connect to the agent listener\n";
  return { accept: false, status: 404, body, reason: 'no_route', route };
}
