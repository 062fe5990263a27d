/** What a relay connection's effects say for metrics and logs (no I/O on the agent's or world's sockets). */
import { isAwpMethod } from '../protocol/methods.js';
import type { RelayEffect } from '../relay/relay-effects.js';
import type { EdgeContext } from './context.js';

type TelemetryEffect = Extract<RelayEffect, { kind: 'rpc-done' | 'rejected' | 'resumed' | 'dropped' }>;

export function recordRelayEffect(ctx: EdgeContext, route: string, e: TelemetryEffect): void {
  const m = ctx.metrics;
  switch (e.kind) {
    case 'rpc-done':
      m.controlRtt
        .labels(route, isAwpMethod(e.method) ? e.method : 'other', e.outcome)
        .observe((ctx.now() - e.sent_at) / 1000);
      if (e.method === 'session.resume' && e.outcome === 'error')
        m.resumes.labels(route, 'relay', 'refused_upstream').inc();
      return;
    case 'rejected':
      m.rejections.labels(route, e.reason).inc();
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
