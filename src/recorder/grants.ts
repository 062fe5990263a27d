/** Channel names by `channel_id`, from the grants a result carries (session.ready, obs.subscribe), sans-IO. */
import { isRecord } from '../protocol/json-object.js';

/**
 * The `[channel_id, channel]` pairs of a result's grant: `granted.channels` (session.ready, session.resume)
 * or `granted` (obs.subscribe / obs.unsubscribe results).
 */
export function grantedChannels(result: unknown): [number, string][] {
  if (!isRecord(result)) return [];
  const granted = result.granted;
  const list = Array.isArray(granted) ? granted : isRecord(granted) ? granted.channels : undefined;
  if (!Array.isArray(list)) return [];
  const out: [number, string][] = [];
  for (const g of list) {
    if (isRecord(g) && typeof g.channel_id === 'number' && typeof g.channel === 'string')
      out.push([g.channel_id, g.channel]);
  }
  return out;
}
