/** The exception a request handler throws to answer its request with a JSON-RPC error. */
import { awpError, jsonRpcError } from '../protocol/errors.js';
import type { AwpErrorName, AwpErrorOptions, JsonRpcErrorKey, RpcErrorObject } from '../protocol/errors.js';

export class RpcFailure extends Error {
  constructor(readonly error: RpcErrorObject) {
    super(`${error.message}${typeof error.data?.detail === 'string' ? `: ${error.data.detail}` : ''}`);
  }
}

/** An AWP error (AWP-ERR-001: `data.retryable` always present). */
export function fail(
  name: AwpErrorName,
  detail?: string,
  opts: Omit<AwpErrorOptions, 'detail'> = {},
): RpcFailure {
  return new RpcFailure(awpError(name, { ...opts, ...(detail !== undefined && { detail }) }));
}

/** A reserved JSON-RPC error. */
export function failRpc(key: JsonRpcErrorKey, detail?: string): RpcFailure {
  return new RpcFailure(jsonRpcError(key, detail !== undefined ? { detail } : {}));
}
