/** Relay transforms that imitate what a proxy legitimately changes, for testing the normalised comparison. */
import type { JsonObject } from './trace-types.js';
import { isJsonObject } from './trace-types.js';
import type { RelayTransform } from './pass-through-relay.js';

export interface ReissueOptions {
  /** Map the relay's token back to the world's in session.resume (a correct proxy does). */
  readonly mapResumeToken: boolean;
  /** Keep `{binding: "inline"}` last in the re-issued stream_endpoints (a correct proxy does). */
  readonly keepInline: boolean;
}

/** Hands the agent the relay's own session token (`st_relay_<n>`) and stream endpoints in every
 * session.ready, and (optionally) maps the token back when the agent resumes. */
export function reissueTokensAndEndpoints(options: ReissueOptions): RelayTransform {
  const worldTokenOf = new Map<string, string>();
  return (direction, msg) => {
    const result = msg.result;
    if (direction === 'world-to-agent' && isJsonObject(result)) {
      const worldToken = result.session_token;
      if (typeof worldToken === 'string' && typeof result.session_id === 'string') {
        const relayToken = `st_relay_${worldTokenOf.size + 1}`;
        worldTokenOf.set(relayToken, worldToken);
        const endpoints: JsonObject[] = [
          { binding: 'ws', url: 'ws://127.0.0.1:9/relay-stream', channels: [1] },
        ];
        if (options.keepInline) endpoints.push({ binding: 'inline' });
        return { ...msg, result: { ...result, session_token: relayToken, stream_endpoints: endpoints } };
      }
    }
    const params = msg.params;
    if (
      direction === 'agent-to-world' &&
      options.mapResumeToken &&
      msg.method === 'session.resume' &&
      isJsonObject(params) &&
      typeof params.session_token === 'string'
    ) {
      const worldToken = worldTokenOf.get(params.session_token) ?? 'unknown';
      return { ...msg, params: { ...params, session_token: worldToken } };
    }
    return msg;
  };
}
