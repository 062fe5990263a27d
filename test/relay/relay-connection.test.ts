/** The relay state machine, driven deterministically without sockets. */
import { describe, expect, it } from 'vitest';
import { MAX_ID_CHARS } from '../../src/protocol/jsonrpc.js';
import { MAX_CACHED_PARAMS_CHARS } from '../../src/relay/initialize-cache.js';
import { MAX_AGENT_REQUESTS } from '../../src/relay/pending-requests.js';
import { RelayConnection } from '../../src/relay/relay-connection.js';
import type { RelayEffect, RelayRoute } from '../../src/relay/relay-effects.js';
import type { RelaySession } from '../../src/relay/relay-session.js';
import { TokenMint } from '../../src/session/tokens.js';

const MANIFEST = {
  protocol_version: '0.1',
  world: { name: 'w', version: '1', vendor: 'v' },
  time_models: ['streaming'],
  embodiments: [
    { id: 'arm_01', kind: 'manipulator', action_types: ['move'], channels: ['proprio', 'state'] },
  ],
  observation_channels: [
    { id: 'proprio', modality: 'proprio/json', rate_hz: 100, loss_class: 'latest-wins', schema: {} },
    { id: 'state', modality: 'text/event+json', rate_hz: 10, loss_class: 'reliable', schema: {} },
  ],
  action_schemas: [],
  safety_policy: { envelopes: [] },
};

const READY = {
  session_id: 'sess_1',
  session_token: 'world-token-1',
  reconnect_window_ms: 30000,
  heartbeat_interval_ms: 5000,
  granted: {
    channels: [
      { channel: 'proprio', rate_hz: 100, channel_id: 1 },
      { channel: 'state', rate_hz: 10, channel_id: 2 },
    ],
    action_types: ['move'],
    envelopes: [],
  },
  stream_endpoints: [{ binding: 'ws', url: 'ws://world/stream' }, { binding: 'inline' }],
};

const req = (id: number | string, method: string, params?: unknown) =>
  JSON.stringify({ jsonrpc: '2.0', id, method, ...(params !== undefined ? { params } : {}) });
const res = (id: number | string, result: unknown) => JSON.stringify({ jsonrpc: '2.0', id, result });
const note = (method: string, params: unknown) => JSON.stringify({ jsonrpc: '2.0', method, params });
const status = (seq: number, state = 'executing') =>
  note('action.status', { action_id: 'a-1', state, status_seq: seq, ts_mono_ns: 1000 + seq });

function route(): RelayRoute & { manifests: Map<string, string> } {
  const mint = new TokenMint();
  const manifests = new Map<string, string>();
  return {
    name: 'r',
    manifests,
    manifestFor: (k) => manifests.get(k),
    rememberManifest: (k, j) => manifests.set(k, j),
    edgeEndpoints: (w) => [
      ...w.filter((e) => e.binding === 'ws').map((e) => ({ ...e, url: 'ws://edge/stream' })),
      { binding: 'inline' },
    ],
    mintToken: () => mint.mint(),
    ownsToken: (t) => mint.owns(t),
    fanOutObservers: false,
    forgetManifests: () => undefined,
    admitSession: () => undefined,
    approver: false,
  };
}

const sent = (effects: RelayEffect[], kind: 'to-agent' | 'to-upstream') =>
  effects
    .filter((e) => e.kind === kind)
    .map((e) => JSON.parse((e as { text: string }).text) as Record<string, unknown>);

/** Opens a session through a fresh connection; returns the connection, its session and the edge token. */
function openSession(r = route()) {
  const c = new RelayConnection(r);
  let fx = c.fromAgent(req(1, 'initialize', { protocol_versions: ['0.1'] }), 0);
  expect(fx.map((e) => e.kind)).toEqual(['dial-upstream']);
  fx = c.upstreamOpened();
  expect(sent(fx, 'to-upstream')[0]).toMatchObject({ id: 1, method: 'initialize' });
  fx = c.fromUpstream(res(1, MANIFEST), 1);
  expect(sent(fx, 'to-agent')[0]).toMatchObject({ id: 1, result: MANIFEST });
  fx = c.fromAgent(req(2, 'session.open', { embodiment: 'arm_01', mode: 'streaming' }), 2);
  expect(sent(fx, 'to-upstream')[0]).toMatchObject({ id: 2, method: 'session.open' });
  fx = c.fromUpstream(res(2, READY), 3);
  const created = fx.find((e) => e.kind === 'session-created') as { session: RelaySession };
  const ready = sent(fx, 'to-agent')[0]!.result as Record<string, unknown>;
  return { c, r, session: created.session, token: ready.session_token as string, ready };
}

describe('RelayConnection', () => {
  it('AWP-SEC-003 mints an unguessable edge token and never shows the world token to the agent', () => {
    const { token, ready, session } = openSession();
    expect(token).toMatch(/^[A-Za-z0-9_-]{51}$/);
    expect(token).not.toBe('world-token-1');
    expect(JSON.stringify(ready)).not.toContain('world-token-1');
    expect(session.record.upstream_token).toBe('world-token-1');
    expect(ready.stream_endpoints).toEqual([
      { binding: 'ws', url: 'ws://edge/stream' },
      { binding: 'inline' },
    ]);
  });

  it('relays messages it does not rewrite as the exact text they arrived in', () => {
    const { c } = openSession();
    const odd = '{"jsonrpc":"2.0","method":"x-vendor.hello","params":{"n":1,"x-v.k":[1,2]}}';
    expect(c.fromUpstream(odd, 4)).toEqual([{ kind: 'to-agent', text: odd }]);
    const unknown = '{"jsonrpc":"2.0","id":9,"method":"x-vendor.probe","params":{}}';
    expect(c.fromAgent(unknown, 5)).toEqual([{ kind: 'to-upstream', text: unknown }]);
  });

  it('AWP-CTL-008 journals status notifications and result-reported transitions', () => {
    const { c, session } = openSession();
    c.fromAgent(req(3, 'action.submit', { action_id: 'a-1', type: 'move', params: {} }), 4);
    c.fromUpstream(
      res(3, { action_id: 'a-1', state: 'accepted', status_seq: 1, received_ts_mono_ns: 1, ts_mono_ns: 2 }),
      5,
    );
    c.fromUpstream(status(2), 6);
    expect(session.journal.held().map((e) => [e.status_seq, e.text === null])).toEqual([
      [1, true],
      [2, false],
    ]);
  });

  it('AWP-ACT-001 an idempotent resubmission result consumes no journal entry', () => {
    const { c, session } = openSession();
    c.fromAgent(req(3, 'action.submit', { action_id: 'a-1', type: 'move', params: {} }), 4);
    c.fromUpstream(
      res(3, { action_id: 'a-1', state: 'accepted', status_seq: 1, received_ts_mono_ns: 1, ts_mono_ns: 2 }),
      5,
    );
    c.fromAgent(req(4, 'action.submit', { action_id: 'a-1', type: 'move', params: {} }), 6);
    const fx = c.fromUpstream(
      res(4, { action_id: 'a-1', state: 'accepted', status_seq: 1, received_ts_mono_ns: 1, ts_mono_ns: 2 }),
      7,
    );
    expect(fx.some((e) => e.kind === 'journal-append')).toBe(false);
    expect(session.journal.size).toBe(1);
  });

  it('holds at most MAX_AGENT_REQUESTS of the agent requests for a world that does not answer; past that answers -32004', () => {
    const { c } = openSession();
    for (let i = 0; i < MAX_AGENT_REQUESTS; i++)
      expect(sent(c.fromAgent(req(`p${i}`, 'ping', { origin_ns: 1 }), 10), 'to-upstream')).toHaveLength(1);
    const fx = c.fromAgent(req('one-more', 'ping', { origin_ns: 1 }), 11);
    expect(sent(fx, 'to-upstream')).toEqual([]);
    expect(sent(fx, 'to-agent')).toEqual([
      {
        jsonrpc: '2.0',
        id: 'one-more',
        error: {
          code: -32004,
          message: 'AWP_EDGE_BUDGET_EXCEEDED',
          data: {
            retryable: true,
            detail: `${MAX_AGENT_REQUESTS} requests are already waiting for the world on this connection`,
          },
        },
      },
    ]);
    // An answer frees a place.
    c.fromUpstream(res('p0', { origin_ns: 1, receive_ns: 2, transmit_ns: 2 }), 12);
    expect(sent(c.fromAgent(req('one-more', 'ping', { origin_ns: 1 }), 13), 'to-upstream')).toHaveLength(1);
  });

  it('a request id over MAX_ID_CHARS is refused (-32600, nothing forwarded); a world request with one never reaches the agent', () => {
    const { c } = openSession();
    const long = 'x'.repeat(MAX_ID_CHARS + 1);
    const fx = c.fromAgent(req(long, 'ping', { origin_ns: 1 }), 10);
    expect(sent(fx, 'to-upstream')).toEqual([]);
    expect(sent(fx, 'to-agent')).toMatchObject([{ id: null, error: { code: -32600 } }]);
    const world = c.fromUpstream(req(long, 'ping', { origin_ns: 1 }), 11);
    expect(sent(world, 'to-agent')).toEqual([]);
    expect(world).toMatchObject([{ kind: 'dropped', from: 'world', reason: 'invalid' }]);
  });

  it('initialize params over MAX_CACHED_PARAMS_CHARS are relayed, and the answer is not cached under them', () => {
    const r = route();
    const c = new RelayConnection(r);
    const params = { protocol_versions: ['0.1'], agent: { name: 'n'.repeat(MAX_CACHED_PARAMS_CHARS) } };
    c.fromAgent(req(1, 'initialize', params), 0);
    expect(sent(c.upstreamOpened(), 'to-upstream')).toMatchObject([{ id: 1, method: 'initialize' }]);
    expect(sent(c.fromUpstream(res(1, MANIFEST), 1), 'to-agent')).toMatchObject([
      { id: 1, result: MANIFEST },
    ]);
    expect(r.manifests.size).toBe(0);
    openSession(r); // small params: cached as before
    expect([...r.manifests.keys()]).toEqual([JSON.stringify({ protocol_versions: ['0.1'] })]);
  });

  it('AWP-SES-003 mirrors the agent drop upstream at once and suspends the session', () => {
    const { c, session } = openSession();
    const fx = c.agentClosed();
    expect(fx.map((e) => e.kind)).toEqual(['close-upstream', 'session-detached']);
    expect(session.attachment).toBeNull();
  });

  it('AWP-CTL-008 resumes upstream after what it holds and replays the rest itself, in order', () => {
    const { c, session, token, r } = openSession();
    for (let s = 1; s <= 4; s++) c.fromUpstream(status(s), 10 + s);
    session.journal.markDurable(4);
    c.agentClosed();

    const c2 = new RelayConnection(r);
    // initialize answered from the cache: the world sees nothing until the resume.
    let fx = c2.fromAgent(req(20, 'initialize', { protocol_versions: ['0.1'] }), 30);
    expect(fx).toHaveLength(1);
    expect(sent(fx, 'to-agent')[0]).toMatchObject({ id: 20, result: MANIFEST });
    fx = c2.fromAgent(req(21, 'session.resume', { session_token: token, last_status_seq: 2 }), 31);
    expect(fx).toEqual([{ kind: 'lookup-session', token, id: 21, last_status_seq: 2 }]);
    fx = c2.sessionLookedUp(session, 32);
    expect(fx.map((e) => e.kind)).toEqual(['session-attached', 'journal-ack', 'dial-upstream']);
    fx = c2.upstreamOpened();
    // The agent's own initialize goes first, unchanged; its result is checked, not relayed.
    expect(sent(fx, 'to-upstream')).toEqual([
      { jsonrpc: '2.0', id: 20, method: 'initialize', params: { protocol_versions: ['0.1'] } },
    ]);
    fx = c2.fromUpstream(res(20, MANIFEST), 33);
    expect(sent(fx, 'to-agent')).toEqual([]);
    expect(sent(fx, 'to-upstream')[0]).toEqual({
      jsonrpc: '2.0',
      id: 21,
      method: 'session.resume',
      params: { session_token: 'world-token-1', last_status_seq: 4 },
    });
    fx = c2.fromUpstream(res(21, { ...READY, replay_to_status_seq: 5, safe_state: false }), 34);
    const toAgent = sent(fx, 'to-agent');
    expect(toAgent[0]).toMatchObject({ id: 21, result: { session_token: token, replay_to_status_seq: 5 } });
    expect(toAgent.slice(1).map((m) => (m.params as { status_seq: number }).status_seq)).toEqual([3, 4]);
    // The world's replay continues above what the edge holds; live traffic follows.
    expect(sent(c2.fromUpstream(status(5), 35), 'to-agent')).toHaveLength(1);
    // A redelivery of something already replayed is not forwarded twice (AWP-LIF-009).
    expect(sent(c2.fromUpstream(status(4), 36), 'to-agent')).toHaveLength(0);
  });

  it('AWP-CTL-008 leaves a result-reported transition the agent missed to the world to replay', () => {
    const { c, session, token, r } = openSession();
    c.fromUpstream(status(1), 4);
    c.fromAgent(req(3, 'action.submit', { action_id: 'a-2', type: 'move', params: {} }), 5);
    c.fromUpstream(
      res(3, { action_id: 'a-2', state: 'queued', status_seq: 2, received_ts_mono_ns: 1, ts_mono_ns: 2 }),
      6,
    );
    c.fromUpstream(status(3), 7);
    session.journal.markDurable(3);
    c.agentClosed();
    const c2 = new RelayConnection(r);
    c2.fromAgent(req(21, 'session.resume', { session_token: token, last_status_seq: 1 }), 8);
    c2.sessionLookedUp(session, 9);
    const fx = c2.upstreamOpened();
    expect(sent(fx, 'to-upstream')[0]).toMatchObject({ params: { last_status_seq: 1 } });
  });

  it('AWP-SES-008 answers AWP_SESSION_UNKNOWN for a token of another epoch and AWP_SESSION_EXPIRED for its own', () => {
    const r = route();
    const c = new RelayConnection(r);
    // Another epoch's token is unknown at once: the store is not asked (no lookup-session).
    const fx = c.fromAgent(
      req(1, 'session.resume', { session_token: new TokenMint().mint(), last_status_seq: 0 }),
      0,
    );
    expect(fx.some((e) => e.kind === 'lookup-session')).toBe(false);
    expect(sent(fx, 'to-agent')[0]).toMatchObject({ id: 1, error: { code: 2005 } });
    for (const token of ['x'.repeat(1 << 20), `${r.mintToken()}}`, `{${r.mintToken().slice(1)}`]) {
      const other = new RelayConnection(r);
      const refused = other.fromAgent(
        req(2, 'session.resume', { session_token: token, last_status_seq: 0 }),
        0,
      );
      expect(refused.some((e) => e.kind === 'lookup-session')).toBe(false);
      expect(sent(refused, 'to-agent')[0]).toMatchObject({ id: 2, error: { code: 2005 } });
    }
    const c2 = new RelayConnection(r);
    c2.fromAgent(req(1, 'session.resume', { session_token: r.mintToken(), last_status_seq: 0 }), 0);
    expect(sent(c2.sessionLookedUp(null, 1), 'to-agent')[0]).toMatchObject({
      id: 1,
      error: { code: 2003, data: { retryable: false } },
    });
  });

  it('AWP-CTL-010 carries the edge acknowledgement in the agent own ping, never in a message of its own', () => {
    const { c, session } = openSession();
    for (let s = 1; s <= 3; s++) c.fromUpstream(status(s), s);
    session.journal.markDurable(3);
    const fx = c.fromAgent(req(7, 'ping', { origin_ns: 5, last_status_seq: 1 }), 10);
    expect(sent(fx, 'to-upstream')).toEqual([
      { jsonrpc: '2.0', id: 7, method: 'ping', params: { origin_ns: 5, last_status_seq: 3 } },
    ]);
    const plain = req(8, 'ping', { origin_ns: 6 });
    expect(c.fromAgent(plain, 11)).toEqual([{ kind: 'to-upstream', text: plain }]);
  });

  it('AWP-CTL-007 answers a second session.open on one connection with AWP_SESSION_EXISTS', () => {
    const { c } = openSession();
    const fx = c.fromAgent(req(9, 'session.open', { embodiment: 'arm_01', mode: 'streaming' }), 5);
    expect(sent(fx, 'to-upstream')).toEqual([]);
    expect(sent(fx, 'to-agent')[0]).toMatchObject({
      id: 9,
      error: { code: 2004, message: 'AWP_SESSION_EXISTS' },
    });
  });

  it('AWP-CTL-009 ends the session on an out-of-range integer from the agent', () => {
    const { c } = openSession();
    const fx = c.fromAgent(
      '{"jsonrpc":"2.0","id":5,"method":"ping","params":{"origin_ns":9007199254740993}}',
      5,
    );
    expect(sent(fx, 'to-agent')[0]).toMatchObject({
      id: 5,
      error: { code: 2006, message: 'AWP_INTEGER_RANGE' },
    });
    expect(fx.filter((e) => e.kind === 'close-agent')).toEqual([
      { kind: 'close-agent', code: 1002, reason: 'AWP_INTEGER_RANGE' },
    ]);
    expect(fx.map((e) => e.kind)).toContain('session-ended');
  });

  it('AWP-CTL-006 answers a batch with -32600 and invalid JSON with -32700, and keeps serving', () => {
    const { c } = openSession();
    expect(sent(c.fromAgent('[{"jsonrpc":"2.0","id":1,"method":"ping"}]', 1), 'to-agent')[0]).toMatchObject({
      id: null,
      error: { code: -32600 },
    });
    expect(sent(c.fromAgent('{not json', 2), 'to-agent')[0]).toMatchObject({
      id: null,
      error: { code: -32700 },
    });
    expect(c.isClosed).toBe(false);
  });

  it('AWP-APR-007 never forwards approval requests to agents', () => {
    const { c } = openSession();
    const fx = c.fromUpstream(note('safety.approval_requested', { approval_id: 'ap1', action_id: 'a' }), 5);
    expect(sent(fx, 'to-agent')).toEqual([]);
  });

  it('AWP-TRN-009 marks inline frames of streaming latest-wins channels replaceable, reliable ones not', () => {
    const { c } = openSession();
    const f1 = note('obs.frame', {
      channel_id: 1,
      seq: 1,
      ts_mono_ns: 1,
      ts_send_ns: 2,
      flags: 1,
      payload_b64: '',
    });
    const f2 = note('obs.frame', {
      channel_id: 2,
      seq: 1,
      ts_mono_ns: 1,
      ts_send_ns: 2,
      flags: 1,
      payload_b64: '',
    });
    expect(c.fromUpstream(f1, 5)).toEqual([
      {
        kind: 'to-agent',
        text: f1,
        frame: {
          channel_id: 1,
          latest_wins: true,
          channel: 'proprio',
          ts_mono_ns: 1,
          ts_send_ns: 2,
          rate_hz: 100,
        },
      },
    ]);
    expect(c.fromUpstream(f2, 6)).toEqual([
      {
        kind: 'to-agent',
        text: f2,
        frame: {
          channel_id: 2,
          latest_wins: false,
          channel: 'state',
          ts_mono_ns: 1,
          ts_send_ns: 2,
          rate_hz: 10,
        },
      },
    ]);
  });

  it('answers what waits for an unreachable world with a clear retryable error', () => {
    const c = new RelayConnection(route());
    c.fromAgent(req(1, 'initialize', { protocol_versions: ['0.1'] }), 0);
    const fx = c.upstreamFailed('cannot reach the world: ECONNREFUSED');
    expect(sent(fx, 'to-agent')[0]).toMatchObject({
      id: 1,
      error: { code: -32001, data: { retryable: true } },
    });
    expect(fx.at(-1)).toEqual({ kind: 'close-agent', code: 1014, reason: 'upstream world unavailable' });
  });
});

describe('RelayConnection resume ordering', () => {
  it('AWP-CTL-008 an acknowledgement sent before the resume result does not trim what the resume replays', () => {
    const { c, session, token, r } = openSession();
    for (let s = 1; s <= 5; s++) c.fromUpstream(status(s), s);
    session.journal.markDurable(5);
    c.agentClosed();
    const c2 = new RelayConnection(r);
    c2.fromAgent(req(21, 'session.resume', { session_token: token, last_status_seq: 4 }), 10);
    // The agent pings (acknowledging 5) before the resume is answered: it waits for the lookup.
    c2.fromAgent(req(22, 'ping', { origin_ns: 1, last_status_seq: 5 }), 11);
    c2.sessionLookedUp(session, 12);
    c2.upstreamOpened();
    const fx = c2.fromUpstream(res(21, { ...READY, replay_to_status_seq: 5, safe_state: false }), 13);
    const seqs = sent(fx, 'to-agent')
      .slice(1)
      .map((m) => (m.params as { status_seq: number }).status_seq);
    expect(seqs).toEqual([5]);
  });
});

describe('RelayConnection approvers', () => {
  it('AWP-APR-007 an agent cannot approve through the edge, and never sees approval requests', () => {
    const { c } = openSession();
    const fx = c.fromAgent(
      req(40, 'safety.approval.respond', { approval_id: 'ap-1', decision: 'approve' }),
      1,
    );
    expect(sent(fx, 'to-upstream')).toEqual([]);
    expect(sent(fx, 'to-agent')[0]).toMatchObject({
      id: 40,
      error: { code: 4001, message: 'AWP_FORBIDDEN' },
    });
  });

  it('AWP-APR-005 a deployment-configured approver connection reaches the world at once and gets approval requests', () => {
    const r = { ...route(), approver: true };
    const c = new RelayConnection(r);
    r.rememberManifest(JSON.stringify({ protocol_versions: ['0.1'] }), JSON.stringify(MANIFEST));
    // Even with a cached manifest, an approver's initialize goes upstream: the world must know it.
    expect(c.fromAgent(req(1, 'initialize', { protocol_versions: ['0.1'] }), 0).map((e) => e.kind)).toEqual([
      'dial-upstream',
    ]);
    c.upstreamOpened();
    c.fromUpstream(res(1, MANIFEST), 1);
    const request = note('safety.approval_requested', { approval_id: 'ap-1', action_id: 'a-1' });
    expect(c.fromUpstream(request, 2)).toEqual([{ kind: 'to-agent', text: request }]);
    const respond = req(2, 'safety.approval.respond', { approval_id: 'ap-1', decision: 'approve' });
    expect(c.fromAgent(respond, 3)).toEqual([{ kind: 'to-upstream', text: respond }]);
  });

  it('what an agent sends while its session is looked up waits within route.maxQueuedBytes; past it the agent is closed 1008, and nothing more is read', () => {
    const { c, session, token, r } = openSession();
    c.agentClosed();
    const c2 = new RelayConnection({ ...r, maxQueuedBytes: 1000 });
    c2.fromAgent(req(20, 'initialize', { protocol_versions: ['0.1'] }), 30);
    let fx = c2.fromAgent(req(21, 'session.resume', { session_token: token, last_status_seq: 0 }), 31);
    expect(fx.map((e) => e.kind)).toEqual(['lookup-session']);
    const ping = (i: number) => req(`p${i}`, 'ping', { origin_ns: i, pad: 'x'.repeat(200) });
    for (let i = 0; i < 3; i++) expect(c2.fromAgent(ping(i), 32)).toEqual([]); // waiting, within the bound
    fx = c2.fromAgent(ping(3), 33);
    expect(fx).toEqual([
      { kind: 'rejected', reason: 'send_queue_full' },
      { kind: 'close-agent', code: 1008, reason: 'send queue full' },
    ]);
    expect(c2.fromAgent(ping(4), 34)).toEqual([]);
    // The lookup's answer finds a connection being closed: the session is not taken, nothing is dialled.
    expect(c2.sessionLookedUp(session, 35)).toEqual([]);
    expect(session.attachment).toBeNull();
  });

  it('what waits for the world connection is bounded by route.maxQueuedBytes (a dial, or a handshake the world does not finish)', () => {
    const c = new RelayConnection({ ...route(), maxQueuedBytes: 1000 });
    let fx = c.fromAgent(req(1, 'initialize', { protocol_versions: ['0.1'] }), 1);
    expect(fx.map((e) => e.kind)).toEqual(['dial-upstream']);
    const ping = (i: number) => req(`p${i}`, 'ping', { origin_ns: i, pad: 'x'.repeat(300) });
    expect(c.fromAgent(ping(0), 2)).toEqual([]);
    fx = c.fromAgent(ping(1), 3);
    expect(fx).toEqual([]);
    fx = c.fromAgent(ping(2), 4);
    expect(fx).toEqual([
      { kind: 'rejected', reason: 'send_queue_full' },
      { kind: 'close-agent', code: 1008, reason: 'send queue full' },
    ]);
    expect(sent(c.upstreamOpened(), 'to-upstream')).toEqual([]);
  });
});
