import { describe, expect, it } from 'vitest';
import {
  actionStates,
  allTransitions,
  findTransition,
  isLegalTransition,
  isTerminalState,
  preExecutionCancelReasons,
  stateClass,
  terminalStates,
  transitionsFrom,
} from '../../src/protocol/lifecycle.js';
import { parseMessage } from '../../src/protocol/jsonrpc.js';
import { loadTraces, type Trace } from '../harness/spec-data.js';

describe('action lifecycle table', () => {
  it('has the eleven states and the five terminal ones', () => {
    expect(actionStates()).toHaveLength(11);
    expect([...terminalStates()].sort()).toEqual([
      'cancelled',
      'completed',
      'failed',
      'preempted',
      'rejected',
    ]);
    expect(stateClass('submitted')).toBe('transient');
    expect(stateClass('cancelling')).toBe('execution');
    expect(isTerminalState('executing')).toBe(false);
    expect(stateClass('done')).toBeUndefined();
  });

  it('leaves no terminal state', () => {
    for (const s of terminalStates()) expect(transitionsFrom(s)).toEqual([]);
  });

  it('reports submitted -> rejected as a JSON-RPC error, never a status', () => {
    expect(findTransition('submitted', 'rejected')?.wire).toBe('error');
    expect(allTransitions().filter((t) => t.wire === 'error')).toHaveLength(1);
  });

  it('uses the pre-execution cancel reasons for every pre-execution -> cancelled edge', () => {
    for (const from of ['pending_approval', 'queued', 'accepted']) {
      expect(findTransition(from, 'cancelled')?.reasons).toEqual(preExecutionCancelReasons());
    }
  });
});

describe('isLegalTransition', () => {
  it('AWP-LIF-001 accepts table transitions with their reasons', () => {
    expect(isLegalTransition('submitted', 'accepted')).toBe(true);
    expect(isLegalTransition('executing', 'cancelling', 'cancelled_by_agent')).toBe(true);
    expect(isLegalTransition('cancelling', 'failed', 'e_stop')).toBe(true);
    expect(isLegalTransition('pending_approval', 'rejected', 'approval_timeout')).toBe(true);
    expect(isLegalTransition('executing', 'completed')).toBe(true);
    expect(isLegalTransition('executing', 'failed', 'x-acme.overheat')).toBe(true);
  });

  it('AWP-LIF-001 refuses transitions outside the table', () => {
    expect(isLegalTransition('completed', 'executing')).toBe(false);
    expect(isLegalTransition('cancelled', 'cancelled', 'e_stop')).toBe(false);
    expect(isLegalTransition('queued', 'completed')).toBe(false);
    expect(isLegalTransition('accepted', 'failed', 'e_stop')).toBe(false);
    expect(isLegalTransition('executing', 'rejected', 'deadline_exceeded')).toBe(false);
    expect(isLegalTransition('executing', 'executing')).toBe(false);
    expect(isLegalTransition('nowhere', 'executing')).toBe(false);
  });

  it('AWP-LIF-001 refuses a registry reason the edge does not admit', () => {
    expect(isLegalTransition('executing', 'failed', 'approval_denied')).toBe(false);
    expect(isLegalTransition('queued', 'cancelled', 'abort_failed')).toBe(false);
    expect(isLegalTransition('executing', 'preempted', 'superseded')).toBe(false);
    expect(isLegalTransition('accepted', 'rejected', 'forbidden')).toBe(false);
  });
});

interface Observed {
  readonly trace: string;
  readonly line: number;
  readonly action: string;
  readonly from: string;
  readonly to: string;
  readonly reason?: string;
}

/**
 * Every state change the trace reports, per action: admissions (submit results, from `submitted`), cancel
 * results and status notifications. A status_seq seen before is a redelivery (replay, idempotent result),
 * and a same-state report is a progress update; neither is a transition.
 */
function transitionsIn(trace: Trace): Observed[] {
  const states = new Map<string, string>();
  const seen = new Set<number>();
  const pending = new Map<string, string>();
  const out: Observed[] = [];
  for (const line of trace.lines) {
    const given = line.given?.actions;
    if (typeof given === 'object' && given !== null) {
      for (const [id, a] of Object.entries(given as Record<string, { state: string; status_seq: number }>)) {
        states.set(id, a.state);
        seen.add(a.status_seq);
      }
    }
    if (line.msg === undefined) continue;
    const msg = parseMessage(JSON.stringify(line.msg));
    let report: Record<string, unknown> | undefined;
    if (msg.kind === 'request') pending.set(`${String(line.from)}:${String(msg.id)}`, msg.method);
    if (msg.kind === 'notification' && msg.method === 'action.status')
      report = msg.params as Record<string, unknown>;
    if (msg.kind === 'result') {
      const method = pending.get(`${line.from === 'agent' ? 'world' : 'agent'}:${String(msg.id)}`);
      if (method === 'action.submit' || method === 'action.cancel')
        report = msg.result as Record<string, unknown>;
    }
    if (report === undefined) continue;
    const {
      action_id: action,
      state: to,
      status_seq: seq,
      reason,
    } = report as {
      action_id: string;
      state: string;
      status_seq: number;
      reason?: string;
    };
    if (seen.has(seq)) continue;
    seen.add(seq);
    const from = states.get(action) ?? 'submitted';
    states.set(action, to);
    if (from === to) continue;
    out.push({
      trace: trace.name,
      line: line.line,
      action,
      from,
      to,
      ...(reason !== undefined && { reason }),
    });
  }
  return out;
}

describe('spec traces', () => {
  const observed = loadTraces().flatMap(transitionsIn);

  it('report a real set of transitions', () => {
    const edges = new Set(observed.map((o) => `${o.from}>${o.to}`));
    expect(edges.size).toBeGreaterThanOrEqual(10);
  });

  it.each(observed.map((o) => [`${o.trace}:${o.line} ${o.action} ${o.from} -> ${o.to}`, o] as const))(
    'AWP-LIF-001 %s is a legal transition',
    (_label, o) => {
      expect(isLegalTransition(o.from, o.to, o.reason)).toBe(true);
    },
  );

  it('AWP-LIF-001 report at most one terminal state per action', () => {
    const terminals = new Map<string, number>();
    for (const o of observed) {
      if (isTerminalState(o.to))
        terminals.set(`${o.trace}/${o.action}`, (terminals.get(`${o.trace}/${o.action}`) ?? 0) + 1);
    }
    expect([...terminals.values()].every((n) => n === 1)).toBe(true);
  });
});
