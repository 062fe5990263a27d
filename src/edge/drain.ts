/** What the edge does with what it holds, outside its start and upgrade paths: the drain, the scrape-time gauges. */
import type { EdgeContext } from './context.js';
import type { RouteRuntime } from './route.js';

/**
 * Agents are closed with 1001 spread over the drain window with full jitter, so they reconnect and resume
 * at other replicas without a storm; each close mirrors the agent's drop upstream. Without a shared store
 * the sessions could not resume elsewhere, so the drain waits for them to end, up to the window, then
 * reports how many it had to cut (the caller closes the edge).
 */
export async function drainConnections(
  ctx: EdgeContext,
  window: number,
): Promise<{ closed: number; cut: number }> {
  const shared = ctx.registry.store.kind !== 'memory';
  const conns = [...ctx.connections];
  ctx.log.info(
    { event: 'drain_started', connections: conns.length, window_ms: window, shared_store: shared },
    'draining',
  );
  let cut = 0;
  if (shared) {
    await Promise.all(
      conns.map(
        (c) =>
          new Promise<void>((resolve) => {
            setTimeout(() => {
              const moved = c.moveOut();
              if (moved === undefined) {
                c.terminate(1001, 'edge draining: reconnect and resume');
                resolve();
              } else void moved.then(resolve, resolve);
            }, Math.random() * window);
          }),
      ),
    );
  } else {
    const end = performance.now() + window;
    while (ctx.connections.size > 0 && performance.now() < end) await new Promise((r) => setTimeout(r, 100));
    cut = ctx.connections.size;
    if (cut > 0) {
      ctx.log.warn(
        { event: 'drain_cut', connections: cut },
        'drain window over: closing agents whose sessions cannot resume elsewhere',
      );
    }
  }
  return { closed: conns.length, cut };
}

/**
 * The route label of a relay session whose record names a route this edge does not have: the record
 * comes from the session store, so its route is input, not a label value (no such route name is valid).
 */
const UNKNOWN_ROUTE = '(unknown)';

/** Session and journal gauges, read at scrape time from what the edge holds. */
export function sampleGauges(ctx: EdgeContext, routes: readonly RouteRuntime[]): void {
  const m = ctx.metrics;
  m.sessions.reset();
  m.journalEntries.reset();
  m.topicMembers.reset();
  for (const r of routes) {
    m.journalEntries.labels(r.name).set(0);
    m.sessions.labels(r.name, 'relay', 'attached').set(0);
    m.sessions.labels(r.name, 'relay', 'suspended').set(0);
  }
  const names = new Set(routes.map((r) => r.name));
  for (const s of ctx.registry.sessions()) {
    // Held here all the same (memory, a journal): counted, under a fixed label.
    const route = names.has(s.record.route) ? s.record.route : UNKNOWN_ROUTE;
    m.sessions.labels(route, 'relay', s.attachment !== null ? 'attached' : 'suspended').inc();
    m.journalEntries.labels(route).inc(s.journal.size);
  }
  for (const r of routes) {
    for (const hub of r.allHubs()) {
      for (const o of hub.sessions()) {
        m.sessions.labels(r.name, 'observer', o.attached ? 'attached' : 'suspended').inc();
        m.journalEntries.labels(r.name).inc(o.journal.size);
      }
      for (const [channel, n] of hub.topicMembers()) m.topicMembers.labels(r.name, channel).inc(n);
    }
  }
}
