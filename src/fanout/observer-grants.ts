/**
 * What an observer session is granted per channel (AWP-NEG-001/004), as pure functions of the world's
 * declarations, what the world granted the hub, the observer's requests and what it declared at initialize
 * (modalities, max_obs_rate_hz: AWP-AGM-001/002).
 */
import { awpError, type RpcErrorObject } from '../protocol/errors.js';
import type { ChannelDecl, UpstreamGrant } from './hub-channels.js';
import type { SubscribedChannel } from './subscriber.js';

/** What the hub knows of a channel: the world's declaration and what the world granted the hub. */
export interface GrantSource {
  channelDecl(name: string): ChannelDecl | undefined;
  upstreamGrant(name: string): UpstreamGrant | undefined;
}

export interface ChannelRequest {
  readonly channel: string;
  readonly rate_hz: number | null;
}

/** The observer's wanted channels and the rate it asked for each (null: the declared rate). */
type Wants = ReadonlyMap<string, { rate_hz: number | null }>;

/** 2007 for undeclared channels, 4001 for ones whose modality this agent did not declare (AWP-NEG-004). */
export function checkChannels(
  requested: readonly ChannelRequest[],
  hub: GrantSource,
  modalities: readonly string[],
): RpcErrorObject | null {
  const consumed = new Set(modalities);
  for (const r of requested) {
    const decl = hub.channelDecl(r.channel);
    if (decl === undefined) return awpError('AWP_CHANNEL_UNKNOWN', `${r.channel} is not declared`);
    if (!consumed.has(decl.modality)) {
      return awpError(
        'AWP_FORBIDDEN',
        `${decl.id} carries ${decl.modality}, which the agent did not declare it consumes`,
      );
    }
  }
  return null;
}

/**
 * What the hub must carry for this observer: its desired rates, not capped by what the hub holds now,
 * so an observer asking more than the others makes the hub re-rate upstream (the union at the highest rate).
 */
function wantList(
  wants: Wants,
  hub: GrantSource,
  maxObsRateHz: number | undefined,
): { channel: string; rate_hz: number | null }[] {
  return [...wants].map(([channel, w]) => ({
    channel,
    rate_hz: desiredRate(hub.channelDecl(channel), w.rate_hz, maxObsRateHz),
  }));
}

/** At most what it asked, what the world declared, and its max_obs_rate_hz; reliable: the declared rate. */
function desiredRate(
  decl: ChannelDecl | undefined,
  requested: number | null,
  maxObsRateHz: number | undefined,
): number | null {
  if (decl === undefined || decl.rate_hz === null) return null;
  if (decl.loss_class === 'reliable') return decl.rate_hz;
  let rate = Math.min(requested ?? decl.rate_hz, decl.rate_hz);
  if (maxObsRateHz !== undefined) rate = Math.min(rate, maxObsRateHz);
  return rate;
}

/**
 * The rate this observer gets: its desired rate, capped by what the world granted the hub; reliable
 * channels are never downsampled (that would be loss), so they come at the hub's rate; per-tick
 * channels have none.
 */
function grantedRate(
  decl: ChannelDecl,
  up: UpstreamGrant,
  requested: number | null,
  maxObsRateHz: number | undefined,
): number | null {
  const desired = desiredRate(decl, requested, maxObsRateHz);
  if (desired === null) return null;
  const upstream = up.rate_hz;
  if (decl.loss_class === 'reliable') return upstream ?? desired;
  return upstream === null ? desired : Math.min(desired, upstream);
}

/** The exact grant list (AWP-NEG-001) from what is wanted and what the hub holds. */
function computeGrants(
  wants: Wants,
  hub: GrantSource,
  maxObsRateHz: number | undefined,
): Map<string, SubscribedChannel> {
  const grants = new Map<string, SubscribedChannel>();
  for (const [name, w] of wants) {
    const decl = hub.channelDecl(name);
    const up = hub.upstreamGrant(name);
    if (decl === undefined || up === undefined) continue;
    const rate = grantedRate(decl, up, w.rate_hz, maxObsRateHz);
    grants.set(name, {
      name,
      channel_id: up.channel_id,
      rate_hz: rate,
      latest_wins: decl.loss_class === 'latest-wins',
      per_tick: rate === null,
      stale_after_ms: decl.stale_after_ms ?? (decl.rate_hz ? 2000 / decl.rate_hz : 1000),
    });
  }
  return grants;
}

function sameGrant(a: SubscribedChannel, b: SubscribedChannel | undefined): boolean {
  return (
    b !== undefined &&
    a.channel_id === b.channel_id &&
    a.rate_hz === b.rate_hz &&
    a.latest_wins === b.latest_wins &&
    a.per_tick === b.per_tick &&
    a.stale_after_ms === b.stale_after_ms
  );
}

/** The `granted.channels` / `granted` list of a result. */
export function grantList(
  grants: ReadonlyMap<string, SubscribedChannel>,
): { channel: string; rate_hz: number | null; channel_id: number }[] {
  return [...grants.values()].map((g) => ({
    channel: g.name,
    rate_hz: g.rate_hz,
    channel_id: g.channel_id,
  }));
}

/** An observer's wanted channels and its exact grants, recomputed from what the hub holds (AWP-NEG-001). */
export class ObserverGrants {
  /** The wanted channels and the rate asked for each (null: the declared rate). */
  private readonly wants = new Map<string, { rate_hz: number | null }>();
  private grants = new Map<string, SubscribedChannel>();

  constructor(
    private readonly hub: GrantSource,
    private readonly maxObsRateHz: number | undefined,
  ) {}

  /** Wants these channels at these rates; returns the ones not wanted before. */
  want(requested: readonly ChannelRequest[]): string[] {
    const added: string[] = [];
    for (const r of requested) {
      if (!this.wants.has(r.channel)) added.push(r.channel);
      this.wants.set(r.channel, { rate_hz: r.rate_hz });
    }
    return added;
  }

  unwant(names: readonly string[]): void {
    for (const n of names) this.wants.delete(n);
  }

  /** The channels wanted and the rate asked for each, as the observer asked (what a store keeps). */
  requests(): ChannelRequest[] {
    return [...this.wants].map(([channel, w]) => ({ channel, rate_hz: w.rate_hz }));
  }

  /** What the hub must carry for this observer (see wantList). */
  wanted(): { channel: string; rate_hz: number | null }[] {
    return wantList(this.wants, this.hub, this.maxObsRateHz);
  }

  /**
   * Recomputes the grants from the hub's; returns the channel ids no longer granted, and whether any
   * grant changed (the hub's channel index is rebuilt only then: a subscribe of channels the observer
   * already holds changes nothing).
   */
  regrant(): { removed: number[]; changed: boolean } {
    const grants = computeGrants(this.wants, this.hub, this.maxObsRateHz);
    const removed: number[] = [];
    for (const old of this.grants.values()) if (!grants.has(old.name)) removed.push(old.channel_id);
    let changed = grants.size !== this.grants.size;
    for (const g of grants.values()) if (!changed && !sameGrant(g, this.grants.get(g.name))) changed = true;
    this.grants = grants;
    return { removed, changed };
  }

  get(name: string): SubscribedChannel | undefined {
    return this.grants.get(name);
  }

  names(): IterableIterator<string> {
    return this.grants.keys();
  }

  values(): IterableIterator<SubscribedChannel> {
    return this.grants.values();
  }

  /** The `granted.channels` / `granted` list of a result. */
  list(): ReturnType<typeof grantList> {
    return grantList(this.grants);
  }
}
