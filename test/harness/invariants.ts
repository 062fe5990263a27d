/**
 * The checks the spec's CI runs on every trace ("Wire traces" page): responses match requests by id;
 * status_seq increases by exactly one across statuses, events, session-state notifications and the
 * transitions first reported in submit/cancel results (AWP-CTL-008); frame seq increases per channel
 * (AWP-DAT-001). Undelivered messages count: the world assigned their status_seq.
 */
import type { JsonObject, TraceEntry, TraceMessage } from './trace-types.js';
import { describeEntry } from './trace-types.js';
import {
  type RpcId,
  idOf,
  isRequest,
  isResponse,
  isSessionReadyResult,
  methodOf,
  paramsOf,
  resultOf,
  statusSeqOf,
  stringField,
} from './message-view.js';

export interface InvariantOptions {
  /** status_seq already assigned before the first entry; defaults to the first marker's `given.status_seq`, else 0. */
  readonly initialStatusSeq?: number;
}

/** Methods whose result reports (or, when repeated, re-reports) an action transition with a status_seq. */
const SEQ_RESULT_METHODS = new Set(['action.submit', 'action.cancel', 'action.status']);

interface Transition {
  readonly kind: string;
  readonly action_id?: string;
  readonly state?: string;
}

/** Returns the violations found, each naming the entry; empty when every invariant holds. */
export function checkTraceInvariants(
  entries: readonly TraceEntry[],
  options: InvariantOptions = {},
): string[] {
  const out: string[] = [];
  const first = entries[0];
  const givenSeq = first?.kind === 'marker' ? first.given?.status_seq : undefined;
  const initial = options.initialStatusSeq ?? (typeof givenSeq === 'number' ? givenSeq : 0);

  // Outstanding requests per sender: id -> method.
  const pending = { agent: new Map<RpcId, string>(), world: new Map<RpcId, string>() };
  let expected = initial + 1;
  let highest = initial;
  const transitions = new Map<number, Transition>(); // seq -> what it reported
  const latestSeqOfAction = new Map<string, number>();
  const frameSeq = new Map<string, number>();

  for (const entry of entries) {
    if (entry.kind !== 'message') continue;
    const fail = (why: string): void => void out.push(`${describeEntry(entry)}: ${why}`);
    const { msg, from } = entry;
    const other = from === 'agent' ? 'world' : 'agent';
    const method = methodOf(msg);
    let answered: string | undefined;

    if (isRequest(msg)) {
      const id = idOf(msg)!;
      if (pending[from].has(id)) fail(`request id ${JSON.stringify(id)} reused while still outstanding`);
      pending[from].set(id, method!);
    } else if (isResponse(msg)) {
      const id = idOf(msg);
      answered = id === undefined ? undefined : pending[other].get(id);
      if (answered === undefined)
        fail(`response id ${JSON.stringify(id)} matches no outstanding ${other} request`);
      else pending[other].delete(id!);
    } else if (method === undefined) {
      fail('neither a request, a notification nor a response');
    }

    if (from === 'agent' && method === 'session.resume') {
      const last = paramsOf(msg)?.last_status_seq;
      if (typeof last !== 'number') fail('session.resume without a numeric last_status_seq');
      else if (last > highest) fail(`last_status_seq ${last} is above the highest assigned ${highest}`);
      else expected = last + 1; // the world replays everything after it
    }
    if (from === 'world' && answered === 'session.resume' && isSessionReadyResult(msg)) {
      const replayTo = resultOf(msg)?.replay_to_status_seq;
      if (typeof replayTo !== 'number') fail('resume result without replay_to_status_seq');
      else if (replayTo < highest) fail(`replay_to_status_seq ${replayTo} < highest assigned ${highest}`);
    }

    if (from === 'world') {
      const seq = statusSeqOf(msg);
      if (
        seq !== undefined &&
        (method !== undefined || (answered !== undefined && SEQ_RESULT_METHODS.has(answered)))
      ) {
        const transition = transitionOf(msg);
        const repeatAllowed = answered !== undefined; // results may re-report the latest transition
        checkSeq(seq, transition, repeatAllowed, fail);
      }
    }
    checkFrame(entry, frameSeq, out);
  }
  return out;

  function checkSeq(seq: number, t: Transition, repeatAllowed: boolean, fail: (why: string) => void): void {
    if (seq === expected) {
      if (seq <= highest) {
        const before = transitions.get(seq);
        if (before !== undefined && !sameTransition(before, t)) {
          fail(`replayed status_seq ${seq} reports ${show(t)}, first assigned to ${show(before)}`);
        }
      } else {
        transitions.set(seq, t);
        highest = seq;
      }
      if (t.action_id !== undefined) latestSeqOfAction.set(t.action_id, seq);
      expected = seq + 1;
      return;
    }
    if (repeatAllowed && t.action_id !== undefined && latestSeqOfAction.get(t.action_id) === seq) {
      const before = transitions.get(seq);
      if (before !== undefined && !sameTransition(before, t)) {
        fail(`repeated status_seq ${seq} reports ${show(t)}, first assigned to ${show(before)}`);
      }
      return; // idempotent re-report: consumes no status_seq
    }
    fail(`status_seq ${seq}, expected ${expected}`);
    if (seq > expected) {
      // resynchronise after a gap so one defect is reported once
      transitions.set(seq, t);
      highest = Math.max(highest, seq);
      expected = seq + 1;
    }
  }
}

function transitionOf(msg: JsonObject): Transition {
  const method = methodOf(msg);
  const body = paramsOf(msg) ?? resultOf(msg);
  if (method === 'world.event') return { kind: `event:${stringField(body, 'event') ?? '?'}` };
  if (method === 'session.state') return { kind: `session:${stringField(body, 'state') ?? '?'}` };
  return { kind: 'action', action_id: stringField(body, 'action_id'), state: stringField(body, 'state') };
}

function sameTransition(a: Transition, b: Transition): boolean {
  return a.kind === b.kind && a.action_id === b.action_id && a.state === b.state;
}

function show(t: Transition): string {
  return t.action_id === undefined ? t.kind : `${t.action_id} ${t.state ?? '?'}`;
}

function checkFrame(entry: TraceMessage, frameSeq: Map<string, number>, out: string[]): void {
  const method = methodOf(entry.msg);
  if (method !== 'obs.frame' && method !== 'cmd.frame') return;
  const params = paramsOf(entry.msg);
  const channel = params?.channel_id;
  const seq = params?.seq;
  if (typeof channel !== 'number' || typeof seq !== 'number') {
    out.push(`${describeEntry(entry)}: frame without numeric channel_id and seq`);
    return;
  }
  const key = `${entry.from}:${channel}`;
  const last = frameSeq.get(key);
  if (last !== undefined && seq <= last) {
    out.push(`${describeEntry(entry)}: channel ${channel} seq ${seq} does not increase (last ${last})`);
  }
  frameSeq.set(key, seq);
}
