/**
 * The JSON-RPC 2.0 envelope of the AWP control channel (channel 0): one message per text, no batches
 * (AWP-CTL-006). Parsing is JSON.parse plus cheap shape checks; schema validation of params/results is a
 * separate step (schemas.ts), because this runs on every control message.
 *
 * Unknown top-level members are ignored (AWP-VER-003). Each parsed message keeps the original text so a relay
 * can forward it unchanged, and the parsed object so nothing is lost.
 */
import { jsonRpcError, type RpcErrorObject } from './errors.js';
import { isRecord } from './json-object.js';

export type JsonRpcId = string | number;

interface Parsed {
  /** The text the message arrived in, for byte-faithful forwarding. */
  readonly text: string;
  /** The whole parsed envelope, including members this module does not model. */
  readonly raw: Readonly<Record<string, unknown>>;
}

export interface RpcRequest extends Parsed {
  readonly kind: 'request';
  readonly id: JsonRpcId;
  readonly method: string;
  /** undefined when the member is absent. */
  readonly params: unknown;
}

export interface RpcNotification extends Parsed {
  readonly kind: 'notification';
  readonly method: string;
  readonly params: unknown;
}

export interface RpcResult extends Parsed {
  readonly kind: 'result';
  readonly id: JsonRpcId;
  readonly result: unknown;
}

export interface RpcError extends Parsed {
  readonly kind: 'error';
  /** null when the peer could not determine the request id (e.g. it answered a parse error). */
  readonly id: JsonRpcId | null;
  readonly error: RpcErrorObject;
}

export type RpcMessage = RpcRequest | RpcNotification | RpcResult | RpcError;

/** Alias of RpcMessage. */
export type ParsedMessage = RpcMessage;

/** A text that is not a valid JSON-RPC message, with the error to answer it with. */
export interface RpcInvalid {
  readonly kind: 'invalid';
  readonly text: string;
  /** The request id when it could be recovered, else null (the JSON-RPC rule for unknown ids). */
  readonly id: JsonRpcId | null;
  /** -32700 (parse error) or -32600 (invalid request), `data.detail` naming the problem. */
  readonly error: RpcErrorObject;
  /**
   * True when the text looked like a response (had `result` or `error`): JSON-RPC answers requests and
   * unidentifiable texts, but a receiver should log rather than answer a broken response.
   */
  readonly wasResponse: boolean;
  /** Refused for its nesting depth before it was parsed (see nestsDeeperThan). */
  readonly tooDeep?: true;
}

export type ParseOutcome = RpcMessage | RpcInvalid;

/**
 * The longest string id taken. JSON-RPC sets none; ids are numbers or UUIDs in practice, and a peer's
 * id is held while its request is in flight (thousands per connection), so it must not be a megabyte.
 */
export const MAX_ID_CHARS = 256;

function isId(v: unknown): v is JsonRpcId {
  return typeof v === 'number' || (typeof v === 'string' && v.length <= MAX_ID_CHARS);
}

const ID_RULE = `a number or a string of at most ${MAX_ID_CHARS} characters`;

function invalid(
  text: string,
  key: 'PARSE_ERROR' | 'INVALID_REQUEST',
  detail: string,
  id: unknown,
  wasResponse = false,
): RpcInvalid {
  return {
    kind: 'invalid',
    text,
    id: isId(id) ? id : null,
    error: jsonRpcError(key, { detail }),
    wasResponse,
  };
}

/** Nesting allowed by default: AWP messages need about 10 levels; vendor params get room to spare. */
export const DEFAULT_MAX_JSON_DEPTH = 64;

/**
 * Whether a JSON text nests arrays/objects deeper than `limit`. One pass over the text, no allocation:
 * it runs before JSON.parse, so nothing (parse, stringify, schema walks) ever recurses into a hostile depth.
 */
export function nestsDeeperThan(text: string, limit: number): boolean {
  // A text cannot nest deeper than it has opening brackets: counting them with indexOf (native, and it
  // skips the rest of the text) settles most control messages, which hold a few, without the scan below.
  if (openersAtMost(text, limit)) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/** Whether `text` holds at most `limit` of `[` and `{` in all (brackets inside strings count too). */
function openersAtMost(text: string, limit: number): boolean {
  let n = 0;
  for (let i = text.indexOf('{'); i !== -1; i = text.indexOf('{', i + 1)) if (++n > limit) return false;
  for (let i = text.indexOf('['); i !== -1; i = text.indexOf('[', i + 1)) if (++n > limit) return false;
  return true;
}

/**
 * Parses one control-channel text. Never throws. A text nesting deeper than `maxDepth` is refused
 * (-32600) before it is parsed.
 */
export function parseMessage(text: string, maxDepth = DEFAULT_MAX_JSON_DEPTH): ParseOutcome {
  if (nestsDeeperThan(text, maxDepth)) {
    return {
      ...invalid(text, 'INVALID_REQUEST', `message nests deeper than ${maxDepth} levels`, null),
      tooDeep: true,
    };
  }
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch {
    return invalid(text, 'PARSE_ERROR', 'not valid JSON', null);
  }
  if (Array.isArray(value)) {
    return invalid(text, 'INVALID_REQUEST', 'batch requests are not allowed (AWP-CTL-006)', null);
  }
  if (!isRecord(value)) return invalid(text, 'INVALID_REQUEST', 'message must be a JSON object', null);

  const raw = value;
  const { id, method } = raw;
  const hasId = 'id' in raw;
  const isResponse = 'result' in raw || 'error' in raw;

  if (raw.jsonrpc !== '2.0') {
    return invalid(
      text,
      'INVALID_REQUEST',
      '\'jsonrpc\' must be "2.0"',
      id,
      isResponse && !('method' in raw),
    );
  }

  if ('method' in raw) {
    if (typeof method !== 'string') return invalid(text, 'INVALID_REQUEST', "'method' must be a string", id);
    if (isResponse) {
      return invalid(text, 'INVALID_REQUEST', "a request cannot carry 'result' or 'error'", id);
    }
    const params = raw.params;
    if (params !== undefined && (typeof params !== 'object' || params === null)) {
      return invalid(text, 'INVALID_REQUEST', "'params' must be an object or array", id);
    }
    if (!hasId) return { kind: 'notification', method, params, text, raw };
    // A null id is legal JSON-RPC but indistinguishable from "unknown id" in answers; AWP requests need one.
    if (!isId(id)) return invalid(text, 'INVALID_REQUEST', `'id' must be ${ID_RULE}`, id);
    return { kind: 'request', id, method, params, text, raw };
  }

  if (!isResponse) {
    return invalid(text, 'INVALID_REQUEST', "message has neither 'method' nor 'result'/'error'", id);
  }
  if ('result' in raw && 'error' in raw) {
    return invalid(text, 'INVALID_REQUEST', "a response cannot carry both 'result' and 'error'", id, true);
  }
  if ('result' in raw) {
    if (!isId(id)) return invalid(text, 'INVALID_REQUEST', `a result's 'id' must be ${ID_RULE}`, id, true);
    return { kind: 'result', id, result: raw.result, text, raw };
  }
  const error = raw.error;
  if (!isRecord(error) || !Number.isInteger(error.code) || typeof error.message !== 'string') {
    return invalid(
      text,
      'INVALID_REQUEST',
      "'error' must be an object with integer 'code' and string 'message'",
      id,
      true,
    );
  }
  if (id !== null && !isId(id)) {
    return invalid(text, 'INVALID_REQUEST', `an error's 'id' must be null or ${ID_RULE}`, id, true);
  }
  // A non-object `data` (legal JSON-RPC, never AWP) stays in `raw` only.
  const data = isRecord(error.data) ? error.data : undefined;
  const code = error.code as number; // Number.isInteger checked above
  const parsed: RpcErrorObject =
    data === undefined ? { code, message: error.message } : { code, message: error.message, data };
  return { kind: 'error', id, error: parsed, text, raw };
}

/** Request text; `params` omitted when undefined. */
export function requestText(id: JsonRpcId, method: string, params?: unknown): string {
  return JSON.stringify(
    params === undefined ? { jsonrpc: '2.0', id, method } : { jsonrpc: '2.0', id, method, params },
  );
}

/** Notification text; `params` omitted when undefined. */
export function notificationText(method: string, params?: unknown): string {
  return JSON.stringify(
    params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params },
  );
}

/** A notification's text but for its `status_seq`, which each session stamps with its own (AWP-EVT-001). */
export type Sequenced = (status_seq: number) => string;

/**
 * Serialises a notification once for any number of sessions: a hub hands a world.event to each of its
 * observers, and re-serialising it for each cost 9.8 ms per observer for a 1.9 MB event. `status_seq`
 * goes last, so each session's text is a shared head and its own number.
 */
export function sequencedNotification(method: string, params: Record<string, unknown>): Sequenced {
  const rest = { ...params };
  delete rest.status_seq;
  const head = notificationText(method, { ...rest, status_seq: 0 }).slice(0, -'0}}'.length);
  return (status_seq) => `${head}${status_seq}}}`;
}

/** Successful response text. */
export function resultText(id: JsonRpcId, result: unknown): string {
  return JSON.stringify({ jsonrpc: '2.0', id, result });
}

/** Error response text; `id` is null when the request's id is unknown. */
export function errorText(id: JsonRpcId | null, error: RpcErrorObject): string {
  return JSON.stringify({ jsonrpc: '2.0', id, error });
}

/** The error response to send for an invalid text. */
export function invalidResponseText(outcome: RpcInvalid): string {
  return errorText(outcome.id, outcome.error);
}
