/** Reading a world's grant lists: a "name" longer than an identifier (128 characters) names no channel. */
import { describe, expect, it } from 'vitest';
import { readGrants } from '../../src/fanout/hub-channels.js';
import { MAX_IDENTIFIER_CHARS } from '../../src/protocol/identifier.js';
import { channelTable, grantedChannels } from '../../src/relay/channels.js';

const longest = 'c'.repeat(MAX_IDENTIFIER_CHARS);
const tooLong = 'c'.repeat(16 * 1024 * 1024);
const list = [
  { channel: longest, channel_id: 1, rate_hz: 10 },
  { channel: tooLong, channel_id: 2, rate_hz: 10 },
  { channel: '', channel_id: 3, rate_hz: 10 },
];

describe('grant lists from a world', () => {
  it('the relay keeps grants named by identifiers of at most 128 characters, and no other', () => {
    const granted = grantedChannels(channelTable({}), { channels: list });
    expect([...granted.keys()]).toEqual([1]);
    expect(granted.get(1)!.name).toBe(longest);
  });

  it('an observer hub keeps grants named by identifiers of at most 128 characters, and no other', () => {
    expect([...readGrants(list)!.keys()]).toEqual([longest]);
  });
});
