/** What a relay connection's effects say for metrics and logs (no I/O on the agent's or world's sockets). */
import { isAwpMethod } from '../protocol/methods.js';
import type { RelayEffect } from '../relay/relay-effects.js';
import type { EdgeContext } from './context.js';
import type { EdgeMetrics } from '../telemetry/metrics.js';

type RttChild = ReturnType<EdgeMetrics['controlRtt']['labels']>;

/**
 * The control-RTT histogram's children, by metrics, route, method label and outcome: prom-client's
 * `labels()` builds and validates a label object and two closures on every call, and this runs once
 * per relayed response.
 */
const rttChildren = new WeakMap<EdgeMetrics, Map<string, Map<string, RttChild>>>();

function rttChild(m: EdgeMetrics, route: string, method: string, outcome: 'ok' | 'error'): RttChild {
  let byRoute = rttChildren.get(m);
  if (byRoute === undefined) rttChildren.set(m, (byRoute = new Map<string, Map<string, RttChild>>()));
  let byMethod = byRoute.get(route);
  if (byMethod === undefined) byRoute.set(route, (byMethod = new Map<string, RttChild>()));
  const label = isAwpMethod(method) ? method : 'other';
  const k = outcome === 'ok' ? label : `${label}\u0000error`;
  let child = byMethod.get(k);
  if (child === undefined) byMethod.set(k, (child = m.controlRtt.labels(route, label, outcome)));
  return child;
}

export type TelemetryEffect = Extract<
  RelayEffect,
  { kind: 'rpc-done' | 'rejected' | 'resumed' | 'resume-unknown' | 'dropped' }
>;

export function recordRelayEffect(ctx: EdgeContext, route: string, e: TelemetryEffect): void {
  const m = ctx.metrics;
  switch (e.kind) {
    case 'rpc-done':
      rttChild(m, route, e.method, e.outcome).observe((ctx.now() - e.sent_at) / 1000);
      if (e.method === 'session.resume' && e.outcome === 'error')
        m.resumes.labels(route, 'relay', 'refused_upstream').inc();
      return;
    case 'rejected':
      m.rejections.labels(route, e.reason).inc();
      return;
    case 'resume-unknown':
      m.resumes.labels(route, 'relay', 'unknown_token').inc();
      return;
    case 'resumed':
      m.resumes.labels(route, 'relay', 'resumed').inc();
      m.replayLength.labels(route, 'relay').observe(e.replayed);
      return;
    case 'dropped':
      m.messagesDropped.labels(route, e.from, e.reason).inc();
      ctx.log.debug({ route, event: 'dropped', from: e.from, reason: e.reason, detail: e.detail });
      return;
  }
}
