/**
 * Normalisation for comparing what a side received with the trace when a proxy sits in between: it ignores
 * only what the spec calls illustrative or what a proxy legitimately re-issues: `session_token` values
 * (session.ready results and session.resume params) and the contents of `stream_endpoints` in session.ready
 * results, except that the list must still end with the inline binding.
 */
import type { Json, JsonObject } from './trace-types.js';
import { cloneJson, isJsonObject } from './trace-types.js';
import { jsonEqual } from './json-diff.js';
import { isSessionReadyResult, methodOf } from './message-view.js';

export const TOKEN_PLACEHOLDER = '<session_token>';
const INLINE: JsonObject = { binding: 'inline' };
/** What any stream_endpoints list that ends with the inline binding normalises to. */
export const ENDPOINTS_PLACEHOLDER: Json[] = ['<stream_endpoints>', INLINE];

export function normaliseIllustrative(msg: Json): Json {
  if (!isJsonObject(msg)) return msg;
  const out = cloneJson(msg);
  if (isSessionReadyResult(out) && isJsonObject(out.result)) {
    out.result.session_token = TOKEN_PLACEHOLDER;
    const endpoints = out.result.stream_endpoints;
    // A list not ending with inline is left as it is, so the comparison shows it.
    if (
      Array.isArray(endpoints) &&
      endpoints.length > 0 &&
      jsonEqual(endpoints[endpoints.length - 1]!, INLINE)
    ) {
      out.result.stream_endpoints = cloneJson(ENDPOINTS_PLACEHOLDER);
    }
  }
  if (
    methodOf(out) === 'session.resume' &&
    isJsonObject(out.params) &&
    typeof out.params.session_token === 'string'
  ) {
    out.params.session_token = TOKEN_PLACEHOLDER;
  }
  return out;
}

/** The identity: exact comparison (the default when the agent talks straight to the world). */
export function exactComparison(msg: Json): Json {
  return msg;
}
