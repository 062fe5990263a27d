/**
 * An agent's stream connections (AWP-TRN-013): one session token opening stream connection after stream
 * connection does not make the edge hold, and dial the world for, all of them. Each newer one replaces
 * the older (the agent may reconnect its stream at any time, AWP-TRN-010), and the newest carries frames.
 * Each one is charged to the credential's message budget, since each makes the edge dial the world.
 */
import { describe, expect, it } from 'vitest';
import { encodeFrame } from '../../src/protocol/frame-encode.js';
import { FLAG_KEYFRAME } from '../../src/protocol/frame.js';
import { AwpClient, HttpRefusal } from '../support/awp-client.js';
import { pingOk, rigPerTest, sessionOn, until, type HostileRig } from './support.js';

const { cleanups, start } = rigPerTest();

const CONNECTIONS = 20;

/** A session on /w: its agent, its `ws` stream endpoint and the session token that opens it. */
async function streamOf(r: HostileRig): Promise<{ agent: AwpClient; url: string; credential: string }> {
  const { agent, ready } = await sessionOn(r.edge, '/w');
  cleanups.push(() => agent.close());
  const endpoints = ready.stream_endpoints as { binding: string; url: string }[];
  return {
    agent,
    url: endpoints.find((e) => e.binding === 'ws')!.url,
    credential: ready.session_token as string,
  };
}

describe("a session's stream connections", () => {
  it('AWP-TRN-010 each newer stream connection of a session replaces the older; the world holds one, and frames reach the newest', async () => {
    const r = await start();
    const { agent, url, credential } = await streamOf(r);
    const streams: AwpClient[] = [];
    for (let i = 0; i < CONNECTIONS; i++) {
      const s = await AwpClient.connect(url, { credential });
      cleanups.push(() => s.close());
      streams.push(s);
    }
    const closes = await Promise.all(streams.slice(0, -1).map((s) => s.waitClosed(5000)));
    expect(closes).toEqual(
      Array.from({ length: CONNECTIONS - 1 }, () => ({
        code: 1000,
        reason: 'replaced by a newer stream connection',
      })),
    );
    await until(
      () => r.world.streams.filter((s) => !s.closed).length === 1,
      5000,
      "the world's stream connections to come down to one",
    );
    const frame = encodeFrame({
      channel_id: 1,
      seq: 1,
      ts_mono_ns: 1000,
      ts_send_ns: 1000,
      flags: FLAG_KEYFRAME,
      vendor: [],
      payload: Buffer.from('state'),
    });
    r.world.sendStream(frame);
    const newest = streams.at(-1)!;
    await until(() => newest.binary.length > 0, 5000, 'the frame on the newest stream connection');
    expect(newest.binary[0]!.equals(frame)).toBe(true);
    await pingOk(agent);
  }, 30_000);

  it("charges each stream connection to the credential's message budget: past it, HTTP 429 until it refills", async () => {
    const r = await start({ budgets: { max_messages_per_second: 10 } });
    const { agent, url, credential } = await streamOf(r);
    // 40 at once, 10 a second (some spent by the session's own messages): most are refused.
    const tries = await Promise.allSettled(
      Array.from({ length: 2 * CONNECTIONS }, () => AwpClient.connect(url, { credential })),
    );
    for (const t of tries) if (t.status === 'fulfilled') cleanups.push(() => t.value.close());
    const refusals = tries.flatMap((t) => (t.status === 'rejected' ? [t.reason as unknown] : []));
    expect(refusals.length).toBeGreaterThanOrEqual(CONNECTIONS);
    for (const refusal of refusals) {
      expect(refusal).toBeInstanceOf(HttpRefusal);
      expect((refusal as HttpRefusal).status).toBe(429);
      expect((refusal as HttpRefusal).body).toContain('message budget');
    }
    // The bucket refills (one second's worth at most): a stream connection opens again, and control works.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const again = await AwpClient.connect(url, { credential });
    cleanups.push(() => again.close());
    await pingOk(agent);
  }, 30_000);
});
