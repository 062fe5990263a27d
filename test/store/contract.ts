/**
 * The SessionStore contract (src/session/session-store.ts), run against every implementation with the
 * same assertions: a resume must behave the same whichever store holds the session.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JournalEntry } from '../../src/session/journal.js';
import {
  FencedError,
  JournalGapError,
  type RelaySessionRecord,
  type SessionStore,
} from '../../src/session/session-store.js';

export interface StoreFixture {
  readonly store: SessionStore;
  dispose(): Promise<void>;
}

export function token(): string {
  return randomBytes(38).toString('base64url');
}

export function record(overrides: Partial<RelaySessionRecord> = {}): RelaySessionRecord {
  return {
    edge_token: token(),
    route: 'grid',
    upstream_token: `up-${randomBytes(8).toString('hex')}`,
    session_id: `s-${randomBytes(4).toString('hex')}`,
    mode: 'lockstep',
    reconnect_window_ms: 30_000,
    heartbeat_interval_ms: 5_000,
    agent_ack: 0,
    suspended_at_ms: null,
    ...overrides,
  };
}

export function entry(status_seq: number, text: string | null = `{"seq":${status_seq}}`): JournalEntry {
  return { status_seq, text };
}

const seqs = (journal: readonly JournalEntry[]): number[] => journal.map((e) => e.status_seq);

export function sessionStoreContract(name: string, open: () => Promise<StoreFixture>): void {
  describe(`SessionStore contract: ${name}`, () => {
    let fixture: StoreFixture;
    let store: SessionStore;
    beforeAll(async () => {
      fixture = await open();
      store = fixture.store;
    });
    afterAll(async () => {
      await fixture.dispose();
    });

    it('is healthy when its backend is reachable', () => {
      expect(store.healthy()).toBe(true);
    });

    it('create stores a session at fence 1 and get returns it with an empty journal', async () => {
      const r = record({ mode: 'streaming', agent_ack: 4 });
      expect(await store.create(r)).toBe(1);
      const got = await store.get(r.edge_token);
      expect(got).toEqual({ record: r, journal: [], fence: 1 });
    });

    it('get of an unknown token is null', async () => {
      expect(await store.get(token())).toBeNull();
    });

    it('append keeps entries in status_seq order, partial entries included, and ignores redeliveries', async () => {
      const r = record();
      const fence = await store.create(r);
      await store.append(r.edge_token, fence, [entry(1), entry(2, null), entry(3)]);
      await store.append(r.edge_token, fence, [entry(2, 'redelivered'), entry(3, 'again'), entry(4)]);
      await store.append(r.edge_token, fence, []);
      const got = await store.get(r.edge_token);
      expect(got?.journal).toEqual([entry(1), entry(2, null), entry(3), entry(4)]);
    });

    it('journal text round-trips byte for byte (unicode, escapes, empty)', async () => {
      const r = record();
      const fence = await store.create(r);
      const texts = ['{"msg":"héllo ✓ 🤖","esc":"\\u0000\\n"}', '', 'x'.repeat(100_000)];
      await store.append(
        r.edge_token,
        fence,
        texts.map((t, i) => entry(i + 1, t)),
      );
      const got = await store.get(r.edge_token);
      expect(got?.journal.map((e) => e.text)).toEqual(texts);
    });

    it('status_seq values up to 2^53-1 are stored exactly', async () => {
      const big = Number.MAX_SAFE_INTEGER;
      const r = record({ agent_ack: big - 3 });
      const fence = await store.create(r);
      await store.append(r.edge_token, fence, [entry(big - 2), entry(big - 1), entry(big)]);
      await store.acknowledge(r.edge_token, fence, big - 1);
      const got = await store.get(r.edge_token);
      expect(got?.record.agent_ack).toBe(big - 1);
      expect(seqs(got?.journal ?? [])).toEqual([big]);
    });

    it('append refuses, storing nothing, entries that would leave a gap above what is held (a lost append)', async () => {
      const r = record();
      const fence = await store.create(r);
      await store.append(r.edge_token, fence, [entry(1), entry(2)]);
      // Entries 3 and 4 were never stored (the store was unreachable): 5 must not be taken for durable.
      const refused = await store.append(r.edge_token, fence, [entry(5), entry(6)]).then(
        () => null,
        (err: unknown) => err,
      );
      expect(refused).toBeInstanceOf(JournalGapError);
      expect(refused).toMatchObject({ held: 2, first: 5 });
      // A redelivery overlapping what is held, then the gap: refused as a whole.
      await expect(store.append(r.edge_token, fence, [entry(2), entry(4)])).rejects.toBeInstanceOf(
        JournalGapError,
      );
      expect(seqs((await store.get(r.edge_token))?.journal ?? [])).toEqual([1, 2]);
      // Re-sent from the gap, the whole tail is stored.
      await store.append(r.edge_token, fence, [entry(3), entry(4), entry(5), entry(6)]);
      expect(seqs((await store.get(r.edge_token))?.journal ?? [])).toEqual([1, 2, 3, 4, 5, 6]);
    });

    it('an acknowledgement past a gap closes it: appends continue above the acknowledgement', async () => {
      const r = record();
      const fence = await store.create(r);
      await store.append(r.edge_token, fence, [entry(1)]);
      await expect(store.append(r.edge_token, fence, [entry(4)])).rejects.toBeInstanceOf(JournalGapError);
      await store.acknowledge(r.edge_token, fence, 3);
      await store.append(r.edge_token, fence, [entry(4)]);
      const got = await store.get(r.edge_token);
      expect(got?.record.agent_ack).toBe(3);
      expect(seqs(got?.journal ?? [])).toEqual([4]);
      // A fresh session's first entry must follow its acknowledgement too.
      const late = record({ agent_ack: 7 });
      const lateFence = await store.create(late);
      await expect(store.append(late.edge_token, lateFence, [entry(9)])).rejects.toBeInstanceOf(
        JournalGapError,
      );
      await store.append(late.edge_token, lateFence, [entry(8), entry(9)]);
      expect(seqs((await store.get(late.edge_token))?.journal ?? [])).toEqual([8, 9]);
    });

    it('append ignores entries at or below the acknowledgement', async () => {
      const r = record({ agent_ack: 5 });
      const fence = await store.create(r);
      await store.append(r.edge_token, fence, [entry(4), entry(5), entry(6)]);
      expect(seqs((await store.get(r.edge_token))?.journal ?? [])).toEqual([6]);
    });

    it('acknowledge records agent_ack and drops entries at or below it; a lower ack is ignored', async () => {
      const r = record();
      const fence = await store.create(r);
      await store.append(
        r.edge_token,
        fence,
        [1, 2, 3, 4, 5].map((s) => entry(s)),
      );
      await store.acknowledge(r.edge_token, fence, 3);
      let got = await store.get(r.edge_token);
      expect(got?.record.agent_ack).toBe(3);
      expect(seqs(got?.journal ?? [])).toEqual([4, 5]);
      await store.acknowledge(r.edge_token, fence, 2);
      got = await store.get(r.edge_token);
      expect(got?.record.agent_ack).toBe(3);
      expect(seqs(got?.journal ?? [])).toEqual([4, 5]);
      await store.acknowledge(r.edge_token, fence, 5);
      got = await store.get(r.edge_token);
      expect(got?.record.agent_ack).toBe(5);
      expect(got?.journal).toEqual([]);
      // After everything is acknowledged, append continues above the acknowledgement.
      await store.append(r.edge_token, fence, [entry(5), entry(6)]);
      expect(seqs((await store.get(r.edge_token))?.journal ?? [])).toEqual([6]);
    });

    it('setSuspended records and clears suspended_at_ms', async () => {
      const r = record();
      const fence = await store.create(r);
      await store.setSuspended(r.edge_token, fence, 1_700_000_000_123);
      expect((await store.get(r.edge_token))?.record.suspended_at_ms).toBe(1_700_000_000_123);
      await store.setSuspended(r.edge_token, fence, null);
      expect((await store.get(r.edge_token))?.record.suspended_at_ms).toBeNull();
    });

    it("an observer session's record (no upstream token) round-trips, and setObserver replaces its part, fenced", async () => {
      const observer = {
        modalities: ['proprio/json'],
        max_obs_rate_hz: null,
        wants: [{ channel: 'state', rate_hz: 10 }],
        positions: [] as [string, number][],
      };
      const r = record({ upstream_token: '', observer });
      const fence = await store.create(r);
      expect((await store.get(r.edge_token))?.record.observer).toEqual(observer);
      const moved = { ...observer, positions: [['state', 9_007_199_254_740_991]] as [string, number][] };
      await store.setObserver(r.edge_token, fence, moved);
      expect((await store.get(r.edge_token))?.record.observer).toEqual(moved);
      const claimed = await store.claim(r.edge_token);
      await expect(store.setObserver(r.edge_token, fence, observer)).rejects.toBeInstanceOf(FencedError);
      await store.setObserver(r.edge_token, claimed!, observer);
      expect((await store.get(r.edge_token))?.record.observer).toEqual(observer);
      // A relay session's record has no observer part.
      const relay = record();
      await store.create(relay);
      expect((await store.get(relay.edge_token))?.record.observer).toBeUndefined();
    });

    it('claim raises the fence each time and is null for an unknown session', async () => {
      const r = record();
      await store.create(r);
      expect(await store.claim(r.edge_token)).toBe(2);
      expect(await store.claim(r.edge_token)).toBe(3);
      expect((await store.get(r.edge_token))?.fence).toBe(3);
      expect(await store.claim(token())).toBeNull();
    });

    it('concurrent claims each get a distinct fence (claims are atomic)', async () => {
      const r = record();
      await store.create(r);
      const fences = await Promise.all(Array.from({ length: 20 }, () => store.claim(r.edge_token)));
      expect([...fences].sort((a, b) => (a ?? 0) - (b ?? 0))).toEqual(
        Array.from({ length: 20 }, (_, i) => i + 2),
      );
    });

    it('writes with a stale fence reject with FencedError and change nothing', async () => {
      const r = record();
      const old = await store.create(r);
      await store.append(r.edge_token, old, [entry(1), entry(2)]);
      const fence = await store.claim(r.edge_token);
      expect(fence).toBe(2);
      await expect(store.append(r.edge_token, old, [entry(3)])).rejects.toBeInstanceOf(FencedError);
      await expect(store.acknowledge(r.edge_token, old, 2)).rejects.toBeInstanceOf(FencedError);
      await expect(store.setSuspended(r.edge_token, old, 123)).rejects.toBeInstanceOf(FencedError);
      let got = await store.get(r.edge_token);
      expect(got?.record.agent_ack).toBe(0);
      expect(got?.record.suspended_at_ms).toBeNull();
      expect(seqs(got?.journal ?? [])).toEqual([1, 2]);
      // The current holder writes normally.
      await store.append(r.edge_token, fence!, [entry(3)]);
      await store.acknowledge(r.edge_token, fence!, 1);
      await store.setSuspended(r.edge_token, fence!, 456);
      got = await store.get(r.edge_token);
      expect(got?.record.agent_ack).toBe(1);
      expect(got?.record.suspended_at_ms).toBe(456);
      expect(seqs(got?.journal ?? [])).toEqual([2, 3]);
    });

    it('delete removes the session; later writes resolve silently and claim is null', async () => {
      const r = record();
      const fence = await store.create(r);
      await store.append(r.edge_token, fence, [entry(1)]);
      await store.delete(r.edge_token);
      expect(await store.get(r.edge_token)).toBeNull();
      await expect(store.append(r.edge_token, fence, [entry(2)])).resolves.toBeUndefined();
      await expect(store.acknowledge(r.edge_token, fence, 1)).resolves.toBeUndefined();
      await expect(store.setSuspended(r.edge_token, fence, 1)).resolves.toBeUndefined();
      expect(await store.claim(r.edge_token)).toBeNull();
      expect(await store.get(r.edge_token)).toBeNull();
      await expect(store.delete(r.edge_token)).resolves.toBeUndefined();
    });

    it('delete with the current fence removes the session', async () => {
      const r = record();
      await store.create(r);
      const fence = await store.claim(r.edge_token);
      await store.append(r.edge_token, fence!, [entry(1)]);
      await store.delete(r.edge_token, fence!);
      expect(await store.get(r.edge_token)).toBeNull();
      expect(await store.claim(r.edge_token)).toBeNull();
      // Deleting what is already gone, fenced or not, resolves.
      await expect(store.delete(r.edge_token, fence!)).resolves.toBeUndefined();
    });

    it('delete with a stale fence keeps a session another replica claimed since, journal included', async () => {
      const r = record();
      const old = await store.create(r);
      await store.append(r.edge_token, old, [entry(1), entry(2)]);
      const fence = await store.claim(r.edge_token);
      // The replica that lost the session lets go: its delete must not remove the new holder's session.
      await expect(store.delete(r.edge_token, old)).resolves.toBeUndefined();
      const got = await store.get(r.edge_token);
      expect(got?.fence).toBe(fence);
      expect(seqs(got?.journal ?? [])).toEqual([1, 2]);
      await store.append(r.edge_token, fence!, [entry(3)]);
      expect(seqs((await store.get(r.edge_token))?.journal ?? [])).toEqual([1, 2, 3]);
      // The current holder can delete it; so can an unfenced delete.
      await store.delete(r.edge_token, fence!);
      expect(await store.get(r.edge_token)).toBeNull();
      const other = record();
      await store.create(other);
      await store.claim(other.edge_token);
      await store.delete(other.edge_token);
      expect(await store.get(other.edge_token)).toBeNull();
    });

    it('a fenced delete racing a claim never loses the claimed session', async () => {
      for (let i = 0; i < 20; i++) {
        const r = record();
        const old = await store.create(r);
        await store.append(r.edge_token, old, [entry(1)]);
        const [claimed] = await Promise.all([store.claim(r.edge_token), store.delete(r.edge_token, old)]);
        const got = await store.get(r.edge_token);
        // Either the delete ran first (the claim then finds nothing) or the claim did (the session stays).
        if (claimed === null) expect(got).toBeNull();
        else expect(got?.fence).toBe(claimed);
      }
    });

    it('create over an existing token starts afresh at fence 1', async () => {
      const r = record();
      await store.create(r);
      await store.append(r.edge_token, 1, [entry(1)]);
      await store.claim(r.edge_token);
      const again = { ...r, session_id: 'replaced' };
      expect(await store.create(again)).toBe(1);
      expect(await store.get(r.edge_token)).toEqual({ record: again, journal: [], fence: 1 });
    });

    it('sessions are independent, and a returned session is a copy', async () => {
      const a = record();
      const b = record({ route: 'arm' });
      await store.create(a);
      await store.create(b);
      await store.append(a.edge_token, 1, [entry(1)]);
      await store.claim(b.edge_token);
      const got = await store.get(a.edge_token);
      expect(got?.fence).toBe(1);
      got!.record.agent_ack = 99;
      expect((await store.get(a.edge_token))?.record.agent_ack).toBe(0);
      expect(await store.get(b.edge_token)).toEqual({ record: b, journal: [], fence: 2 });
    });
  });
}
