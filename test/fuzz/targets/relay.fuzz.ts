/**
 * Fuzz target: the agent-facing message path, `RelayConnection` (src/relay/relay-connection.ts) on a real
 * `RouteRuntime`, fed fuzzer-chosen events: agent texts, world texts, drops and closes on either side, store
 * answers to a resume, reconnections (a second connection resuming the same session) and time.
 *
 * The input is decoded with FuzzedDataProvider into a script (see `decodeScript`, and `ScriptWriter` in
 * script.ts, which the seed corpus is written with). A text is either plain, or "amplified":
 * head + unit*k + middle + close*k + tail, so the fuzzer reaches deep nesting and large messages in a few
 * mutations instead of thousands.
 *
 * Crashes: any exception from a RelayConnection method (its inputs are peers' bytes: it must answer, drop or
 * close, never throw), and effects that break ConnectionWatch's rules (below).
 */
import { FuzzedDataProvider } from '@jazzer.js/core/dist/FuzzedDataProvider.js';
import type { RouteConfig } from '../../../src/config/schema.js';
import { RelayConnection } from '../../../src/relay/relay-connection.js';
import type { RelayEffect } from '../../../src/relay/relay-effects.js';
import type { RelaySession } from '../../../src/relay/relay-session.js';
import { TokenMint } from '../../../src/session/tokens.js';
import { RouteRuntime } from '../../../src/edge/route.js';
import { check } from './check.js';
import { type ScriptEvent, readScript } from './script.js';

const MAX_CONNECTIONS = 4;
const PUBLIC_BASES = ['ws://127.0.0.1:8080', 'wss://edge.example.com', 'ws://[::1]:9000'];

export function decodeScript(data: Buffer): { config: number; events: ScriptEvent[] } {
  return readScript(new FuzzedDataProvider(data));
}

type Envelope = Record<string, unknown>;

function envelope(text: string): Envelope | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Envelope) : undefined;
}

function idKey(id: unknown): string {
  return typeof id === 'string' ? `s:${id}` : `n:${JSON.stringify(id)}`;
}

/** A message's kind, method and id: what "the agent sent this" is compared by. */
function shape(m: Envelope): string {
  if (!('method' in m)) return `response ${idKey(m.id)}`;
  return 'id' in m ? `request ${String(m.method)} ${idKey(m.id)}` : `notification ${String(m.method)}`;
}

/**
 * What one connection's effects must respect (issue 12): every effect text is JSON (what the edge writes is a
 * JSON-RPC message); nothing goes upstream that the agent did not send (AWP-SAF-003: the edge re-sends the
 * agent's own initialize and resume, never a message of its own); the answer to the agent's session.open or
 * session.resume carries the edge's token and the edge's endpoints, never the world's.
 */
class ConnectionWatch {
  private readonly agentSent = new Set<string>();
  /** Ids of session.open / session.resume the edge forwarded, until the agent gets their answer. */
  private readonly opens = new Set<string>();

  constructor(
    private readonly ownsToken: (token: string) => boolean,
    private readonly edgeBases: readonly string[],
  ) {}

  agent(text: string): void {
    const m = envelope(text);
    if (m !== undefined) this.agentSent.add(shape(m));
  }

  effects(effects: RelayEffect[], sessions: RelaySession[]): void {
    for (const e of effects) {
      if (e.kind === 'session-created' && !sessions.includes(e.session)) sessions.push(e.session);
      if (e.kind !== 'to-agent' && e.kind !== 'to-upstream') continue;
      const m = envelope(e.text);
      check(m !== undefined, `${e.kind} text is not a JSON object: ${e.text.slice(0, 80)}`);
      if (e.kind === 'to-upstream') this.upstream(m);
      else this.toAgent(m);
    }
  }

  private upstream(m: Envelope): void {
    const s = shape(m);
    check(this.agentSent.has(s), `the edge sent upstream what the agent did not: ${s}`, 'edge-originated');
    if (m.method === 'session.open' || m.method === 'session.resume') this.opens.add(idKey(m.id));
  }

  private toAgent(m: Envelope): void {
    if ('method' in m || !this.opens.delete(idKey(m.id)) || !('result' in m)) return;
    const r = m.result as Envelope | null;
    if (typeof r !== 'object' || r === null || typeof r.session_id !== 'string') return; // not a session.ready
    if (typeof r.session_token === 'string') {
      check(this.ownsToken(r.session_token), "the world's session token reached the agent", 'world-token');
    }
    if (!Array.isArray(r.stream_endpoints)) return;
    // A ready without a string token is relayed as the world sent it (the edge holds no session for it).
    const findingClass = typeof r.session_token === 'string' ? 'world-url' : 'malformed-ready-relayed';
    for (const ep of r.stream_endpoints as unknown[]) {
      const url = (ep as Envelope | null)?.url;
      if (url === undefined) continue;
      check(
        typeof url === 'string' && this.edgeBases.some((b) => url.startsWith(b)),
        `a stream endpoint the agent got is not the edge's: ${JSON.stringify(url)}`,
        findingClass,
      );
    }
  }
}

export function play(config: number, events: readonly ScriptEvent[]): void {
  let storeDown = false;
  const routeConfig: RouteConfig = {
    name: 'fuzz',
    path: '/',
    upstream: 'ws://127.0.0.1:1/world',
    agent_tokens: ['agent-token'],
    allow_anonymous: false,
    observers: (config & 1) === 0 ? 'relay' : 'fanout',
    hub_linger_ms: 1000,
    approver_tokens: ['approver-token'],
    allowed_origins: [],
  };
  const route = new RouteRuntime(routeConfig, new TokenMint(), () =>
    storeDown ? 'store down (fuzz)' : undefined,
  );
  if ((config & 2) !== 0) route.enableWebTransport(4433);
  const base = PUBLIC_BASES[(config >> 2) % PUBLIC_BASES.length]!;
  const sessions: RelaySession[] = [];
  const edgeBases = [`${base}/`, `https://${new URL(base).hostname}:4433/`];
  const open = (approver = false) => ({
    relay: new RelayConnection(route.forConnection(base, undefined, approver)),
    watch: new ConnectionWatch((t) => route.forConnection(base).ownsToken(t), edgeBases),
  });
  const conns = [open()];
  let current = 0;
  let now = 0;
  for (const ev of events) {
    const { relay: c, watch } = conns[current]!;
    now += 1;
    let fx: RelayEffect[] = [];
    switch (ev.op) {
      case 'agent':
        watch.agent(ev.text);
        fx = c.fromAgent(ev.text, now);
        break;
      case 'world':
        fx = c.fromUpstream(ev.text, now);
        break;
      case 'agent-closed':
        fx = c.agentClosed();
        break;
      case 'upstream-opened':
        fx = c.upstreamOpened();
        break;
      case 'upstream-closed':
        fx = c.upstreamClosed();
        break;
      case 'upstream-failed':
        fx = c.upstreamFailed('dial failed (fuzz)');
        break;
      case 'looked-up': {
        const found = ev.n === 0 || sessions.length === 0 ? null : sessions[(ev.n - 1) % sessions.length]!;
        fx = c.sessionLookedUp(found, now);
        break;
      }
      case 'lookup-failed':
        fx = c.sessionLookupFailed('the session store is unavailable (fuzz)');
        break;
      case 'new-connection':
        if (conns.length < MAX_CONNECTIONS) {
          conns.push(open(ev.n === 1));
          current = conns.length - 1;
        }
        break;
      case 'select':
        current = ev.n % conns.length;
        break;
      case 'hand-off':
        fx = c.handOff();
        break;
      case 'durable':
        // What the shell does once the store holds a session's journal entries.
        for (const s of sessions) {
          const pending = s.journal.notDurable();
          if (pending.length > 0) s.journal.markDurable(pending.at(-1)!.status_seq);
        }
        break;
      case 'tick':
        now += ev.n;
        break;
      case 'store-toggle':
        storeDown = !storeDown;
        break;
    }
    watch.effects(fx, sessions);
  }
}

export function fuzz(data: Buffer): void {
  const { config, events } = decodeScript(data);
  play(config, events);
}
