/**
 * Reading an observer's declarations and channel requests: bounded, so a request costs what the world's
 * manifest holds, never the product of two lists the agent chose the length of.
 */
import { describe, expect, it } from 'vitest';
import type { ChannelDecl } from '../../src/fanout/hub-channels.js';
import {
  agentDeclarations,
  requestedChannels,
  unsubscribeNames,
} from '../../src/fanout/observer-messages.js';

const CAM: ChannelDecl = { id: 'cam', modality: 'image/raw', rate_hz: 30, loss_class: 'latest-wins' };
const hub = {
  channelDecl: (name: string) => (name === 'cam' ? CAM : undefined),
  upstreamGrant: () => undefined,
};

describe('observer messages', () => {
  it('AWP-AGM-001 declared modalities: strings, once each, at most 1,024 of at most 256 characters', () => {
    const declared = [
      'image/raw',
      'image/raw',
      7,
      'x'.repeat(257),
      ...Array.from({ length: 5000 }, (_, i) => `m${i}`),
    ];
    const { modalities } = agentDeclarations({ consumes_modalities: declared });
    expect(modalities).toHaveLength(1024);
    expect(modalities.slice(0, 2)).toEqual(['image/raw', 'm0']);
    expect(new Set(modalities).size).toBe(1024);
  });

  it('AWP-NEG-004 a request of more than 1,024 channels is -32602; up to that, each is checked against the declarations', () => {
    const { modalities } = agentDeclarations({
      consumes_modalities: [...Array.from({ length: 1023 }, (_, i) => `m${i}`), 'image/raw'],
    });
    const many = Array.from({ length: 1024 }, () => ({ channel: 'cam' }));
    expect(requestedChannels(many, hub, modalities)).toHaveLength(1024);
    expect(requestedChannels([...many, { channel: 'cam' }], hub, modalities)).toMatchObject({
      code: -32602,
      data: { detail: 'at most 1024 channels in one request' },
    });
    expect(requestedChannels([{ channel: 'cam' }], hub, ['m0'])).toMatchObject({ code: 4001 });
    expect(requestedChannels([{ channel: 'nope' }], hub, modalities)).toMatchObject({ code: 2007 });
    expect(unsubscribeNames(Array(1025).fill('cam'), hub)).toMatchObject({ code: -32602 });
    expect(unsubscribeNames(Array(1024).fill('cam'), hub)).toHaveLength(1024);
  });
});
