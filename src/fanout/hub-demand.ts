/**
 * What a hub asks of its upstream session (sans-IO arithmetic): the union of its observers' needs,
 * each channel at the highest rate any observer needs (latest-wins) or at its declared rate (reliable:
 * downsampling a reliable channel would drop frames), and what a new need adds to the subscription.
 */
import type { ChannelDecl, UpstreamGrant } from './hub-channels.js';

/** An observer's need: a channel, at a rate (null: the channel's own). */
export interface Need {
  readonly channel: string;
  readonly rate_hz: number | null;
}

/** A channel in an obs.subscribe request (rate omitted: the world's choice). */
export type Subscription = { channel: string; rate_hz?: number };

/** The rate the hub asks upstream for a need: latest-wins at the need; reliable at the declared rate. */
export function upstreamRate(decl: ChannelDecl, rate: number | null): number | undefined {
  if (decl.rate_hz === null) return undefined;
  if (decl.loss_class === 'reliable') return decl.rate_hz;
  return rate ?? decl.rate_hz;
}

/** Channels (or higher latest-wins rates) the upstream session does not carry yet. */
export function missingChannels(
  wants: readonly Need[],
  channels: ReadonlyMap<string, ChannelDecl>,
  grants: ReadonlyMap<string, UpstreamGrant>,
): Subscription[] {
  const out: Subscription[] = [];
  for (const w of wants) {
    const decl = channels.get(w.channel);
    const grant = grants.get(w.channel);
    if (decl === undefined) continue;
    const rate = upstreamRate(decl, w.rate_hz);
    if (grant === undefined || (rate !== undefined && grant.rate_hz !== null && grant.rate_hz < rate)) {
      out.push(rate === undefined ? { channel: w.channel } : { channel: w.channel, rate_hz: rate });
    }
  }
  return out;
}

/** Every need, once per channel at the highest rate (what the hub's session subscribes at open). */
export function unionOfNeeds(
  needs: Iterable<Need>,
  channels: ReadonlyMap<string, ChannelDecl>,
): Subscription[] {
  const best = new Map<string, number | undefined>();
  for (const { channel, rate_hz } of needs) {
    const decl = channels.get(channel);
    const r = decl === undefined ? (rate_hz ?? undefined) : upstreamRate(decl, rate_hz);
    const prev = best.get(channel);
    best.set(channel, prev === undefined || (r !== undefined && r > prev) ? r : prev);
  }
  return [...best].map(([channel, rate_hz]) => (rate_hz === undefined ? { channel } : { channel, rate_hz }));
}
