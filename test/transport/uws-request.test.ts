/** uWS hands remote addresses as bytes; the edge sees them as Node's socket.remoteAddress would. */
import { isIP } from 'node:net';
import { describe, expect, it } from 'vitest';
import { formatAddress } from '../../src/transport/uws-request.js';

const bytes = (...b: number[]) => new Uint8Array(b).buffer;

describe('formatAddress', () => {
  it('formats IPv4 dotted', () => {
    expect(formatAddress(bytes(127, 0, 0, 1))).toBe('127.0.0.1');
    expect(formatAddress(bytes(10, 200, 3, 255))).toBe('10.200.3.255');
  });

  it('formats IPv4-mapped IPv6 as ::ffff:a.b.c.d, as Node does', () => {
    expect(formatAddress(bytes(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1))).toBe(
      '::ffff:127.0.0.1',
    );
  });

  it('compresses IPv6 (RFC 5952)', () => {
    expect(formatAddress(bytes(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1))).toBe('::1');
    const doc = bytes(0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1);
    expect(formatAddress(doc)).toBe('2001:db8::1:0:0:1');
    expect(isIP(formatAddress(doc))).toBe(6);
  });

  it('gives an empty string for anything else', () => {
    expect(formatAddress(new ArrayBuffer(0))).toBe('');
  });
});
