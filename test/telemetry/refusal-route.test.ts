/**
 * awp_edge_rejections_total{route}: refusals decided before routing (URL, subprotocol, draining, Host)
 * carry the route their path names, only ever a configured route's name; a path no route serves stays
 * `none`.
 */
import { describe, expect, it } from 'vitest';
import type { RouteConfig } from '../../src/config/schema.js';
import { RouteRuntime } from '../../src/edge/route.js';
import { decideUpgrade, type DecisionState, type UpgradeFacts } from '../../src/edge/upgrade-decision.js';
import { CredentialBudgets } from '../../src/policy/budgets.js';
import { TokenMint } from '../../src/session/tokens.js';

const AGENT = 'agtok-7Hq2Lm';
const mint = new TokenMint();

function route(name: string, path: string): RouteRuntime {
  const config: RouteConfig = {
    name,
    path,
    upstream: 'ws://world.internal/control',
    agent_tokens: [AGENT],
    allow_anonymous: false,
    observers: 'relay',
    hub_linger_ms: 1000,
    approver_tokens: [],
    allowed_origins: [],
  };
  return new RouteRuntime(config, mint);
}

function state(draining = false): DecisionState {
  return {
    routes: [route('arm', '/arm'), route('grid', '/grid/')],
    draining,
    publicUrl: undefined,
    scheme: 'ws',
    fallbackAuthority: '127.0.0.1:8720',
    budgets: new CredentialBudgets(
      {
        max_connections: 10,
        max_sessions: 10,
        max_messages_per_second: 100,
        max_bytes_per_second: 1e6,
        max_message_bytes: 1e6,
      },
      () => 0,
      () => undefined,
    ),
    isCredential: (v) => v === AGENT,
    attachedSession: () => undefined,
  };
}

function facts(path: string, over: Partial<UpgradeFacts> & { host?: string } = {}): UpgradeFacts {
  const headers: Record<string, string> = {
    host: over.host ?? 'edge.example:8720',
    authorization: `Bearer ${AGENT}`,
  };
  return {
    binding: 'ws',
    path,
    query: over.query ?? '',
    protocols: over.protocols ?? ['awp'],
    header: (name) => headers[name],
  };
}

function refusal(f: UpgradeFacts, s = state()): { reason: string; route: string } {
  const d = decideUpgrade(f, s);
  if (d.accept) throw new Error(`accepted ${f.path}`);
  return { reason: d.reason, route: d.route };
}

describe('refusals before routing name the route their path is meant for', () => {
  it('URL, subprotocol, draining and Host refusals on a route path carry its name', () => {
    expect(refusal(facts('/arm', { query: 'x=1' }))).toEqual({ reason: 'query_not_allowed', route: 'arm' });
    expect(refusal(facts('/arm', { query: `token=${AGENT}` }))).toEqual({
      reason: 'credential_in_url',
      route: 'arm',
    });
    expect(refusal(facts('/grid/', { protocols: [] }))).toEqual({ reason: 'no_subprotocol', route: 'grid' });
    expect(refusal(facts('/grid/', {}), state(true))).toEqual({ reason: 'draining', route: 'grid' });
    expect(refusal(facts('/arm', { host: 'not a host' }))).toEqual({ reason: 'bad_host', route: 'arm' });
  });

  it("a route's stream endpoint paths count for the route", () => {
    const arm = state().routes[0]!;
    expect(refusal(facts(arm.streamPath, { protocols: [] }))).toEqual({
      reason: 'no_subprotocol',
      route: 'arm',
    });
    expect(refusal(facts(`${arm.streamPath}/2`, { query: 'a=b' }))).toEqual({
      reason: 'query_not_allowed',
      route: 'arm',
    });
  });

  it('paths no route serves, and paths with a credential in a segment, are never labelled by the request', () => {
    expect(refusal(facts('/nope', { protocols: [] }))).toEqual({ reason: 'no_subprotocol', route: 'none' });
    expect(refusal(facts(`/arm/${AGENT}`))).toEqual({ reason: 'credential_in_url', route: 'none' });
    expect(refusal(facts('/nope'))).toEqual({ reason: 'no_route', route: 'none' });
  });
});
