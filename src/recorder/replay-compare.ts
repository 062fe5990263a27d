/**
 * Replay of a recorded relay session (AWP-REP-003), sans-IO: what to send, and what to compare. Sent, in
 * their recorded order: the calls that change action state (`action.submit`, `action.cancel`,
 * `world.tick`, `world.reset`, `world.restore`, `session.close`), after `initialize` and the recorded
 * `session.open`, as the world received them (`edge_to_world` records; a file without them, such as
 * awp-sim's audit log, gives the `agent` records). Compared, and nothing else: every frame's payload
 * SHA-256, in order per channel, and the ordered sequence of `(action_id, state, reason)`, each action's
 * repeats of one state counted once (a redelivery). Timestamps, sequence numbers, heartbeats, reports,
 * telemetry and `session.*` messages are not compared.
 */
import { grantedChannels } from './grants.js';
import { isRecord } from '../protocol/json-object.js';
import { shown, type StoredRecord } from './read.js';

export const REPLAYED = [
  'action.submit',
  'action.cancel',
  'world.tick',
  'world.reset',
  'world.restore',
  'session.close',
] as const;

export type Transition = readonly [action_id: string, state: string, reason: string | null];

/** What a session produced: frame payload hashes per channel name, and the transitions in order. */
export class Outcome {
  readonly frames = new Map<string, string[]>();
  readonly transitions: Transition[] = [];
  private readonly channelOf = new Map<number, string>();
  private readonly last = new Map<string, string>();

  /** A result from the world (grants name channels; submit/cancel results carry a transition). */
  result(result: unknown): void {
    for (const [id, name] of grantedChannels(result)) this.channelOf.set(id, name);
    if (isRecord(result) && 'status_seq' in result) this.transition(result);
  }

  /** A notification from the world. */
  notification(method: unknown, params: unknown): void {
    if (method === 'action.status' && isRecord(params)) this.transition(params);
  }

  frame(channel_id: unknown, payloadSha256: unknown): void {
    if (typeof payloadSha256 !== 'string') return;
    const name =
      typeof channel_id === 'number' ? (this.channelOf.get(channel_id) ?? `channel ${channel_id}`) : '?';
    let list = this.frames.get(name);
    if (list === undefined) this.frames.set(name, (list = []));
    list.push(payloadSha256);
  }

  private transition(s: Record<string, unknown>): void {
    if (typeof s.action_id !== 'string' || typeof s.state !== 'string') return;
    const reason = typeof s.reason === 'string' ? s.reason : null;
    const key = `${s.state}\u0000${reason ?? ''}`;
    if (this.last.get(s.action_id) === key) return;
    this.last.set(s.action_id, key);
    this.transitions.push([s.action_id, s.state, reason]);
  }

  get frameCount(): number {
    let n = 0;
    for (const l of this.frames.values()) n += l.length;
    return n;
  }
}

export interface ReplayPlan {
  readonly initialize: Readonly<Record<string, unknown>> | undefined;
  readonly open: Readonly<Record<string, unknown>>;
  readonly calls: readonly { readonly method: string; readonly params: unknown }[];
  readonly recorded: Outcome;
  /** The session's time model, from the recorded session.open. */
  readonly mode: string | undefined;
  /** Where the calls came from. */
  readonly callsFrom: 'edge_to_world' | 'agent';
  /** Calls whose recorded params were redacted (the replay sends them redacted). */
  readonly redactedCalls: number;
  /** The world's frames came on a `ws` stream connection. */
  readonly streamBinding: boolean;
}

/** What to replay and what to expect, or why the file cannot be replayed. */
export function replayPlan(records: readonly StoredRecord[]): ReplayPlan | string {
  const header = records[0];
  if (header?.body.session_kind !== undefined && header.body.session_kind !== 'relay')
    return `a ${shown(header.body.session_kind)} session: only relay sessions (an acting agent) can be replayed`;
  const callsFrom = records.some((r) => r.direction === 'edge_to_world') ? 'edge_to_world' : 'agent';
  const requests = records.filter(
    (r) =>
      r.direction === callsFrom &&
      r.kind === 'message' &&
      typeof r.body.method === 'string' &&
      r.body.id !== undefined,
  );
  const paramsOf = (method: string) => {
    const r =
      requests.find((q) => q.body.method === method) ??
      records.find((q) => q.direction === 'agent' && q.body.method === method);
    return r !== undefined && isRecord(r.body.params) ? r.body.params : undefined;
  };
  const open = paramsOf('session.open');
  if (open === undefined)
    return 'the recording holds no session.open (a resumed session cannot be replayed from here)';
  const calls = requests
    .filter((r) => (REPLAYED as readonly unknown[]).includes(r.body.method))
    .map((r) => ({ method: r.body.method as string, params: r.body.params }));
  const recorded = new Outcome();
  for (const r of records) {
    if (r.direction !== 'world') continue;
    if (r.kind === 'frame' && r.body.method === 'obs.frame')
      recorded.frame(r.body.channel_id, r.body.payload_sha256);
    else if (r.kind === 'message') {
      if (r.body.result !== undefined) recorded.result(r.body.result);
      else if (r.body.id === undefined) recorded.notification(r.body.method, r.body.params);
    }
  }
  return {
    initialize: paramsOf('initialize'),
    open,
    calls,
    recorded,
    mode: typeof open.mode === 'string' ? open.mode : undefined,
    callsFrom,
    redactedCalls: calls.filter((c) => JSON.stringify(c.params ?? null).includes('[redacted:sha256:')).length,
    streamBinding: records.some(
      (r) => r.kind === 'frame' && r.direction === 'world' && r.body.binding === 'ws',
    ),
  };
}

const show = (t: Transition | undefined) =>
  t === undefined ? 'nothing' : `(${t[0]}, ${t[1]}, ${t[2] ?? '-'})`;

/** The first difference of each kind (frames, transitions); empty when the replay reproduced the session. */
export function differences(recorded: Outcome, replayed: Outcome): string[] {
  const out: string[] = [];
  const names = [...new Set([...recorded.frames.keys(), ...replayed.frames.keys()])];
  for (const name of names) {
    const want = recorded.frames.get(name) ?? [];
    const got = replayed.frames.get(name) ?? [];
    const n = Math.max(want.length, got.length);
    for (let i = 0; i < n; i++) {
      if (want[i] === got[i]) continue;
      const hash = (h: string | undefined) => (h === undefined ? 'none' : `sha256:${h.slice(0, 16)}`);
      out.push(
        `channel ${name}: frame ${i + 1} differs: recorded ${hash(want[i])}, replayed ${hash(got[i])} (${want.length} recorded, ${got.length} replayed)`,
      );
      break;
    }
    if (out.length > 0) break;
  }
  const a = recorded.transitions;
  const b = replayed.transitions;
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i];
    const y = b[i];
    if (x !== undefined && y !== undefined && x[0] === y[0] && x[1] === y[1] && x[2] === y[2]) continue;
    out.push(`transition ${i + 1} differs: recorded ${show(x)}, replayed ${show(y)}`);
    break;
  }
  return out;
}
