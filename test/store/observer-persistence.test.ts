/**
 * ObserverPersistence's write queue against a store that stops completing writes: acknowledgements,
 * lease renewals, observer records and suspensions are merged (the latest value of each) rather than
 * queued one by one, so a slow store holds a bounded queue; they are still written in the order a
 * resume at another replica needs (the acknowledgement, then the positions, then the suspension).
 */
import { describe, expect, it } from 'vitest';
import { ObserverPersistence, type PersistenceEvents } from '../../src/fanout/observer-persistence.js';
import { LEASE_RENEW_MS, type ObserverRecord } from '../../src/session/session-store.js';
import { MemorySessionStore } from '../../src/store/memory-store.js';
import { StoreUnavailableError } from '../../src/store/redis-store.js';
import { record } from './contract.js';

/** The memory store whose writes wait while `held` (as on a Redis that stopped answering); logs each write. */
class GatedStore extends MemorySessionStore {
  readonly writes: string[] = [];
  failAcknowledge = false;
  private gate: Promise<void> = Promise.resolve();
  private open: () => void = () => undefined;

  hold(): void {
    this.gate = new Promise<void>((resolve) => (this.open = resolve));
  }

  release(): void {
    this.open();
  }

  override async acknowledge(token: string, fence: number, status_seq: number): Promise<void> {
    this.writes.push(`acknowledge ${status_seq}`);
    await this.gate;
    if (this.failAcknowledge) throw new StoreUnavailableError('store down (test)');
    return super.acknowledge(token, fence, status_seq);
  }

  override async setSuspended(token: string, fence: number, at: number | null): Promise<void> {
    this.writes.push(`setSuspended ${at}`);
    await this.gate;
    return super.setSuspended(token, fence, at);
  }

  override async setObserver(token: string, fence: number, observer: ObserverRecord): Promise<void> {
    this.writes.push(`setObserver ${observer.positions[0]?.[1]}`);
    await this.gate;
    return super.setObserver(token, fence, observer);
  }
}

const observerAt = (seq: number): ObserverRecord => ({
  modalities: ['state'],
  max_obs_rate_hz: null,
  wants: [{ channel: 'state', rate_hz: null }],
  positions: [['state', seq]],
});

async function claimedSession(): Promise<{
  store: GatedStore;
  token: string;
  persistence: ObserverPersistence;
  failed: string[];
}> {
  const store = new GatedStore();
  const r = record({ upstream_token: '', observer: observerAt(0) });
  const fence = await store.create(r);
  const failed: string[] = [];
  const events: PersistenceEvents = {
    fenced: () => failed.push('fenced'),
    failed: (op) => failed.push(op),
  };
  const persistence = ObserverPersistence.claimed(store, r.edge_token, fence, 0, events);
  return { store, token: r.edge_token, persistence, failed };
}

/** Lets the write chain start what it has queued (a few turns of the microtask queue and one macrotask). */
const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 10));

describe('ObserverPersistence with a store that stops completing writes', () => {
  it('a thousand lease renewals and acknowledgements while a write is stuck become one round of writes, carrying the latest values', async () => {
    const { store, token, persistence, failed } = await claimedSession();
    store.hold();
    persistence.attached(1);
    await settle();
    expect(store.writes).toEqual(['acknowledge 1']); // stuck on the store
    const n = 1000;
    for (let i = 1; i <= n; i++) {
      persistence.renew(i * LEASE_RENEW_MS, i + 1);
      if (i % 100 === 0) persistence.suspended(i * LEASE_RENEW_MS, i + 1, observerAt(i));
    }
    persistence.renew((n + 1) * LEASE_RENEW_MS, n + 1); // attached again at the end
    store.release();
    await persistence.flushed();
    await settle();
    await persistence.flushed();
    // One write per call would be about 2 * n.
    expect(store.writes.length).toBeLessThanOrEqual(6);
    expect(store.writes).toEqual([
      'acknowledge 1',
      'setSuspended null',
      `acknowledge ${n + 1}`,
      `setObserver ${n}`,
      'setSuspended null',
    ]);
    const stored = (await store.get(token))!.record;
    expect(stored.agent_ack).toBe(n + 1);
    expect(stored.suspended_at_ms).toBeNull();
    expect(stored.observer?.positions).toEqual([['state', n]]);
    expect(failed).toEqual([]);
  });

  it('a round writes the acknowledgement, then the positions, then the suspension; values arriving during a round go in the next', async () => {
    const { store, token, persistence } = await claimedSession();
    store.hold();
    persistence.suspended(100, 2, observerAt(5));
    await settle();
    expect(store.writes).toEqual(['acknowledge 2']); // this round took its values when it started
    persistence.attached(3);
    persistence.suspended(200, 4, observerAt(9));
    store.release();
    await persistence.flushed();
    await settle();
    await persistence.flushed();
    expect(store.writes).toEqual([
      'acknowledge 2',
      'setObserver 5',
      'setSuspended 100',
      'acknowledge 4',
      'setObserver 9',
      'setSuspended 200',
    ]);
    const stored = (await store.get(token))!.record;
    expect(stored.suspended_at_ms).toBe(200);
    expect(stored.observer?.positions).toEqual([['state', 9]]);
  });

  it('a failed write in a round does not drop the others', async () => {
    const { store, token, persistence, failed } = await claimedSession();
    store.failAcknowledge = true;
    persistence.suspended(100, 2, observerAt(5));
    await persistence.flushed();
    expect(failed).toEqual(['acknowledge']);
    const stored = (await store.get(token))!.record;
    expect(stored.suspended_at_ms).toBe(100);
    expect(stored.observer?.positions).toEqual([['state', 5]]);
  });
});
