/**
 * The AWP v0.1 method table (digest §1.2 and §4): who sends each method, whether it is a request, a
 * notification or both (action.status), which schema file describes its params and result, and which forms
 * carry a freshly assigned `status_seq` (AWP-CTL-008).
 */

export type Direction = 'agent->world' | 'world->agent' | 'either';

/** `approver`: travels on an approver connection (no session), never on an agent's session (AWP-APR-007). */
export type Party = 'session' | 'approver';

/** The sending side of one message, as in the wire traces. */
export type Sender = 'agent' | 'world';

/** Which part of a JSON-RPC exchange a schema describes. */
export type MessagePart = 'request' | 'notification' | 'result';

export interface RequestForm {
  readonly direction: Direction;
  /** Schema file (relative to schemas/v0.1) of `params`; an omitted `params` is validated as `{}`. */
  readonly params: string;
  readonly result: string;
  /** The result reports a transition with a newly assigned `status_seq` (action.submit, action.cancel). */
  readonly resultCarriesStatusSeq: boolean;
}

export interface NotificationForm {
  readonly direction: Direction;
  readonly params: string;
  /** The notification is an item of the per-session `status_seq` sequence. */
  readonly carriesStatusSeq: boolean;
}

export interface MethodSpec {
  readonly method: string;
  readonly party: Party;
  readonly request?: RequestForm;
  readonly notification?: NotificationForm;
  /** `capabilities` key the world must advertise, else the method is unknown (-32601, AWP-VER-007). */
  readonly capability?: 'snapshot' | 'task';
}

/** Schema of every JSON-RPC error object (AWP-ERR-001). */
export const ERROR_SCHEMA = 'error.schema.json';

const A2W = 'agent->world';
const W2A = 'world->agent';

function req(
  params: string,
  result: string,
  direction: Direction = A2W,
  resultCarriesStatusSeq = false,
): RequestForm {
  return {
    direction,
    params: `${params}.schema.json`,
    result: `${result}.schema.json`,
    resultCarriesStatusSeq,
  };
}

function note(params: string, direction: Direction, carriesStatusSeq = false): NotificationForm {
  return { direction, params: `${params}.schema.json`, carriesStatusSeq };
}

const TABLE: readonly MethodSpec[] = [
  { method: 'initialize', party: 'session', request: req('agent-manifest', 'world-manifest') },
  { method: 'world.manifest', party: 'session', request: req('empty-result', 'world-manifest') },
  { method: 'ping', party: 'session', request: req('ping', 'ping-result', 'either') },
  { method: 'session.open', party: 'session', request: req('session-open', 'session-ready') },
  { method: 'session.resume', party: 'session', request: req('session-resume', 'session-ready') },
  { method: 'session.close', party: 'session', request: req('empty-result', 'empty-result') },
  {
    method: 'session.transfer',
    party: 'session',
    request: req('session-transfer', 'session-transfer-result'),
  },
  { method: 'session.state', party: 'session', notification: note('session-state', W2A, true) },
  { method: 'session.telemetry', party: 'session', notification: note('session-telemetry', W2A) },
  { method: 'obs.subscribe', party: 'session', request: req('subscribe', 'subscribe-result') },
  { method: 'obs.unsubscribe', party: 'session', request: req('unsubscribe', 'subscribe-result') },
  { method: 'obs.frame', party: 'session', notification: note('frame-inline', W2A) },
  { method: 'cmd.frame', party: 'session', notification: note('frame-inline', A2W) },
  { method: 'obs.report', party: 'session', notification: note('obs-report', A2W) },
  {
    method: 'action.submit',
    party: 'session',
    request: req('action-submit', 'action-submit-result', A2W, true),
  },
  {
    method: 'action.cancel',
    party: 'session',
    request: req('action-ref', 'action-cancel-result', A2W, true),
  },
  {
    method: 'action.status',
    party: 'session',
    // The pull result repeats the latest notification (same status_seq); it assigns none.
    request: req('action-ref', 'action-status'),
    notification: note('action-status', W2A, true),
  },
  { method: 'world.event', party: 'session', notification: note('world-event', W2A, true) },
  { method: 'world.tick', party: 'session', request: req('tick', 'tick-result') },
  {
    method: 'world.snapshot',
    party: 'session',
    capability: 'snapshot',
    request: req('empty-result', 'snapshot-result'),
  },
  {
    method: 'world.restore',
    party: 'session',
    capability: 'snapshot',
    request: req('restore', 'reset-result'),
  },
  { method: 'world.reset', party: 'session', request: req('reset', 'reset-result') },
  {
    method: 'task.update',
    party: 'session',
    capability: 'task',
    request: req('task-update', 'empty-result'),
  },
  {
    method: 'safety.approval_requested',
    party: 'approver',
    notification: note('approval-requested', W2A),
  },
  {
    method: 'safety.approval.respond',
    party: 'approver',
    request: req('approval-respond', 'empty-result'),
  },
];

const BY_NAME: ReadonlyMap<string, MethodSpec> = new Map(TABLE.map((m) => [m.method, m]));

/** Every AWP v0.1 method, in table order. */
export const AWP_METHODS: readonly MethodSpec[] = TABLE;

/** The table entry for a method, or undefined for vendor or unknown methods. */
export function methodSpec(method: string): MethodSpec | undefined {
  return BY_NAME.get(method);
}

export function isAwpMethod(method: string): boolean {
  return BY_NAME.has(method);
}

/**
 * Schema file for one part of an exchange: the params of a request or notification, or the result of a
 * request (`method` = the request's method). undefined when the method has no such form.
 */
export function schemaFileFor(method: string, part: MessagePart): string | undefined {
  const spec = BY_NAME.get(method);
  if (spec === undefined) return undefined;
  if (part === 'notification') return spec.notification?.params;
  if (part === 'request') return spec.request?.params;
  return spec.request?.result;
}

function allows(direction: Direction, sender: Sender): boolean {
  return direction === 'either' || direction === (sender === 'agent' ? A2W : W2A);
}

/**
 * Whether `sender` may send this method in this form (a request or notification). Approver connections count
 * as the agent side. false for unknown methods.
 */
export function maySend(method: string, part: 'request' | 'notification', sender: Sender): boolean {
  const spec = BY_NAME.get(method);
  const form = part === 'request' ? spec?.request : spec?.notification;
  return form !== undefined && allows(form.direction, sender);
}
