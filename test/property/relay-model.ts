/**
 * A model world and agent around the relay state machine (src/relay/relay-connection.ts), for property
 * tests. A scenario is a list of steps (agent messages, the agent reading what reached it, drops, the world
 * reading, answering in any order, notifying, redelivering, pinging, dials and store lookups completing);
 * `runScenario` drives a RelayConnection through it exactly as the relay driver would and records every
 * invariant violation it sees, by class, so each property asserts one class and shrinks to its own
 * counterexample.
 *
 * The world is well behaved unless a step says otherwise: it issues session tokens `WORLD-TOKEN-<n>` and
 * stream URLs `ws://world.internal/...`, numbers its status notifications 1, 2, 3... per session, drops
 * what an acknowledgement (ping or resume `last_status_seq`) covers, and on resume replays what is left
 * above the resume's `last_status_seq`.
 */
import fc from 'fast-check';
import { RelayConnection } from '../../src/relay/relay-connection.js';
import type { RelayEffect, RelayRoute } from '../../src/relay/relay-effects.js';
import type { RelaySession } from '../../src/relay/relay-session.js';
import {
  garbageText,
  hostileJson,
  hostileObject,
  jsonText,
  nestedText,
  nestingDepth,
} from './arbitraries.js';

export type Id = number | string;

export type AgentMsg =
  | { t: 'initialize'; id: Id; variant: number }
  | { t: 'open'; id: Id; mode: 'streaming' | 'lockstep' }
  | { t: 'resume'; id: Id; token: 'current' | 'garbage'; seq: 'honest' | number }
  | { t: 'manifest'; id: Id }
  | { t: 'ping'; id: Id; ack: 'none' | 'honest' | number }
  | { t: 'submit'; id: Id }
  | { t: 'close'; id: Id }
  | { t: 'method'; id: Id; method: string; params: Record<string, unknown> }
  | { t: 'pong'; which: number }
  | { t: 'stray'; id: Id }
  | { t: 'notify'; method: string; params: Record<string, unknown> }
  | { t: 'garbage'; text: string }
  | { t: 'deep'; id: Id; depth: number; method: string };

export type Step =
  | { s: 'agent'; m: AgentMsg }
  | { s: 'agentRead'; n: number }
  | { s: 'agentDrop' }
  /** A drop (losing what the agent had not read, or not) and an honest resume on a new connection. */
  | { s: 'reconnect'; lose: boolean; initialize: boolean; settle: boolean }
  | { s: 'worldRead'; n: number }
  | { s: 'worldAnswer'; pick: number; fail: boolean; twice: boolean }
  | { s: 'worldNotify'; kind: 'status' | 'event' | 'frame' }
  | { s: 'worldRedeliver'; back: number }
  | { s: 'worldPing' }
  | { s: 'worldStray' }
  | { s: 'worldHostile'; text: string }
  | { s: 'dialOpen' }
  | { s: 'dialFail' }
  | { s: 'lookup'; fail: false | 'unavailable' | 'unreadable' }
  | { s: 'upstreamDrop' }
  | { s: 'storeFlush' };

export type ViolationClass =
  | 'exception'
  | 'leak'
  | 'upstream-not-from-agent'
  | 'upstream-without-connection'
  | 'invalid-count-forwarded'
  | 'agent-stray-forwarded'
  | 'response-to-unknown-id'
  | 'seq-order'
  | 'seq-gap'
  | 'seq-duplicate';

export interface Violation {
  readonly cls: ViolationClass;
  readonly detail: string;
}

const WORLD_TOKEN = 'WORLD-TOKEN-';
const WORLD_HOST = 'world.internal';

const MANIFEST = {
  protocol_version: '0.1',
  world: { name: 'w', version: '1', vendor: 'v' },
  time_models: ['streaming', 'lockstep'],
  embodiments: [{ id: 'arm_01', kind: 'manipulator', action_types: ['move'], channels: ['proprio'] }],
  observation_channels: [
    { id: 'proprio', modality: 'proprio/json', rate_hz: 100, loss_class: 'latest-wins', schema: {} },
  ],
  action_schemas: [],
  safety_policy: { envelopes: [] },
};

// ------------------------------------------------------------------ generators

const id: fc.Arbitrary<Id> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom<Id>(1, 2, 3, 7, 'a', 'x') },
  {
    weight: 1,
    arbitrary: fc.oneof(fc.integer(), fc.string({ maxLength: 4 }), fc.constantFrom<Id>(2 ** 53, -1, 0.5)),
  },
);

const agentMsg: fc.Arbitrary<AgentMsg> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant('initialize' as const),
      id,
      variant: fc.integer({ min: 0, max: 1 }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant('open' as const),
      id,
      mode: fc.constantFrom('streaming' as const, 'lockstep' as const),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant('resume' as const),
      id,
      token: fc.constantFrom('current' as const, 'current' as const, 'garbage' as const),
      seq: fc.oneof(
        { weight: 4, arbitrary: fc.constant('honest' as const) },
        { weight: 1, arbitrary: fc.constantFrom(-5, 0, 1, 1.5, 2 ** 53) },
      ),
    }),
  },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('manifest' as const), id }) },
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant('ping' as const),
      id,
      ack: fc.oneof(
        { weight: 2, arbitrary: fc.constantFrom('none' as const, 'honest' as const) },
        { weight: 1, arbitrary: fc.constantFrom(-5, 0, 1.5, 100) },
      ),
    }),
  },
  { weight: 4, arbitrary: fc.record({ t: fc.constant('submit' as const), id }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('close' as const), id }) },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant('method' as const),
      id,
      method: fc.constantFrom(
        'obs.subscribe',
        'world.tick',
        'x-vendor.probe',
        'action.cancel',
        'safety.approval.respond',
      ),
      params: hostileObject,
    }),
  },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('pong' as const), which: fc.nat(3) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('stray' as const), id }) },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant('notify' as const),
      method: fc.constantFrom('cmd.frame', 'obs.report', 'x-vendor.note'),
      params: hostileObject,
    }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('garbage' as const), text: garbageText }) },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant('deep' as const),
      id,
      depth: nestingDepth,
      method: fc.constantFrom('initialize', 'ping', 'action.submit', 'session.open', 'x-vendor.deep'),
    }),
  },
);

/** Steps of a scenario; `hostileWorld` adds arbitrary texts from the world. */
export function stepArb(hostileWorld: boolean): fc.Arbitrary<Step> {
  const steps: fc.WeightedArbitrary<Step>[] = [
    { weight: 10, arbitrary: agentMsg.map((m) => ({ s: 'agent' as const, m })) },
    { weight: 5, arbitrary: fc.integer({ min: 1, max: 6 }).map((n) => ({ s: 'agentRead' as const, n })) },
    { weight: 1, arbitrary: fc.constant({ s: 'agentDrop' as const }) },
    {
      weight: 2,
      arbitrary: fc.record({
        s: fc.constant('reconnect' as const),
        lose: fc.boolean(),
        initialize: fc.boolean(),
        settle: fc.boolean(),
      }),
    },
    { weight: 5, arbitrary: fc.integer({ min: 1, max: 4 }).map((n) => ({ s: 'worldRead' as const, n })) },
    {
      weight: 6,
      arbitrary: fc.record({
        s: fc.constant('worldAnswer' as const),
        pick: fc.nat(3),
        // Failures and double answers are rare knobs of their own, so shrinking can turn them off.
        fail: fc.oneof(
          { weight: 5, arbitrary: fc.constant(false) },
          { weight: 1, arbitrary: fc.constant(true) },
        ),
        twice: fc.oneof(
          { weight: 9, arbitrary: fc.constant(false) },
          { weight: 1, arbitrary: fc.constant(true) },
        ),
      }),
    },
    {
      weight: 4,
      arbitrary: fc
        .constantFrom('status' as const, 'status' as const, 'event' as const, 'frame' as const)
        .map((kind) => ({ s: 'worldNotify' as const, kind })),
    },
    {
      weight: 1,
      arbitrary: fc.integer({ min: 0, max: 3 }).map((back) => ({ s: 'worldRedeliver' as const, back })),
    },
    { weight: 1, arbitrary: fc.constant({ s: 'worldPing' as const }) },
    { weight: 1, arbitrary: fc.constant({ s: 'worldStray' as const }) },
    { weight: 4, arbitrary: fc.constant({ s: 'dialOpen' as const }) },
    { weight: 1, arbitrary: fc.constant({ s: 'dialFail' as const }) },
    {
      weight: 3,
      arbitrary: fc
        .oneof(
          { weight: 6, arbitrary: fc.constant(false as const) },
          { weight: 1, arbitrary: fc.constantFrom('unavailable' as const, 'unreadable' as const) },
        )
        .map((fail) => ({ s: 'lookup' as const, fail })),
    },
    { weight: 1, arbitrary: fc.constant({ s: 'upstreamDrop' as const }) },
    { weight: 2, arbitrary: fc.constant({ s: 'storeFlush' as const }) },
  ];
  if (hostileWorld) {
    const hostile = fc.oneof(
      garbageText,
      hostileJson.map((v) => jsonText({ jsonrpc: '2.0', id: 1, result: v })),
      fc
        .tuple(fc.constantFrom<Id>(1, 2, 3, 7, 'a', 'x'), hostileJson)
        .map(([i, v]) => jsonText({ jsonrpc: '2.0', id: i, result: v })),
      fc
        .tuple(
          fc.constantFrom(
            'action.status',
            'world.event',
            'session.state',
            'obs.frame',
            'safety.approval_requested',
          ),
          hostileObject,
        )
        .map(([method, p]) => jsonText({ jsonrpc: '2.0', method, params: p })),
      fc
        .tuple(
          fc.constantFrom('action.status', 'world.event', 'session.state'),
          fc.constantFrom(-1, 0, 1.5, 1e6, 2 ** 53, 2 ** 60),
        )
        .map(([method, seq]) =>
          jsonText({ jsonrpc: '2.0', method, params: { status_seq: seq, state: 'executing' } }),
        ),
      nestingDepth.map((d) => `{"jsonrpc":"2.0","method":"world.event","params":{"x":${nestedText(d)}}}`),
      fc
        .tuple(fc.constantFrom<Id>(1, 2, 3, 7, 'a', 'x'), nestingDepth)
        .map(([i, d]) => `{"jsonrpc":"2.0","id":${JSON.stringify(i)},"result":{"x":${nestedText(d)}}}`),
    );
    steps.push({ weight: 4, arbitrary: hostile.map((text) => ({ s: 'worldHostile' as const, text })) });
  }
  return fc.oneof(...steps);
}

/** The steps of a plain initialize + session.open, so most scenarios start with a live session. */
export const OPEN_PREFIX: readonly Step[] = [
  { s: 'agent', m: { t: 'initialize', id: 1, variant: 0 } },
  { s: 'dialOpen' },
  { s: 'worldAnswer', pick: 0, fail: false, twice: false },
  { s: 'agent', m: { t: 'open', id: 2, mode: 'streaming' } },
  { s: 'worldAnswer', pick: 0, fail: false, twice: false },
  { s: 'agentRead', n: 2 },
];

export function scenarioArb(hostileWorld = false): fc.Arbitrary<Step[]> {
  const body = fc.array(stepArb(hostileWorld), { minLength: 1, maxLength: 80, size: 'medium' });
  return fc.oneof(
    { weight: 3, arbitrary: body.map((b) => [...OPEN_PREFIX, ...b]) },
    { weight: 1, arbitrary: body },
  );
}

// ------------------------------------------------------------------ the world

interface WorldSession {
  readonly token: string;
  readonly n: number;
  seq: number;
  acked: number;
  readonly log: Map<number, string>;
  closed: boolean;
}

interface WorldConn {
  readonly inbox: string[];
  readonly pending: { id: unknown; method: string; params: Record<string, unknown> }[];
  session: WorldSession | null;
}

// ------------------------------------------------------------------ the driver

interface AgentConn {
  readonly relay: RelayConnection;
  /** What the edge wrote to the agent, not read yet (lost on an abrupt drop). */
  readonly inbox: string[];
  /** Texts the agent sent on this connection not yet seen upstream (the edge may forward each once). */
  readonly sent: string[];
  /** Requests the agent sent by id key, not yet answered. */
  readonly outstanding: Map<string, number>;
  /** Highest status_seq read on this connection. */
  prev: number;
  dialPending: boolean;
  lookupToken: string | null;
  closedByEdge: boolean;
}

/** A map key for an id the agent sent (any JSON value: hostile ids are objects with odd members). */
function idKey(v: unknown): string {
  if (typeof v === 'string') return `s:${v}`;
  if (typeof v === 'number') return `n:${v}`;
  return `j:${safeText(v)}`;
}

const TOO_DEEP = '(too deep)';

/** JSON text of a parsed value, or a marker when it nests too deep to stringify. */
function safeText(v: unknown): string {
  try {
    return JSON.stringify(v);
  } catch {
    return TOO_DEEP;
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function isValidCount(v: unknown): boolean {
  return Number.isSafeInteger(v) && (v as number) >= 0;
}

export interface ScenarioResult {
  readonly violations: Violation[];
  /** For debugging a counterexample: what happened, in order. */
  readonly log: string[];
  /** Every status_seq the agent read, in order, across its connections. */
  readonly seqsRead: number[];
  /** Session results the agent read: opened and resumed (so a test can tell the model reached them). */
  readonly stats: { opened: number; resumed: number };
}

export function runScenario(steps: readonly Step[]): ScenarioResult {
  const violations: Violation[] = [];
  const log: string[] = [];
  const seqsRead: number[] = [];
  const stats = { opened: 0, resumed: 0 };
  const violate = (cls: ViolationClass, detail: string): void => {
    violations.push({ cls, detail });
  };

  let minted = 0;
  const manifests = new Map<string, string>();
  const route: RelayRoute = {
    name: 'prop',
    manifestFor: (k) => manifests.get(k),
    rememberManifest: (k, j) => void manifests.set(k, j),
    forgetManifests: () => manifests.clear(),
    edgeEndpoints: (w) => [
      ...w.filter((e) => e.binding === 'ws').map((e) => ({ ...e, url: 'ws://edge.example/stream' })),
      { binding: 'inline' },
    ],
    mintToken: () => `EDGETOKEN${String(++minted).padStart(42, '0')}`,
    ownsToken: (t) => t.startsWith('EDGETOKEN'),
    fanOutObservers: false,
    admitSession: () => undefined,
    approver: false,
  };

  // The edge's registry of sessions (the store), by edge token.
  const registry = new Map<string, RelaySession>();
  // The world.
  const worldSessions = new Map<string, WorldSession>();
  let worldSessionCount = 0;
  let wc = null as WorldConn | null;
  const worldPingIds = new Set<string>();
  let worldPingCount = 0;
  let strayCount = 0;
  // The agent, across its connections.
  let conn = null as AgentConn | null;
  let token = null as string | null;
  let lastSeq = 0;
  let honest = true;
  const worldPingsRead: unknown[] = [];
  let now = 0;

  const worldSend = (text: string): void => {
    if (conn === null || wc === null) return;
    log.push(`world> ${text.slice(0, 200)}`);
    const c = conn;
    call('fromUpstream', () => c.relay.fromUpstream(text, now));
  };

  const call = (what: string, f: () => RelayEffect[]): void => {
    let fx: RelayEffect[];
    try {
      fx = f();
    } catch (err) {
      const e = err as Error;
      violate(
        'exception',
        `${what}: ${e.name}: ${e.message} ${(e.stack ?? '').split('\n').slice(1, 3).join(' ')}`,
      );
      throw new Stop();
    }
    apply(fx);
  };

  function apply(effects: RelayEffect[], c: AgentConn | null = conn): void {
    if (c === null) return;
    for (const e of effects) {
      switch (e.kind) {
        case 'to-agent':
          if (e.text.includes(WORLD_TOKEN) || e.text.includes(WORLD_HOST))
            violate('leak', `to-agent carries a world credential or URL: ${e.text.slice(0, 300)}`);
          checkAgentBoundResponse(c, e.text);
          c.inbox.push(e.text);
          break;
        case 'to-upstream':
          checkUpstream(c, e.text);
          if (wc === null) violate('upstream-without-connection', e.text.slice(0, 200));
          else wc.inbox.push(e.text);
          break;
        case 'dial-upstream':
          c.dialPending = true;
          break;
        case 'close-upstream':
          worldConnectionLost();
          c.dialPending = false;
          break;
        case 'close-agent':
          c.closedByEdge = true;
          break;
        case 'lookup-session':
          c.lookupToken = e.token;
          break;
        case 'session-created':
          registry.set(e.session.token, e.session);
          break;
        case 'session-ended':
          registry.delete(e.session.token);
          break;
        case 'journal-append':
        case 'journal-ack':
        case 'session-attached':
        case 'session-detached':
        case 'observer-open':
        case 'rpc-done':
        case 'resumed':
        case 'resume-unknown':
        case 'rejected':
        case 'dropped':
          break;
      }
    }
    if (c.closedByEdge && conn === c) {
      // The edge flushes what it wrote before closing: the agent reads all of it, then the socket closes.
      readAgent(c, Infinity);
      conn = null;
      worldConnectionLost();
      let fx: RelayEffect[];
      try {
        fx = c.relay.agentClosed();
      } catch (err) {
        violate('exception', `agentClosed: ${String(err)}`);
        throw new Stop();
      }
      apply(fx, c);
    }
  }

  function checkAgentBoundResponse(c: AgentConn, text: string): void {
    const m = parse(text);
    if (!isRecord(m) || !('result' in m || 'error' in m) || m.id === null || m.id === undefined) return;
    const k = idKey(m.id);
    const open = c.outstanding.get(k) ?? 0;
    if (open <= 0) {
      violate('response-to-unknown-id', `the agent has no request ${k} outstanding: ${text.slice(0, 200)}`);
      return;
    }
    c.outstanding.set(k, open - 1);
  }

  /** Everything upstream is the agent's own text, or one of the edge's documented rewrites of it. */
  function checkUpstream(c: AgentConn, text: string): void {
    const exact = c.sent.indexOf(text);
    const m = parse(text);
    const isResponse = isRecord(m) && !('method' in m) && ('result' in m || 'error' in m);
    if (isResponse && !worldPingIds.has(String(m.id)))
      violate(
        'agent-stray-forwarded',
        `a response to an id the world never sent went upstream: ${text.slice(0, 200)}`,
      );
    if (exact >= 0) {
      c.sent.splice(exact, 1);
      checkCounts(text);
      return;
    }
    if (isRecord(m) && typeof m.method === 'string' && 'id' in m && isRecord(m.params)) {
      const up = m.params;
      for (let i = 0; i < c.sent.length; i++) {
        const a = parse(c.sent[i]!);
        if (!isRecord(a) || a.method !== m.method || idKey(a.id) !== idKey(m.id) || !isRecord(a.params))
          continue;
        // A request with an invalid count was answered by the edge (-32602), never rewritten upstream: the
        // rewrite is of a later request that reused its id (seen with FC_SEED=1110157941).
        if ('last_status_seq' in a.params && !isValidCount(a.params.last_status_seq)) continue;
        const same = (except: string[]): boolean => {
          const mine = safeText(omit(a.params as Record<string, unknown>, except));
          return mine !== TOO_DEEP && mine === safeText(omit(up, except));
        };
        const ok =
          (m.method === 'ping' &&
            same(['last_status_seq']) &&
            typeof up.last_status_seq === 'number' &&
            typeof a.params.last_status_seq === 'number' &&
            up.last_status_seq >= a.params.last_status_seq) ||
          (m.method === 'session.resume' &&
            same(['last_status_seq', 'session_token']) &&
            typeof up.session_token === 'string' &&
            up.session_token.startsWith(WORLD_TOKEN));
        if (ok) {
          checkCounts(c.sent[i]!);
          c.sent.splice(i, 1);
          return;
        }
      }
    }
    violate('upstream-not-from-agent', `the agent never sent this: ${text.slice(0, 300)}`);
  }

  function checkCounts(agentText: string): void {
    const a = parse(agentText);
    if (!isRecord(a) || (a.method !== 'ping' && a.method !== 'session.resume') || !isRecord(a.params)) return;
    if ('last_status_seq' in a.params && !isValidCount(a.params.last_status_seq))
      violate(
        'invalid-count-forwarded',
        `forwarded with an invalid last_status_seq: ${agentText.slice(0, 200)}`,
      );
  }

  function worldConnectionLost(): void {
    if (wc === null) return;
    wc = null;
  }

  function readAgent(c: AgentConn, n: number): void {
    while (n-- > 0 && c.inbox.length > 0) {
      const text = c.inbox.shift()!;
      const m = parse(text);
      if (!isRecord(m)) continue;
      let seq: number | undefined;
      if (typeof m.method === 'string') {
        const p = isRecord(m.params) ? m.params : {};
        if ('id' in m && m.method === 'ping') worldPingsRead.push(m.id);
        if (
          !('id' in m) &&
          ['action.status', 'world.event', 'session.state'].includes(m.method) &&
          typeof p.status_seq === 'number'
        )
          seq = p.status_seq;
        if (m.method === 'session.state' && p.state === 'closed' && seq !== undefined) {
          sawSeq(c, seq);
          token = null;
          continue;
        }
      } else if (isRecord(m.result)) {
        const r = m.result;
        if (typeof r.session_token === 'string') {
          if (!('replay_to_status_seq' in r)) {
            stats.opened++;
            token = r.session_token;
            lastSeq = 0;
            honest = true;
            c.prev = 0;
          } else {
            stats.resumed++;
            c.prev = -Infinity;
          }
          continue;
        }
        if (typeof r.status_seq === 'number') seq = r.status_seq;
      } else if (isRecord(m.error) && (m.error.code === 2003 || m.error.code === 2005)) {
        // The session is gone (this resume's token, if it was the agent's).
      }
      if (seq !== undefined) sawSeq(c, seq);
    }
  }

  function sawSeq(c: AgentConn, seq: number): void {
    seqsRead.push(seq);
    if (seq <= c.prev) violate('seq-order', `status_seq ${seq} after ${c.prev} on one connection`);
    c.prev = Math.max(c.prev, seq);
    if (token !== null && honest) {
      if (seq <= lastSeq)
        violate('seq-duplicate', `status_seq ${seq} delivered again (last read ${lastSeq})`);
      else if (seq > lastSeq + 1)
        violate('seq-gap', `status_seq ${seq} after ${lastSeq}: ${lastSeq + 1}..${seq - 1} never delivered`);
    }
    lastSeq = Math.max(lastSeq, seq);
  }

  function agentConn(): AgentConn {
    if (conn === null) {
      conn = {
        relay: new RelayConnection(route),
        inbox: [],
        sent: [],
        outstanding: new Map(),
        prev: -Infinity,
        dialPending: false,
        lookupToken: null,
        closedByEdge: false,
      };
    }
    return conn;
  }

  function agentText(m: AgentMsg): string {
    const rq = (i: Id, method: string, p?: unknown): string =>
      jsonText({ jsonrpc: '2.0', id: i, method, ...(p !== undefined ? { params: p } : {}) });
    switch (m.t) {
      case 'initialize':
        return rq(m.id, 'initialize', {
          protocol_versions: ['0.1'],
          agent: { name: m.variant === 0 ? 'a' : 'b', version: '1' },
          consumes_modalities: ['proprio/json'],
        });
      case 'open':
        return rq(m.id, 'session.open', {
          embodiment: 'arm_01',
          mode: m.mode,
          subscribe: [{ channel: 'proprio' }],
        });
      case 'resume': {
        const seq = m.seq === 'honest' ? lastSeq : m.seq;
        if (m.seq !== 'honest' && m.token === 'current') honest = false;
        const t = m.token === 'current' && token !== null ? token : 'garbage-token';
        return rq(m.id, 'session.resume', { session_token: t, last_status_seq: seq });
      }
      case 'manifest':
        return rq(m.id, 'world.manifest', {});
      case 'ping': {
        const p: Record<string, unknown> = { origin_ns: now * 1e6 };
        if (m.ack === 'honest') p.last_status_seq = lastSeq;
        else if (m.ack !== 'none') {
          p.last_status_seq = m.ack;
          if (typeof m.ack === 'number' && m.ack > lastSeq) honest = false;
        }
        return rq(m.id, 'ping', p);
      }
      case 'submit':
        return rq(m.id, 'action.submit', {
          action_id: `act-${now}`,
          embodiment_id: 'arm_01',
          type: 'move',
          params: {},
        });
      case 'close':
        return rq(m.id, 'session.close', {});
      case 'method':
        return rq(m.id, m.method, m.params);
      case 'pong': {
        const wid = worldPingsRead[m.which % Math.max(1, worldPingsRead.length)] ?? 'no-world-ping';
        return jsonText({ jsonrpc: '2.0', id: wid, result: { origin_ns: 0, receive_ns: 1, transmit_ns: 1 } });
      }
      case 'stray':
        return jsonText({ jsonrpc: '2.0', id: m.id, result: {} });
      case 'notify':
        return jsonText({ jsonrpc: '2.0', method: m.method, params: m.params });
      case 'garbage':
        return m.text;
      case 'deep':
        return `{"jsonrpc":"2.0","id":${jsonText(m.id)},"method":"${m.method}","params":{"origin_ns":1,"x":${nestedText(m.depth)}}}`;
    }
  }

  function sendFromAgent(m: AgentMsg): void {
    const c = agentConn();
    const text = agentText(m);
    c.sent.push(text);
    const msg = parse(text);
    // Anything with an id that is not a response may be answered with that id (even when invalid).
    if (isRecord(msg) && 'id' in msg && !('result' in msg || 'error' in msg)) {
      const k = idKey(msg.id);
      c.outstanding.set(k, (c.outstanding.get(k) ?? 0) + 1);
    }
    log.push(`agent> ${text.slice(0, 200)}`);
    call('fromAgent', () => c.relay.fromAgent(text, now));
  }

  // --------------------------------------------------------------- the world's answers

  function worldRead(w: WorldConn, n: number): void {
    for (let i = 0; i < n && w.inbox.length > 0; i++) {
      const m = parse(w.inbox.shift()!);
      if (isRecord(m) && typeof m.method === 'string' && 'id' in m)
        w.pending.push({ id: m.id, method: m.method, params: isRecord(m.params) ? m.params : {} });
    }
  }

  function worldAnswer(pick: number, fail: boolean, twice: boolean): void {
    // A world answering with nothing read yet reads what is waiting first.
    if (wc !== null && wc.pending.length === 0) worldRead(wc, Infinity);
    if (wc === null || wc.pending.length === 0) return;
    const [req] = wc.pending.splice(pick % wc.pending.length, 1);
    const w = wc;
    const result = (r: unknown): string => jsonText({ jsonrpc: '2.0', id: req!.id, result: r });
    const error = (code: number, message: string): string =>
      jsonText({ jsonrpc: '2.0', id: req!.id, error: { code, message, data: { retryable: false } } });
    const out: string[] = [];
    const p = req!.params;
    if (fail && req!.method !== 'session.resume') {
      out.push(error(-32000, 'the world declines'));
    } else {
      switch (req!.method) {
        case 'initialize':
        case 'world.manifest':
          out.push(result(MANIFEST));
          break;
        case 'session.open': {
          if (w.session !== null) {
            out.push(error(2004, 'AWP_SESSION_EXISTS'));
            break;
          }
          const n = ++worldSessionCount;
          const s: WorldSession = {
            token: `${WORLD_TOKEN}${n}`,
            n,
            seq: 0,
            acked: 0,
            log: new Map(),
            closed: false,
          };
          worldSessions.set(s.token, s);
          w.session = s;
          out.push(result(ready(s)));
          break;
        }
        case 'session.resume': {
          const s = typeof p.session_token === 'string' ? worldSessions.get(p.session_token) : undefined;
          if (s === undefined || s.closed || fail || w.session !== null) {
            out.push(error(2005, 'AWP_SESSION_UNKNOWN'));
            break;
          }
          if (!isValidCount(p.last_status_seq)) {
            out.push(error(-32602, 'Invalid params'));
            break;
          }
          w.session = s;
          s.acked = Math.max(s.acked, p.last_status_seq as number);
          out.push(result({ ...ready(s), replay_to_status_seq: s.seq, safe_state: false }));
          for (let q = s.acked + 1; q <= s.seq; q++) {
            const t = s.log.get(q);
            if (t !== undefined) out.push(t);
          }
          break;
        }
        case 'ping': {
          if (w.session !== null && isValidCount(p.last_status_seq))
            w.session.acked = Math.max(w.session.acked, p.last_status_seq as number);
          out.push(
            result({
              origin_ns: typeof p.origin_ns === 'number' ? p.origin_ns : 0,
              receive_ns: now * 1e6,
              transmit_ns: now * 1e6,
            }),
          );
          break;
        }
        case 'action.submit': {
          const s = w.session;
          if (s === null) {
            out.push(error(2001, 'AWP_SESSION_REQUIRED'));
            break;
          }
          const seq = ++s.seq;
          const action_id = typeof p.action_id === 'string' ? p.action_id : 'act';
          s.log.set(seq, statusText(action_id, 'accepted', seq));
          out.push(
            result({ action_id, state: 'accepted', status_seq: seq, received_ts_mono_ns: 1, ts_mono_ns: 2 }),
          );
          break;
        }
        case 'session.close': {
          const s = w.session;
          if (s === null) {
            out.push(error(2001, 'AWP_SESSION_REQUIRED'));
            break;
          }
          const seq = ++s.seq;
          const t = jsonText({
            jsonrpc: '2.0',
            method: 'session.state',
            params: { state: 'closed', reason: 'closed', status_seq: seq, ts_mono_ns: seq },
          });
          s.log.set(seq, t);
          s.closed = true;
          w.session = null;
          out.push(t, result({}));
          break;
        }
        default:
          out.push(error(-32601, 'Method not found'));
      }
    }
    if (twice) out.push(out[out.length - 1]!);
    for (const t of out) {
      if (wc !== w) return;
      worldSend(t);
    }
  }

  function ready(s: WorldSession): Record<string, unknown> {
    return {
      session_id: `sess-${s.n}`,
      session_token: s.token,
      reconnect_window_ms: 30000,
      heartbeat_interval_ms: 5000,
      granted: {
        channels: [{ channel: 'proprio', rate_hz: 100, channel_id: 1 }],
        action_types: ['move'],
        envelopes: [],
      },
      stream_endpoints: [{ binding: 'ws', url: `ws://${WORLD_HOST}/stream/${s.n}` }, { binding: 'inline' }],
    };
  }

  function statusText(action_id: string, state: string, seq: number): string {
    return jsonText({
      jsonrpc: '2.0',
      method: 'action.status',
      params: { action_id, state, status_seq: seq, ts_mono_ns: 1000 + seq },
    });
  }

  function drop(): void {
    const c = conn;
    if (c === null) return;
    log.push('agent drops');
    call('agentClosed', () => c.relay.agentClosed());
    conn = null;
    worldConnectionLost();
  }

  // --------------------------------------------------------------- the steps

  try {
    for (const step of steps) {
      now += 1;
      switch (step.s) {
        case 'agent':
          sendFromAgent(step.m);
          break;
        case 'agentRead':
          if (conn !== null) readAgent(conn, step.n);
          break;
        case 'agentDrop':
          drop();
          break;
        case 'reconnect': {
          if (!step.lose && conn !== null) readAgent(conn, Infinity);
          drop();
          if (step.initialize) sendFromAgent({ t: 'initialize', id: `i${now}`, variant: 0 });
          sendFromAgent({ t: 'resume', id: `r${now}`, token: 'current', seq: 'honest' });
          const c = conn;
          if (step.settle && c !== null && c.lookupToken !== null) {
            const t = c.lookupToken;
            c.lookupToken = null;
            call('sessionLookedUp', () => c.relay.sessionLookedUp(registry.get(t) ?? null, now));
            if (c.dialPending) {
              c.dialPending = false;
              wc = { inbox: [], pending: [], session: null };
              call('upstreamOpened', () => c.relay.upstreamOpened());
            }
          }
          break;
        }
        case 'worldRead':
          if (wc !== null) worldRead(wc, step.n);
          break;
        case 'worldAnswer':
          worldAnswer(step.pick, step.fail, step.twice);
          break;
        case 'worldNotify': {
          const s = wc?.session;
          if (s === undefined || s === null) break;
          if (step.kind === 'frame') {
            worldSend(
              jsonText({
                jsonrpc: '2.0',
                method: 'obs.frame',
                params: { channel_id: 1, seq: now, ts_mono_ns: now, flags: 1, payload_b64: '' },
              }),
            );
            break;
          }
          const seq = ++s.seq;
          const t =
            step.kind === 'status'
              ? statusText('act', 'executing', seq)
              : jsonText({
                  jsonrpc: '2.0',
                  method: 'world.event',
                  params: { event: 'e', status_seq: seq, ts_mono_ns: seq },
                });
          s.log.set(seq, t);
          worldSend(t);
          break;
        }
        case 'worldRedeliver': {
          const s = wc?.session;
          if (s === undefined || s === null) break;
          const t = s.log.get(s.seq - step.back);
          if (t !== undefined) worldSend(t);
          break;
        }
        case 'worldPing': {
          const pid = `world-ping-${++worldPingCount}`;
          worldPingIds.add(pid);
          worldSend(jsonText({ jsonrpc: '2.0', id: pid, method: 'ping', params: { origin_ns: now } }));
          break;
        }
        case 'worldStray':
          worldSend(jsonText({ jsonrpc: '2.0', id: `never-sent-${++strayCount}`, result: {} }));
          break;
        case 'worldHostile':
          worldSend(step.text);
          break;
        case 'dialOpen': {
          const c = conn;
          if (c === null || !c.dialPending) break;
          c.dialPending = false;
          wc = { inbox: [], pending: [], session: null };
          call('upstreamOpened', () => c.relay.upstreamOpened());
          break;
        }
        case 'dialFail': {
          const c = conn;
          if (c === null || !c.dialPending) break;
          c.dialPending = false;
          call('upstreamFailed', () => c.relay.upstreamFailed('cannot reach the world'));
          break;
        }
        case 'lookup': {
          const c = conn;
          if (c === null || c.lookupToken === null) break;
          const t = c.lookupToken;
          c.lookupToken = null;
          if (step.fail === 'unavailable')
            call('sessionLookupFailed', () => c.relay.sessionLookupFailed('store down'));
          else if (step.fail === 'unreadable') call('sessionUnreadable', () => c.relay.sessionUnreadable());
          else call('sessionLookedUp', () => c.relay.sessionLookedUp(registry.get(t) ?? null, now));
          break;
        }
        case 'upstreamDrop': {
          const c = conn;
          if (c === null || wc === null) break;
          worldConnectionLost();
          call('upstreamClosed', () => c.relay.upstreamClosed());
          break;
        }
        case 'storeFlush':
          for (const s of registry.values()) s.journal.markDurable(s.journal.highWaterMark);
          break;
      }
    }
  } catch (err) {
    if (!(err instanceof Stop)) throw err;
  }
  return { violations, log, seqsRead, stats };
}

class Stop extends Error {}

function omit(o: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (!keys.includes(k)) out[k] = v;
  return out;
}
