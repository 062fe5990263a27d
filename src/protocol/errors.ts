/**
 * The AWP error-code table (api-reference/error-codes) and the JSON-RPC reserved codes, plus constructors for
 * spec-shaped error objects. AWP codes (1000-4999) always carry `data.retryable` (AWP-ERR-001); `message` is
 * the code's name.
 */

/** The JSON-RPC error member: `{ code, message, data? }`. */
export interface RpcErrorObject {
  readonly code: number;
  readonly message: string;
  readonly data?: Readonly<Record<string, unknown>>;
}

export const AWP_ERROR_CODES = {
  AWP_VERSION_UNSUPPORTED: 1001,
  AWP_MALFORMED: 1002,
  AWP_EMBODIMENT_UNAVAILABLE: 2001,
  AWP_TIME_MODEL_UNSUPPORTED: 2002,
  AWP_SESSION_EXPIRED: 2003,
  AWP_SESSION_EXISTS: 2004,
  AWP_SESSION_UNKNOWN: 2005,
  AWP_INTEGER_RANGE: 2006,
  AWP_CHANNEL_UNKNOWN: 2007,
  AWP_PARAMS_INVALID: 3001,
  AWP_BUSY: 3002,
  AWP_QUEUE_FULL: 3003,
  AWP_ACTION_ID_CONFLICT: 3004,
  AWP_ESTOP_ACTIVE: 3005,
  AWP_TICK_NOT_AUTHORIZED: 3006,
  AWP_STALE_INTENT: 3007,
  AWP_ACTION_UNKNOWN: 3008,
  AWP_TICK_MISMATCH: 3009,
  AWP_FORBIDDEN: 4001,
  AWP_ENVELOPE_EXCEEDED: 4002,
  AWP_APPROVAL_DENIED: 4003,
  AWP_APPROVAL_TIMEOUT: 4004,
} as const;

export type AwpErrorName = keyof typeof AWP_ERROR_CODES;
export type AwpErrorCode = (typeof AWP_ERROR_CODES)[AwpErrorName];

export interface AwpErrorDef {
  readonly code: AwpErrorCode;
  readonly name: AwpErrorName;
  /**
   * Default `data.retryable`. `varies` (only AWP_ENVELOPE_EXCEEDED): `true` with `retry_after_ms` for a rate
   * limit (AWP-ENV-004), `false` for an envelope `reject`.
   */
  readonly retryable: boolean | 'varies';
  readonly meaning: string;
}

function def(name: AwpErrorName, retryable: boolean | 'varies', meaning: string): AwpErrorDef {
  return { code: AWP_ERROR_CODES[name], name, retryable, meaning };
}

/** Every AWP error code, in code order. */
export const AWP_ERRORS: readonly AwpErrorDef[] = [
  def('AWP_VERSION_UNSUPPORTED', false, 'no mutually supported protocol version'),
  def('AWP_MALFORMED', false, 'message violates the envelope or a schema'),
  def('AWP_EMBODIMENT_UNAVAILABLE', true, 'embodiment bound elsewhere or offline'),
  def('AWP_TIME_MODEL_UNSUPPORTED', false, 'requested mode not offered'),
  def('AWP_SESSION_EXPIRED', false, 'token invalid, reconnect window passed, or the session is closing'),
  def('AWP_SESSION_EXISTS', false, 'this control connection already carries a session'),
  def('AWP_SESSION_UNKNOWN', false, 'the world no longer holds the session'),
  def('AWP_INTEGER_RANGE', false, 'a 64-bit field exceeded 2^53-1'),
  def('AWP_CHANNEL_UNKNOWN', false, 'channel not declared in the manifest'),
  def('AWP_PARAMS_INVALID', false, "params fail the type's schema"),
  def('AWP_BUSY', true, 'reject policy and the group is busy, or a barrier call is pending'),
  def('AWP_QUEUE_FULL', true, 'queue depth max_queue exceeded'),
  def('AWP_ACTION_ID_CONFLICT', false, 'same action_id, different content'),
  def('AWP_ESTOP_ACTIVE', true, 'admission suspended while e-stop engaged'),
  def('AWP_TICK_NOT_AUTHORIZED', false, 'caller lacks tick authority'),
  def('AWP_STALE_INTENT', true, 'basis too old, valid_until_ns passed, or required basis missing'),
  def('AWP_ACTION_UNKNOWN', false, 'action_id never seen or past retention'),
  def('AWP_TICK_MISMATCH', false, 'expected_tick differs from the current tick'),
  def('AWP_FORBIDDEN', false, 'not granted for this session'),
  def('AWP_ENVELOPE_EXCEEDED', 'varies', 'envelope limit exceeded'),
  def('AWP_APPROVAL_DENIED', false, 'approver denied'),
  def('AWP_APPROVAL_TIMEOUT', true, 'no approver response in time'),
];

const BY_CODE: ReadonlyMap<number, AwpErrorDef> = new Map(AWP_ERRORS.map((d) => [d.code, d]));

/** JSON-RPC 2.0 reserved codes the edge uses. */
export const JSONRPC_ERROR_CODES = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
} as const;

export type JsonRpcErrorKey = keyof typeof JSONRPC_ERROR_CODES;
export type JsonRpcErrorCode = (typeof JSONRPC_ERROR_CODES)[JsonRpcErrorKey];

/** Standard JSON-RPC messages; each matches error.schema's message pattern. */
export const JSONRPC_ERROR_MESSAGES: Readonly<Record<JsonRpcErrorCode, string>> = {
  [-32700]: 'Parse error',
  [-32600]: 'Invalid Request',
  [-32601]: 'Method not found',
  [-32602]: 'Invalid params',
  [-32603]: 'Internal error',
};

/** WebSocket close code used with reason `AWP_MALFORMED` or `AWP_INTEGER_RANGE` (AWP-CTL-009, AWP-TRN-013). */
export const WS_CLOSE_PROTOCOL_ERROR = 1002;

/** The table entry for an AWP code, or undefined for any other code. */
export function awpErrorByCode(code: number): AwpErrorDef | undefined {
  return BY_CODE.get(code);
}

/** AWP codes occupy 1000-4999 (AWP-ERR-001). */
export function isAwpCode(code: number): boolean {
  return Number.isInteger(code) && code >= 1000 && code <= 4999;
}

/** JSON-RPC reserves -32768..-32000. */
export function isReservedJsonRpcCode(code: number): boolean {
  return Number.isInteger(code) && code >= -32768 && code <= -32000;
}

export interface AwpErrorOptions {
  readonly detail?: string;
  /** Overrides the table default; required in spirit for AWP_ENVELOPE_EXCEEDED (see AwpErrorDef.retryable). */
  readonly retryable?: boolean;
  readonly retry_after_ms?: number;
  /** Method-specific members of `data`, e.g. `{ tick }` on AWP_TICK_MISMATCH. Cannot override the fields above. */
  readonly extra?: Readonly<Record<string, unknown>>;
}

/**
 * A spec-shaped AWP error: `{ code, message: NAME, data: { retryable, detail?, retry_after_ms?, ...extra } }`.
 * For `varies` codes without an explicit `retryable`, a `retry_after_ms` implies `true` (the rate-limit case,
 * AWP-ENV-004); otherwise `false`. A string argument is shorthand for `{ detail }`.
 */
export function awpError(name: AwpErrorName, detailOrOpts: string | AwpErrorOptions = {}): RpcErrorObject {
  const opts: AwpErrorOptions = typeof detailOrOpts === 'string' ? { detail: detailOrOpts } : detailOrOpts;
  const entry = BY_CODE.get(AWP_ERROR_CODES[name])!;
  const retryable =
    opts.retryable ?? (entry.retryable === 'varies' ? opts.retry_after_ms !== undefined : entry.retryable);
  const data: Record<string, unknown> = { ...opts.extra, retryable };
  if (opts.detail !== undefined) data.detail = opts.detail;
  if (opts.retry_after_ms !== undefined) data.retry_after_ms = opts.retry_after_ms;
  return { code: entry.code, message: name, data };
}

/** A JSON-RPC reserved error (`data` omitted unless `detail` or `data` is given). */
export function jsonRpcError(
  key: JsonRpcErrorKey,
  opts: { readonly detail?: string; readonly data?: Readonly<Record<string, unknown>> } = {},
): RpcErrorObject {
  const code = JSONRPC_ERROR_CODES[key];
  const message = JSONRPC_ERROR_MESSAGES[code];
  if (opts.detail === undefined && opts.data === undefined) return { code, message };
  return { code, message, data: { ...opts.data, ...(opts.detail !== undefined && { detail: opts.detail }) } };
}

/**
 * Whether a request refused with this error may be resent unchanged (AWP-ERR-001): `data.retryable` when it
 * is a boolean; otherwise false (reserved JSON-RPC errors are non-retryable unless data says otherwise).
 */
export function isRetryable(error: RpcErrorObject): boolean {
  return error.data?.retryable === true;
}

/**
 * Errors the edge itself answers where the spec has no code: JSON-RPC reserves -32000..-32099 for
 * implementation-defined server errors. All are retryable: they describe the edge's state, not the request.
 */
export const EDGE_ERROR_CODES = {
  UPSTREAM_UNAVAILABLE: -32001,
  MANIFEST_CHANGED: -32002,
  STORE_UNAVAILABLE: -32003,
  BUDGET_EXCEEDED: -32004,
} as const;

export function edgeError(name: keyof typeof EDGE_ERROR_CODES, detail: string): RpcErrorObject {
  return { code: EDGE_ERROR_CODES[name], message: `AWP_EDGE_${name}`, data: { retryable: true, detail } };
}
