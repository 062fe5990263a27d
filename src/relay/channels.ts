import type { ChannelInfo } from './relay-session.js';
import { isIdentifierSized } from '../protocol/identifier.js';

/** Channel declarations of a world manifest, by channel name. */
export type ManifestChannels = ReadonlyMap<string, { latest_wins: boolean; rate_hz: number | null }>;

/** Reads the observation and command channel declarations of a world manifest. */
export function channelTable(manifest: unknown): ManifestChannels {
  const table = new Map<string, { latest_wins: boolean; rate_hz: number | null }>();
  const m = manifest as { observation_channels?: unknown; command_channels?: unknown } | null;
  for (const list of [m?.observation_channels, m?.command_channels]) {
    if (!Array.isArray(list)) continue;
    for (const c of list as ({ id?: unknown; loss_class?: unknown; rate_hz?: unknown } | null)[]) {
      if (typeof c !== 'object' || c === null || typeof c.id !== 'string') continue;
      table.set(c.id, {
        latest_wins: c.loss_class === 'latest-wins',
        rate_hz: typeof c.rate_hz === 'number' ? c.rate_hz : null,
      });
    }
  }
  return table;
}

/** Maps a grant list (`session.ready.granted` or a subscribe result) to channel ids. */
export function grantedChannels(table: ManifestChannels, granted: unknown): Map<number, ChannelInfo> {
  const out = new Map<number, ChannelInfo>();
  const list =
    (granted as { channels?: unknown; granted?: unknown } | null)?.channels ??
    (granted as { granted?: unknown } | null)?.granted;
  if (!Array.isArray(list)) return out;
  for (const g of list as ({ channel?: unknown; channel_id?: unknown; rate_hz?: unknown } | null)[]) {
    if (typeof g !== 'object' || g === null) continue;
    if (!isIdentifierSized(g.channel) || typeof g.channel_id !== 'number') continue;
    const decl = table.get(g.channel);
    out.set(g.channel_id, {
      name: g.channel,
      latest_wins: decl?.latest_wins ?? false,
      per_tick: g.rate_hz === null,
      rate_hz: typeof g.rate_hz === 'number' ? g.rate_hz : null,
    });
  }
  return out;
}
