/**
 * Credential checks (src/transport/auth.ts): a presented credential is one of a list's, whatever the
 * list's length, and a rotated list (a new one: config lists are replaced, not changed) is what counts.
 */
import { describe, expect, it } from 'vitest';
import { bearerCredential, credentialMatches } from '../../src/transport/auth.js';

describe('credentialMatches', () => {
  it('finds a credential among many, and nothing that is not one of them', () => {
    const accepted = Array.from({ length: 10_000 }, (_, i) => `agent-credential-${i}`);
    expect(credentialMatches('agent-credential-9999', accepted)).toBe(true);
    expect(credentialMatches('agent-credential-0', accepted)).toBe(true);
    expect(credentialMatches('agent-credential-10000', accepted)).toBe(false);
    expect(credentialMatches('', accepted)).toBe(false);
    expect(credentialMatches('agent-credential-1', [])).toBe(false);
  });

  it('a rotated list is the one that counts', () => {
    const before = ['old-credential'];
    expect(credentialMatches('old-credential', before)).toBe(true);
    const after = ['new-credential'];
    expect(credentialMatches('old-credential', after)).toBe(false);
    expect(credentialMatches('new-credential', after)).toBe(true);
  });
});

describe('bearerCredential', () => {
  it('reads Authorization: Bearer, else an awp.bearer.<credential> subprotocol', () => {
    expect(bearerCredential('Bearer abc', [])).toBe('abc');
    expect(bearerCredential('bearer   abc  ', [])).toBe('abc');
    expect(bearerCredential(undefined, ['awp', 'awp.bearer.xyz'])).toBe('xyz');
    expect(bearerCredential('Basic abc', ['awp'])).toBeUndefined();
  });
});
