/**
 * The action lifecycle (spec/loop/actions, action-lifecycle, preemption): admission, idempotent resubmission,
 * cancel, status pulls, execution and its end, queues, and the lockstep advance (AWP-TIM-003/010/011).
 */
import type { JsonRpcId } from '../protocol/jsonrpc.js';
import { fail, failRpc } from './failure.js';
import type { ActionRecord, Session } from './session.js';
import {
  emitFrame,
  enterSafeState,
  finalizeClose,
  finish,
  report,
  round4,
  statusParams,
} from './transitions.js';
import type { JsonObject } from './types.js';
import { MS, S, isPreExecution, isTerminal } from './types.js';
import type { ActionDecl, ConnState, WorldState } from './world-state.js';

/** The members compared for "identical" (AWP-ACT-009); `x-<vendor>.` members are not. */
const SUBMIT_FIELDS = [
  'type',
  'params',
  'embodiment_id',
  'preempt',
  'deadline_ms',
  'basis_ts_mono_ns',
  'valid_until_ns',
];

function policies(decl: ActionDecl): string[] {
  return Array.isArray(decl.preemption) ? decl.preemption : [decl.preemption];
}

function groupOf(decl: ActionDecl): string {
  return decl.concurrency_group ?? `_${decl.type}`; // ungrouped types form their own group (AWP-PRE-006)
}

/** JSON equality: objects member-wise, numbers numerically (AWP-ACT-009). */
function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((v, i) => same(v, b[i]));
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  const ob = b as Record<string, unknown>;
  return (
    ka.length === kb.length &&
    ka.every((k) => Object.hasOwn(ob, k) && same((a as Record<string, unknown>)[k], ob[k]))
  );
}

function sameSubmission(a: JsonObject, b: JsonObject): boolean {
  return SUBMIT_FIELDS.every((f) => Object.hasOwn(a, f) === Object.hasOwn(b, f) && same(a[f], b[f]));
}

/** Admission checks, in the order a first submission is refused; nothing changes before they pass. */
function admit(w: WorldState, s: Session, p: JsonObject, received: number): ActionDecl {
  if (s.embodiment === null) throw fail('AWP_FORBIDDEN', 'observer sessions cannot act (AWP-EMB-004)');
  const type = p.type as string;
  if (!s.actionTypes.includes(type)) throw fail('AWP_FORBIDDEN', `${type} is not granted`);
  if (p.embodiment_id !== undefined && p.embodiment_id !== s.embodiment) {
    throw fail('AWP_FORBIDDEN', `${JSON.stringify(p.embodiment_id)} is not bound to this session`);
  }
  if (w.estop) throw fail('AWP_ESTOP_ACTIVE', `e-stop engaged on ${s.embodiment}`);
  const rate = w.sim
    .envelopes(s.embodiment)
    .find((e) => typeof e.max_action_rate_hz === 'number')?.max_action_rate_hz;
  if (typeof rate === 'number' && s.lastAdmittedNs !== null) {
    // On the session clock: simulated time in lockstep (AWP-ENV-004, AWP-TIM-013).
    const interval = S / rate;
    const since = received - s.lastAdmittedNs;
    if (since < interval) {
      throw fail('AWP_ENVELOPE_EXCEEDED', `max_action_rate_hz ${rate}`, {
        retryable: true,
        retry_after_ms: Math.max(1, Math.ceil((interval - since) / MS)),
      });
    }
  }
  const decl = w.decls.get(type)!;
  const problem = w.params.problem(type, p.params);
  if (problem !== undefined) throw fail('AWP_PARAMS_INVALID', problem);
  const preempt = (p.preempt as string | undefined) ?? policies(decl)[0]!;
  if (!policies(decl).includes(preempt)) {
    throw fail('AWP_PARAMS_INVALID', `preempt must be one of ${policies(decl).join(', ')}`);
  }
  w.sim.checkSubmit(type, p.params as JsonObject);
  const maxAge = (w.manifest.safety_policy as JsonObject).max_basis_age_ms;
  if (!w.lockstep && typeof maxAge === 'number') {
    const basis = p.basis_ts_mono_ns;
    if (typeof basis === 'number' && received - basis > maxAge * MS) {
      throw fail('AWP_STALE_INTENT', 'basis older than max_basis_age_ms');
    }
    if (typeof p.valid_until_ns === 'number' && p.valid_until_ns <= received) {
      throw fail('AWP_STALE_INTENT', 'valid_until_ns has passed');
    }
  }
  const group = groupOf(decl);
  if (preempt === 'reject' && s.busy(group)) throw fail('AWP_BUSY', `${group} is busy`);
  if (preempt === 'queue' && s.busy(group) && s.queue(group).length >= (decl.max_queue ?? Infinity)) {
    throw fail('AWP_QUEUE_FULL', `${group} holds ${s.queue(group).length} queued actions`);
  }
  return decl;
}

export function actionSubmit(w: WorldState, c: ConnState, id: JsonRpcId, p: JsonObject): void {
  const s = c.session!;
  const received = w.clock();
  const actionId = p.action_id as string;
  const known = s.actions.get(actionId);
  if (known !== undefined) {
    // AWP-ACT-001: an identical resubmission reports the current state and consumes no status_seq.
    if (!sameSubmission(known.content, p))
      throw fail('AWP_ACTION_ID_CONFLICT', `${actionId} was admitted with different content`);
    const st = known.status;
    w.reply(c.id, id, {
      action_id: actionId,
      state: st.state,
      status_seq: st.status_seq,
      received_ts_mono_ns: known.received_ts_mono_ns,
      ts_mono_ns: st.ts_mono_ns,
      ...(st.reason !== undefined && { reason: st.reason }),
    });
    return;
  }
  const decl = admit(w, s, p, received);
  const preempt = (p.preempt as string | undefined) ?? policies(decl)[0]!;
  const group = groupOf(decl);
  const bounds = [p.deadline_ms, decl.max_duration_ms].filter((v): v is number => typeof v === 'number');
  const a: ActionRecord = {
    action_id: actionId,
    content: p,
    type: decl.type,
    duration: decl.duration,
    group,
    params: p.params as JsonObject,
    replaces: preempt === 'replace' || preempt === 'blend',
    received_ts_mono_ns: received,
    // Binding in streaming only (AWP-ACT-004/008); advisory in lockstep.
    deadlineNs: !w.lockstep && bounds.length > 0 ? received + Math.min(...bounds) * MS : undefined,
    state: 'accepted',
    status: {},
    abort: null,
    startedThisAdvance: false,
    lastProgressNs: w.now,
    terminalNs: null,
  };
  const busy = s.busy(group);
  if (a.replaces) supersedePending(w, s, group);
  s.admit(a);
  s.lastAdmittedNs = received;
  a.state = preempt === 'queue' && busy ? 'queued' : 'accepted';
  // First reported in the result: sequenced and retained, replayed as action.status (AWP-CTL-008).
  a.status = s.sequence('action.status', statusParams(w, a));
  s.telemetry.admission.add(w.clock() - received);
  if (typeof p.basis_ts_mono_ns === 'number')
    s.telemetry.observationToAction.add(Math.max(0, received - p.basis_ts_mono_ns));
  w.reply(c.id, id, {
    action_id: actionId,
    state: a.state,
    status_seq: a.status.status_seq,
    received_ts_mono_ns: received,
    ts_mono_ns: a.status.ts_mono_ns,
  });
  w.activate(s);
  if (a.state === 'queued') s.queue(group).push(a);
  else if (w.lockstep)
    s.staged.push(a); // starts at the next advance (AWP-TIM-010)
  else execute(w, s, a);
}

/** `replace`: pre-execution actions of the group end `cancelled(superseded)` at admission (AWP-PRE-003/007). */
function supersedePending(w: WorldState, s: Session, group: string): void {
  for (const a of s.preExecution())
    if (a.group === group) finish(w, s, a, 'cancelled', { reason: 'superseded' });
}

/** The group's running action gives way to a replacing one; an abort under way ends as it would have. */
function preemptRunning(w: WorldState, s: Session, group: string): void {
  const r = s.running.get(group);
  if (r === undefined) return;
  if (r.abort === null) finish(w, s, r, 'preempted');
  else finish(w, s, r, r.abort.terminal, { reason: r.abort.reason, aborted: true });
}

/** Begin executing: the body moves; safe state is left when the first new action executes (AWP-SAF-008). */
function begin(w: WorldState, s: Session, a: ActionRecord): void {
  if (a.replaces) preemptRunning(w, s, a.group);
  s.running.set(a.group, a);
  a.state = 'executing';
  a.lastProgressNs = w.now;
  w.sim.start(a);
  if (s.safeState && s.embodiment !== null) {
    s.safeState = false;
    w.event(s, 'safe_state_exited', { embodiment: s.embodiment });
  }
}

/** Streaming: execution begins at once. */
function execute(w: WorldState, s: Session, a: ActionRecord): void {
  begin(w, s, a);
  report(w, s, a, { progress: a.duration === 'extended' ? 0 : undefined });
  if (a.duration === 'instant') finish(w, s, a, 'completed');
}

/** Queue heads move on once their group frees (AWP-PRE-002), re-checked for their deadline. */
function promote(w: WorldState, s: Session): void {
  for (const [group, q] of s.queues) {
    while (q.length > 0 && !s.running.has(group) && !s.staged.some((x) => x.group === group)) {
      const a = q.shift()!;
      if (a.deadlineNs !== undefined && w.clock() > a.deadlineNs) {
        finish(w, s, a, 'rejected', { reason: 'deadline_exceeded' });
        continue;
      }
      a.state = 'accepted';
      report(w, s, a);
      if (w.lockstep) s.staged.push(a);
      else execute(w, s, a);
    }
  }
}

/** Per simulation step: aborts completing, goals reached, progress, deadlines, queues, a pending close. */
export function updateActions(w: WorldState, s: Session): void {
  for (const a of [...s.running.values()]) {
    if (a.abort !== null) {
      const limit = w.decls.get(a.type)?.max_abort_ms;
      if (w.sim.atRest()) {
        finish(w, s, a, a.abort.terminal, { reason: a.abort.reason, aborted: true });
      } else if (!w.lockstep && limit !== undefined && w.now - a.abort.startedNs > limit * MS) {
        finish(w, s, a, 'failed', { reason: 'abort_failed', aborted: true }); // AWP-LIF-010
        enterSafeState(w, s);
      }
      continue;
    }
    if (a.state !== 'executing') continue;
    const extended = a.duration === 'extended';
    const started = a.startedThisAdvance; // lockstep: its executing status goes out now, after the step
    if (started) {
      a.startedThisAdvance = false;
      report(w, s, a, { progress: extended ? round4(w.sim.progress()) : undefined });
    }
    if (w.sim.reached(a)) {
      finish(w, s, a, 'completed', { progress: extended ? 1 : undefined });
    } else if (
      extended &&
      !started &&
      (w.lockstep || w.now - a.lastProgressNs >= w.config.progressIntervalMs * MS)
    ) {
      a.lastProgressNs = w.now;
      report(w, s, a, { progress: round4(w.sim.progress()) }); // per advance / >= 1 Hz (AWP-LIF-003)
    }
  }
  if (!w.lockstep) checkDeadlines(w, s);
  promote(w, s);
  if (s.closingReason !== null && s.running.size === 0 && w.sessions.has(s.id)) finalizeClose(w, s);
}

function checkDeadlines(w: WorldState, s: Session): void {
  const clock = w.clock();
  for (const a of [...s.actions.values()]) {
    if (a.deadlineNs === undefined || clock <= a.deadlineNs || isTerminal(a.state)) continue;
    if (isPreExecution(a.state)) {
      finish(w, s, a, 'rejected', { reason: 'deadline_exceeded' });
    } else if (a.state === 'executing' && a.abort === null) {
      a.abort = { terminal: 'failed', reason: 'deadline_exceeded', startedNs: w.now }; // after the safe abort
      w.sim.stop();
    }
  }
}

export function actionCancel(w: WorldState, c: ConnState, id: JsonRpcId, p: JsonObject): void {
  const s = c.session!;
  const a = s.actions.get(p.action_id as string);
  if (a === undefined) throw fail('AWP_ACTION_UNKNOWN', p.action_id as string);
  if (isPreExecution(a.state)) {
    s.unqueue(a);
    a.state = 'cancelled';
    a.status = s.sequence('action.status', statusParams(w, a, { reason: 'cancelled_by_agent' }));
    a.terminalNs = w.now;
  } else if (a.state === 'executing' && a.abort === null) {
    // AWP-LIF-005: cancelling while the safe abort runs; cancelled (with aborted_at_progress) follows.
    a.state = 'cancelling';
    a.abort = { terminal: 'cancelled', reason: 'cancelled_by_agent', startedNs: w.now };
    w.sim.stop();
    a.status = s.sequence('action.status', statusParams(w, a, { reason: 'cancelled_by_agent' }));
  }
  // Otherwise (cancelling, or terminal): nothing changes; the result reports the current state.
  const st = a.status;
  const withReason = a.state === 'cancelled' || a.state === 'failed' || a.state === 'rejected';
  w.reply(c.id, id, {
    action_id: a.action_id,
    state: st.state,
    status_seq: st.status_seq,
    ...(withReason && st.reason !== undefined && { reason: st.reason }),
  });
}

export function actionStatusPull(w: WorldState, c: ConnState, id: JsonRpcId, p: JsonObject): void {
  const a = c.session!.actions.get(p.action_id as string);
  if (a === undefined) throw fail('AWP_ACTION_UNKNOWN', p.action_id as string);
  w.reply(c.id, id, a.status);
}

/**
 * Advances one world.tick may ask for. They run at once (lockstep), each rendering every subscribed
 * per-tick channel, and this world runs in the edge's process (`awp-edge demo`): 10,000 ticks with the
 * grid's camera held the process 1.7 s and 240 MB, so an agent asks for more in several requests.
 */
export const MAX_TICKS_PER_REQUEST = 256;

export function worldTick(w: WorldState, c: ConnState, id: JsonRpcId, p: JsonObject): void {
  const s = c.session!;
  if (!w.lockstep) throw fail('AWP_TIME_MODEL_UNSUPPORTED', 'world.tick is lockstep-only');
  if (s.embodiment === null) throw fail('AWP_TICK_NOT_AUTHORIZED', 'observer sessions cannot tick');
  if (p.expected_tick !== w.tick) {
    // AWP-TIM-011: nothing advances.
    throw fail('AWP_TICK_MISMATCH', `expected_tick ${String(p.expected_tick)}, current ${w.tick}`, {
      extra: { tick: w.tick },
    });
  }
  const count = (p.count as number | undefined) ?? 1;
  if (count > MAX_TICKS_PER_REQUEST)
    throw failRpc('INVALID_PARAMS', `count must be at most ${MAX_TICKS_PER_REQUEST}`);
  for (let i = 0; i < count; i++) advanceTick(w);
  w.reply(c.id, id, { tick: w.tick });
}

/**
 * One advance (AWP-TIM-003): staged actions start, the body steps, statuses and events go out, then one frame with
 * the new tick on every subscribed per-tick channel — all before the tick result.
 */
function advanceTick(w: WorldState): void {
  w.tick += 1;
  w.advances += 1;
  for (const s of w.sessions.values()) {
    for (const a of s.staged.splice(0)) {
      if (a.state !== 'accepted') continue;
      begin(w, s, a);
      a.startedThisAdvance = true;
    }
  }
  w.sim.step(w.sim.tickNs ?? MS);
  for (const s of [...w.sessions.values()]) updateActions(w, s);
  for (const s of w.sessions.values())
    for (const g of s.grants.values()) if (g.rate_hz === null) emitFrame(w, s, g);
}
