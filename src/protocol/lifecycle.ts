/**
 * The action lifecycle (spec/action-lifecycle.yaml, vendored as action-lifecycle.json): states, the terminal
 * set, and the legal transitions with the reasons each admits (AWP-LIF-001). Built once from the vendored data.
 */
import { loadLifecycleData, type LifecycleTransitionData } from './spec-data.js';

/** `submitted` is internal (never on the wire); the others are the wire's `action_state` values. */
export type ActionState =
  | 'submitted'
  | 'pending_approval'
  | 'queued'
  | 'accepted'
  | 'executing'
  | 'cancelling'
  | 'rejected'
  | 'completed'
  | 'failed'
  | 'preempted'
  | 'cancelled';

export type StateClass = 'transient' | 'pre-execution' | 'execution' | 'terminal';

export interface LifecycleTransition {
  readonly from: ActionState;
  readonly to: ActionState;
  readonly label: string;
  /** `error`: this transition is reported as a JSON-RPC error, never as a status (submitted -> rejected). */
  readonly wire?: 'error';
  /** Registry reasons this transition admits; undefined when the table lists none. */
  readonly reasons?: ReadonlySet<string>;
}

const STATE_CLASSES: readonly StateClass[] = ['transient', 'pre-execution', 'execution', 'terminal'];

/** Vendor reasons (`x-<vendor>.…`) are allowed wherever a reason is (status reason registry). */
const VENDOR_REASON = /^x-[a-z0-9]+\.[A-Za-z0-9_.-]+$/;

interface Table {
  readonly classes: ReadonlyMap<ActionState, StateClass>;
  readonly preExecutionCancel: ReadonlySet<string>;
  readonly byEdge: ReadonlyMap<string, LifecycleTransition>;
  readonly all: readonly LifecycleTransition[];
}

let table: Table | undefined;

function edgeKey(from: string, to: string): string {
  return `${from}>${to}`;
}

function buildTable(): Table {
  const data = loadLifecycleData();
  const classes = new Map<ActionState, StateClass>();
  for (const [state, cls] of Object.entries(data.states)) {
    if (!(STATE_CLASSES as readonly string[]).includes(cls)) {
      throw new Error(`action-lifecycle.json: state ${state} has unknown class ${cls}`);
    }
    classes.set(state as ActionState, cls as StateClass); // the vendored table defines the state names
  }
  const asState = (s: string): ActionState => {
    if (!classes.has(s as ActionState)) throw new Error(`action-lifecycle.json: unknown state ${s}`);
    return s as ActionState;
  };
  const all = data.transitions.map((t: LifecycleTransitionData): LifecycleTransition => ({
    from: asState(t.from),
    to: asState(t.to),
    label: t.label,
    ...(t.wire === 'error' && { wire: 'error' as const }),
    ...(t.reasons !== undefined && { reasons: new Set(t.reasons) }),
  }));
  return {
    classes,
    preExecutionCancel: new Set(data.pre_execution_cancel),
    byEdge: new Map(all.map((t) => [edgeKey(t.from, t.to), t])),
    all,
  };
}

function getTable(): Table {
  table ??= buildTable();
  return table;
}

/** Every action state, in the table's order. */
export function actionStates(): readonly ActionState[] {
  return [...getTable().classes.keys()];
}

export function stateClass(state: string): StateClass | undefined {
  return getTable().classes.get(state as ActionState);
}

/** rejected, completed, failed, preempted, cancelled. */
export function isTerminalState(state: string): boolean {
  return stateClass(state) === 'terminal';
}

export function terminalStates(): ReadonlySet<ActionState> {
  return new Set(actionStates().filter((s) => stateClass(s) === 'terminal'));
}

/** Reasons that end a pre-execution action as `cancelled`. */
export function preExecutionCancelReasons(): ReadonlySet<string> {
  return getTable().preExecutionCancel;
}

export function allTransitions(): readonly LifecycleTransition[] {
  return getTable().all;
}

export function transitionsFrom(from: string): readonly LifecycleTransition[] {
  return getTable().all.filter((t) => t.from === from);
}

export function findTransition(from: string, to: string): LifecycleTransition | undefined {
  return getTable().byEdge.get(edgeKey(from, to));
}

/**
 * Whether `from -> to` is in the table (a same-state progress report is not a transition). When a `reason` is
 * given and the table lists reasons for the edge, the reason must be one of them or a vendor `x-<vendor>.`
 * reason; an edge without a reason list (e.g. executing -> completed) does not constrain the reason.
 */
export function isLegalTransition(from: string, to: string, reason?: string): boolean {
  const t = findTransition(from, to);
  if (t === undefined) return false;
  if (reason === undefined || t.reasons === undefined) return true;
  return t.reasons.has(reason) || VENDOR_REASON.test(reason);
}
