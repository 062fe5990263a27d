/**
 * A slow session store under a world sending statuses fast: the edge writes each session's journal one
 * write at a time, each carrying what arrived meanwhile, instead of one write per status each carrying
 * the whole tail not yet durable (quadratic bytes queued at the store while it is slow).
 */
import { describe, expect, it } from 'vitest';
import { MAX_WRITE_ENTRIES, type JournalEntry } from '../../src/session/journal.js';
import { MemorySessionStore } from '../../src/store/memory-store.js';
import { StoreUnavailableError } from '../../src/store/redis-store.js';
import type { Json } from '../support/awp-client.js';
import { pingOk, rigPerTest, sessionOn, sleep, until } from './support.js';

const { start } = rigPerTest();

const STORE_DELAY_MS = 40;

/**
 * The memory store, each append taking STORE_DELAY_MS (or failing at once while `down`); counts the
 * entries it was asked to write, and the most one write carried.
 */
class SlowStore extends MemorySessionStore {
  written = 0;
  writes = 0;
  largest = 0;
  down = false;
  override async append(token: string, fence: number, entries: readonly JournalEntry[]): Promise<void> {
    this.writes++;
    this.written += entries.length;
    this.largest = Math.max(this.largest, entries.length);
    if (this.down) throw new StoreUnavailableError('store down (test)');
    await sleep(STORE_DELAY_MS);
    return super.append(token, fence, entries);
  }
}

function status(seq: number): Json {
  return {
    jsonrpc: '2.0',
    method: 'action.status',
    params: { action_id: 'a-1', state: 'executing', status_seq: seq, ts_mono_ns: 1000 + seq },
  };
}

const durableSeqs = async (store: SlowStore, token: string): Promise<number[]> =>
  ((await store.get(token))?.journal ?? []).map((e) => e.status_seq);

describe('slow session store', () => {
  it('AWP-CTL-010 statuses arriving faster than the store writes are journaled in coalesced writes, every one of them durable', async () => {
    const store = new SlowStore();
    const r = await start({}, { store });
    const { agent, ready } = await sessionOn(r.edge, '/w');
    const n = 300;
    for (let seq = 1; seq <= n; seq++) r.world.send(status(seq));
    await agent.waitNotification('action.status', (p: Json) => p.status_seq === n, 10_000);
    const token = ready.session_token as string;
    await until(
      async () => (await store.get(token))?.journal.length === n,
      10_000,
      'every status durable in the store',
    );
    expect((await store.get(token))!.journal.map((e) => e.status_seq)).toEqual(
      Array.from({ length: n }, (_, i) => i + 1),
    );
    // Each entry is written about once (one per status was n * (n + 1) / 2 = 45,150 entries).
    expect(store.written).toBeLessThanOrEqual(2 * n);
    expect(store.writes).toBeLessThan(n);
    await pingOk(agent);
    agent.close();
  }, 30_000);

  it('AWP-CTL-010 statuses arriving during a store outage: each failed write carries a bounded step of the tail, and the whole tail is durable in steps once the store is back', async () => {
    const store = new SlowStore();
    const r = await start({}, { store });
    const { agent, ready } = await sessionOn(r.edge, '/w');
    const token = ready.session_token as string;
    store.down = true;
    const n = 2000;
    for (let seq = 1; seq <= n; seq++) r.world.send(status(seq));
    await agent.waitNotification('action.status', (p: Json) => p.status_seq === n, 10_000);
    // One write of the whole tail per status would be n * (n + 1) / 2 = 2,001,000 entries.
    expect(store.largest).toBe(MAX_WRITE_ENTRIES);
    expect(store.written).toBeLessThanOrEqual(n * MAX_WRITE_ENTRIES);
    store.down = false;
    r.world.send(status(n + 1)); // the next status writes again, from the oldest entry not durable
    const all = Array.from({ length: n + 1 }, (_, i) => i + 1);
    await until(async () => (await durableSeqs(store, token)).length === n + 1, 20_000, 'the tail durable');
    expect(await durableSeqs(store, token)).toEqual(all);
    expect(store.largest).toBe(MAX_WRITE_ENTRIES);
    await pingOk(agent);
    agent.close();
  }, 40_000);
});
