/**
 * A slow session store under a world sending statuses fast: the edge writes each session's journal one
 * write at a time, each carrying what arrived meanwhile, instead of one write per status each carrying
 * the whole tail not yet durable (quadratic bytes queued at the store while it is slow).
 */
import { describe, expect, it } from 'vitest';
import type { JournalEntry } from '../../src/session/journal.js';
import { MemorySessionStore } from '../../src/store/memory-store.js';
import type { Json } from '../support/awp-client.js';
import { pingOk, rigPerTest, sessionOn, sleep, until } from './support.js';

const { start } = rigPerTest();

const STORE_DELAY_MS = 40;

/** The memory store, each append taking STORE_DELAY_MS; counts the entries it was asked to write. */
class SlowStore extends MemorySessionStore {
  written = 0;
  writes = 0;
  override async append(token: string, fence: number, entries: readonly JournalEntry[]): Promise<void> {
    this.writes++;
    this.written += entries.length;
    await sleep(STORE_DELAY_MS);
    return super.append(token, fence, entries);
  }
}

describe('slow session store', () => {
  it('AWP-CTL-010 statuses arriving faster than the store writes are journaled in coalesced writes, every one of them durable', async () => {
    const store = new SlowStore();
    const r = await start({}, { store });
    const { agent, ready } = await sessionOn(r.edge, '/w');
    const n = 300;
    for (let seq = 1; seq <= n; seq++)
      r.world.send({
        jsonrpc: '2.0',
        method: 'action.status',
        params: { action_id: 'a-1', state: 'executing', status_seq: seq, ts_mono_ns: 1000 + seq },
      });
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
});
