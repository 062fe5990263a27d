/**
 * A session whose agent never acknowledged (AWP-CTL-010 makes acknowledging optional) holds a long
 * journal. Its resume replays all of it, however much more than transport.max_queued_bytes: the journal
 * holds those texts anyway, so the agent's send queue takes them as the agent reads, instead of closing
 * it 1008 on every resume (the session could never be resumed).
 */
import { describe, expect, it } from 'vitest';
import type { Json } from '../support/awp-client.js';
import { agentOn, pingOk, rigPerTest, sessionOn, until } from './support.js';

const { cleanups, start } = rigPerTest();

const STATUSES = 4000;
const PAD = 'x'.repeat(4000); // 16 MB of journal: more than the kernel's socket buffers take at once

describe('a long journal', () => {
  it('AWP-CTL-008 a resume replays a journal far longer than transport.max_queued_bytes, every status once, in order', async () => {
    const r = await start({ transport: { max_queued_bytes: 65_536 } });
    const first = await sessionOn(r.edge, '/w');
    const token = first.ready.session_token as string;
    // Live, in batches the agent reads as they come (its send queue stays short).
    for (let seq = 1; seq <= STATUSES; seq++) {
      r.world.send({
        jsonrpc: '2.0',
        method: 'action.status',
        params: { action_id: 'a-1', state: 'executing', status_seq: seq, ts_mono_ns: 1000 + seq, pad: PAD },
      });
      if (seq % 100 === 0)
        await first.agent.waitNotification('action.status', (p: Json) => p.status_seq === seq, 10_000);
    }
    first.agent.drop();
    await until(() => r.world.control.every((c) => c.closed), 5000, 'the upstream connection to close');
    const agent = await agentOn(r.edge, '/w');
    cleanups.push(() => agent.close());
    const resumed = await agent.ok('session.resume', { session_token: token, last_status_seq: 0 }, 20_000);
    expect(resumed.session_token).toBe(token);
    const statuses = (): Json[] =>
      agent.received.filter((m) => m.method === 'action.status').map((m) => m.params as Json);
    await until(() => statuses().length >= STATUSES || agent.closed !== null, 30_000, 'the replay');
    expect(agent.closed).toBeNull();
    const seqs = statuses().map((p) => p.status_seq);
    expect(seqs).toEqual(Array.from({ length: STATUSES }, (_, i) => i + 1));
    await pingOk(agent);
  }, 60_000);
});
