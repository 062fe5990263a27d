/**
 * The world's channels as the hub reads them (sans-IO): the observation channels its manifest declares,
 * and the grant lists of its answers (`session.ready.granted.channels`, a subscribe result's `granted`).
 * A world's answer may be anything JSON allows: entries that are not what they should be are skipped.
 */
import { isRecord } from '../protocol/json-object.js';
import { isIdentifierSized } from '../protocol/identifier.js';

export interface ChannelDecl {
  readonly id: string;
  readonly modality: string;
  readonly rate_hz: number | null;
  readonly loss_class: 'reliable' | 'latest-wins';
  readonly stale_after_ms?: number;
}

export interface UpstreamGrant {
  readonly channel: string;
  readonly channel_id: number;
  readonly rate_hz: number | null;
}

/** The observation channels a manifest declares, by id. */
export function readChannelDecls(manifest: Record<string, unknown> | null): Map<string, ChannelDecl> {
  const channels = new Map<string, ChannelDecl>();
  const list = manifest?.observation_channels;
  if (!Array.isArray(list)) return channels;
  for (const c of list as unknown[]) {
    if (!isRecord(c) || typeof c.id !== 'string' || typeof c.modality !== 'string') continue;
    channels.set(c.id, {
      id: c.id,
      modality: c.modality,
      rate_hz: typeof c.rate_hz === 'number' ? c.rate_hz : null,
      loss_class: c.loss_class === 'latest-wins' ? 'latest-wins' : 'reliable',
      ...(typeof c.stale_after_ms === 'number' ? { stale_after_ms: c.stale_after_ms } : {}),
    });
  }
  return channels;
}

/** A grant list by channel name; null when `list` is no list (the grants stay as they were). */
export function readGrants(list: unknown): Map<string, UpstreamGrant> | null {
  if (!Array.isArray(list)) return null;
  const grants = new Map<string, UpstreamGrant>();
  for (const g of list as unknown[]) {
    if (isRecord(g) && isIdentifierSized(g.channel) && typeof g.channel_id === 'number') {
      grants.set(g.channel, {
        channel: g.channel,
        channel_id: g.channel_id,
        rate_hz: typeof g.rate_hz === 'number' ? g.rate_hz : null,
      });
    }
  }
  return grants;
}

/** `value[key]` when `value` is an object (a world's result may be anything JSON allows). */
export function field(value: unknown, key: string): unknown {
  return isRecord(value) ? value[key] : undefined;
}
