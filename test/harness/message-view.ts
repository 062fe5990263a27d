/** Plain reads of JSON-RPC messages (the harness deliberately does not use src/protocol). */
import type { Json, JsonObject } from './trace-types.js';
import { isJsonObject } from './trace-types.js';

export type RpcId = string | number;

export function methodOf(msg: JsonObject): string | undefined {
  return typeof msg.method === 'string' ? msg.method : undefined;
}

export function idOf(msg: JsonObject): RpcId | undefined {
  const id = msg.id;
  return typeof id === 'string' || typeof id === 'number' ? id : undefined;
}

export function isRequest(msg: JsonObject): boolean {
  return methodOf(msg) !== undefined && idOf(msg) !== undefined;
}

export function isResponse(msg: JsonObject): boolean {
  return methodOf(msg) === undefined && ('result' in msg || 'error' in msg);
}

export function paramsOf(msg: JsonObject): JsonObject | undefined {
  return isJsonObject(msg.params) ? msg.params : undefined;
}

export function resultOf(msg: JsonObject): JsonObject | undefined {
  return isJsonObject(msg.result) ? msg.result : undefined;
}

/** `status_seq` carried in params (notifications) or result (submit/cancel results), if any. */
export function statusSeqOf(msg: JsonObject): number | undefined {
  const seq = paramsOf(msg)?.status_seq ?? resultOf(msg)?.status_seq;
  return typeof seq === 'number' ? seq : undefined;
}

/** True for a `session.ready` object: the result of session.open or session.resume. */
export function isSessionReadyResult(msg: JsonObject): boolean {
  const result = resultOf(msg);
  return (
    result !== undefined && typeof result.session_id === 'string' && typeof result.session_token === 'string'
  );
}

export function stringField(obj: JsonObject | undefined, key: string): string | undefined {
  const value: Json | undefined = obj?.[key];
  return typeof value === 'string' ? value : undefined;
}
