/**
 * Turns a trace into a playable script. Eight traces continue a session the core traces establish; their
 * prefix is the core trace cut at the state their `given` describes, extended where the continuation uses
 * something the core manifest lacks (approval.jsonl's transfer_vial), so a grant-checking proxy accepts it.
 */
import type { JsonObject, PlayScript, TraceEntry, TraceMessage } from './trace-types.js';
import { cloneJson, isJsonObject } from './trace-types.js';
import { givenOf, loadTrace } from './trace-loader.js';
import { idOf, isSessionReadyResult, methodOf, resultOf, statusSeqOf } from './message-view.js';

interface ContinuationSpec {
  readonly base: 'core-streaming' | 'core-lockstep';
  /** Index (inclusive) in the base trace's entries where the prefix ends. */
  readonly end: (entries: readonly TraceEntry[]) => number;
  /** Rewrites prefix messages the continuation needs extended. */
  readonly extend?: (entry: TraceMessage) => TraceMessage;
}

/** The world message that first reports `status_seq` n. */
function throughStatusSeq(n: number): ContinuationSpec['end'] {
  return (entries) =>
    entries.findIndex((e) => e.kind === 'message' && e.from === 'world' && statusSeqOf(e.msg) === n);
}

/** The world's response to the first agent request with this method. */
function throughResponseTo(method: string): ContinuationSpec['end'] {
  return (entries) => {
    const request = entries.find(
      (e) => e.kind === 'message' && e.from === 'agent' && methodOf(e.msg) === method,
    );
    if (request?.kind !== 'message') return -1;
    const id = idOf(request.msg);
    return entries.findIndex(
      (e) =>
        e.kind === 'message' && e.from === 'world' && methodOf(e.msg) === undefined && idOf(e.msg) === id,
    );
  };
}

/** After a-7 began executing (status_seq 4) in the streaming trace. */
const STREAMING_A7_EXECUTING: ContinuationSpec = { base: 'core-streaming', end: throughStatusSeq(4) };

export const APPROVAL_ACTION_TYPE = 'transfer_vial';
export const APPROVAL_TIMEOUT_MS = 60000;

/** The extended type approval.jsonl submits; its marker requires `requires_approval: true`. */
export const TRANSFER_VIAL_SCHEMA: JsonObject = {
  type: APPROVAL_ACTION_TYPE,
  params_schema: {
    type: 'object',
    properties: { from: { type: 'string' }, to: { type: 'string' } },
    required: ['from', 'to'],
    additionalProperties: false,
  },
  duration: 'extended',
  preemption: ['queue'],
  concurrency_group: 'arm_motion',
  max_queue: 4,
  requires_approval: true,
};

/** approval.jsonl: a manifest declaring transfer_vial (requires_approval) and approval_timeout_ms, and a grant for it. */
function extendForApproval(entry: TraceMessage): TraceMessage {
  const msg = cloneJson(entry.msg);
  const result = resultOf(msg);
  if (entry.from !== 'world' || result === undefined) return entry;
  if (Array.isArray(result.action_schemas) && Array.isArray(result.embodiments)) {
    result.action_schemas.push(cloneJson(TRANSFER_VIAL_SCHEMA));
    for (const embodiment of result.embodiments) {
      if (isJsonObject(embodiment) && Array.isArray(embodiment.action_types)) {
        embodiment.action_types.push(APPROVAL_ACTION_TYPE);
      }
    }
    if (isJsonObject(result.safety_policy)) result.safety_policy.approval_timeout_ms = APPROVAL_TIMEOUT_MS;
    return extended(
      entry,
      msg,
      `manifest declares ${APPROVAL_ACTION_TYPE} (requires_approval), approval_timeout_ms`,
    );
  }
  if (
    isSessionReadyResult(msg) &&
    isJsonObject(result.granted) &&
    Array.isArray(result.granted.action_types)
  ) {
    result.granted.action_types.push(APPROVAL_ACTION_TYPE);
    return extended(entry, msg, `granted.action_types includes ${APPROVAL_ACTION_TYPE}`);
  }
  return entry;
}

function extended(entry: TraceMessage, msg: JsonObject, what: string): TraceMessage {
  return { ...entry, msg, source: { ...entry.source, extended: what } };
}

const CONTINUATIONS: Readonly<Record<string, ContinuationSpec>> = {
  cancel: STREAMING_A7_EXECUTING,
  'close-during-motion': STREAMING_A7_EXECUTING,
  disconnect: STREAMING_A7_EXECUTING,
  estop: STREAMING_A7_EXECUTING,
  'quiet-agent': STREAMING_A7_EXECUTING,
  retry: STREAMING_A7_EXECUTING,
  // "the session is active (status_seq 2)"
  approval: { base: 'core-streaming', end: throughStatusSeq(2), extend: extendForApproval },
  // "after tick 1": through the first world.tick result
  'lockstep-replace': { base: 'core-lockstep', end: throughResponseTo('world.tick') },
};

/** Loads a trace and, for a continuation, prepends the prefix that establishes its session. */
export function buildPlayScript(name: string): PlayScript {
  const trace = loadTrace(name);
  const spec = CONTINUATIONS[name];
  if (spec === undefined) {
    if (givenOf(trace) !== undefined)
      throw new Error(`${name}.jsonl continues a session but has no prefix rule`);
    return { name, prefix: [], body: trace.entries, entries: trace.entries };
  }
  const base = loadTrace(spec.base).entries;
  const end = spec.end(base);
  if (end < 0) throw new Error(`${name}: the prefix end was not found in ${spec.base}.jsonl`);
  const extend = spec.extend;
  const prefix = base
    .slice(0, end + 1)
    .map((e) => (extend !== undefined && e.kind === 'message' ? extend(e) : e));
  return { name, basedOn: spec.base, prefix, body: trace.entries, entries: [...prefix, ...trace.entries] };
}
