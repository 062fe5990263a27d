/**
 * A slow session store under a world sending statuses fast: the edge writes each session's journal one
 * write at a time, each carrying what arrived meanwhile, instead of one write per status each carrying
 * the whole tail not yet durable (quadratic bytes queued at the store while it is slow). What the world
 * sends while a new session is written waits for the agent, bounded like its send queue.
 */
import { describe, expect, it } from 'vitest';
import { MAX_WRITE_ENTRIES, type JournalEntry } from '../../src/session/journal.js';
import { MemorySessionStore } from '../../src/store/memory-store.js';
import { StoreUnavailableError } from '../../src/store/redis-store.js';
import type { Json } from '../support/awp-client.js';
import { agentOn, pingOk, rigPerTest, sessionOn, sleep, until } from './support.js';

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

  it("a world sending while the session's creation is written to the store fills the agent's send queue: past transport.max_queued_bytes the agent is closed (1008), others go on", async () => {
    let release = (): void => undefined;
    let stall = false; // not the bystander's session
    let creating = false;
    class StalledCreate extends MemorySessionStore {
      override async create(record: Parameters<MemorySessionStore['create']>[0]): Promise<number> {
        if (!stall) return super.create(record);
        creating = true;
        await new Promise<void>((resolve) => (release = resolve));
        return super.create(record);
      }
    }
    const r = await start({ transport: { max_queued_bytes: 1 << 20 } }, { store: new StalledCreate() });
    const agent = await agentOn(r.edge, '/w');
    stall = true;
    agent.send({
      jsonrpc: '2.0',
      id: 1,
      method: 'session.open',
      params: { embodiment: 'e1', mode: 'streaming' },
    });
    await until(() => creating, 5000, 'the session to be written to the store');
    const detail = 'x'.repeat(64 * 1024);
    for (let i = 0; i < 40; i++) {
      const params = { event: `e-${i}`, ts_mono_ns: 1, status_seq: r.world.seq(), detail };
      r.world.send({ jsonrpc: '2.0', method: 'world.event', params });
    }
    // Closed while the write still waits (2.5 MB sent, 1 MiB kept), and the edge serves others.
    expect(await agent.waitClosed(10_000)).toEqual({ code: 1008, reason: 'send queue full' });
    await pingOk(r.bystander);
    release();
    await pingOk(r.bystander);
  }, 30_000);
});
