/**
 * Durations a world grants that no Node timer can wait (issue: TimeoutOverflowWarning). setTimeout turns a
 * delay over 2^31 - 1 ms into 1 ms: a latest-wins channel granted 1e-7 Hz made the edge fire its command
 * pacer's timer every ms for as long as a frame was held, and a reconnect_window_ms of years forgot a
 * dropped agent's session (and ended its recording) 1 ms after it left.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_TIMER_MS } from '../../src/protocol/timer-delay.js';
import { parseRecords } from '../../src/recorder/read.js';
import type { Json } from '../support/awp-client.js';
import { agentOn, pingOk, rigPerTest, sessionOn, sleep, until } from './support.js';

const { cleanups, start } = rigPerTest();
const root = mkdtempSync(join(tmpdir(), 'awp-timer-overflow-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Counts the TimeoutOverflowWarnings this process emits until the returned function is called. */
function countOverflows(): { count: () => number; stop: () => void } {
  let n = 0;
  const listener = (w: Error) => {
    if (w.name === 'TimeoutOverflowWarning') n++;
  };
  process.on('warning', listener);
  const stop = () => process.off('warning', listener);
  cleanups.push(stop);
  return { count: () => n, stop };
}

function cmdFrame(seq: number): Json {
  return { channel_id: 2, seq, ts_mono_ns: seq * 1000, flags: 0, payload_b64: 'AAAA' };
}

describe('durations a world grants, beyond what a timer can wait', () => {
  it('AWP-DAT-003 a latest-wins channel granted 1e-7 Hz holds the newest command frame without a timer firing every ms', async () => {
    const r = await start();
    r.world.observationChannels.push({ id: 'cam', loss_class: 'latest-wins', modality: 'x', rate_hz: 10 });
    // The world grants what the agent asks, up to the declared rate; the schema only asks for > 0.
    r.world.responder = (msg) => {
      if (msg.method !== 'obs.subscribe') return undefined;
      const asked = ((msg.params as Json).channels as { rate_hz: number }[])[0]!.rate_hz;
      return {
        granted: [
          { channel: 'state', channel_id: 1, rate_hz: 10 },
          { channel: 'cam', channel_id: 2, rate_hz: Math.min(10, asked) },
        ],
      };
    };
    const { agent } = await sessionOn(r.edge, '/w');
    cleanups.push(() => agent.close());
    await agent.ok('obs.subscribe', { channels: [{ channel: 'cam', rate_hz: 1e-7 }] });

    const overflows = countOverflows();
    const forwarded = () =>
      r.world
        .allMessages()
        .filter((m) => m.method === 'cmd.frame')
        .map((m) => (m.params as Json).seq);
    agent.notify('cmd.frame', cmdFrame(1));
    agent.notify('cmd.frame', cmdFrame(2)); // held for the channel's next slot
    await until(() => forwarded().length > 0, 5000, 'the first command frame at the world');
    await sleep(300); // a 1 ms timer would have fired (and warned) a hundred times by now, however loaded
    agent.notify('cmd.frame', cmdFrame(3)); // replaces the held one
    await pingOk(agent); // the agent's control messages still pass the held frame
    await sleep(100);
    overflows.stop();
    expect(overflows.count()).toBe(0);
    expect(forwarded()).toEqual([1]); // frame 3 waits for its slot (at most 1000 s away)
    await pingOk(r.bystander);
  }, 20_000);

  // 31 years (cut to the longest timer), and none given (the registry's default, which the recording follows).
  for (const { window, kept } of [
    { window: 1e12, kept: MAX_TIMER_MS },
    { window: 0, kept: 30_000 },
  ])
    it(`AWP-CTL-005 a world's reconnect_window_ms of ${window} keeps a dropped agent's session resumable, and its recording open`, async () => {
      const dir = join(root, `window-${window}`);
      const r = await start({}, {}, { record: { dir, sessions: ['relay'] } });
      r.world.sessionFields = { reconnect_window_ms: window };
      const overflows = countOverflows();
      const first = await sessionOn(r.edge, '/w');
      const token = first.ready.session_token as string;
      first.agent.drop();
      await until(() => r.world.control.every((c) => c.closed), 5000, 'the upstream connection to close');
      await sleep(200); // a 1 ms expiry would have forgotten the session by now, however loaded

      const agent = await agentOn(r.edge, '/w');
      cleanups.push(() => agent.close());
      const resumed = await agent.ok('session.resume', { session_token: token, last_status_seq: 0 });
      expect(resumed.session_token).toBe(token);
      await pingOk(agent);
      await agent.ok('session.close', {});
      agent.close(); // the session's log ends with its connection
      overflows.stop();
      expect(overflows.count()).toBe(0);

      // One file for the whole session: its log stayed open while the agent was away.
      const files = () => readdirSync(dir).filter((f) => f.startsWith('w.'));
      const ended = () => files().some((f) => readFileSync(join(dir, f), 'utf8').includes('session_ended'));
      await until(ended, 10_000, 'the recording of the session to end');
      expect(files()).toHaveLength(1);
      const events = parseRecords(readFileSync(join(dir, files()[0]!), 'utf8'))
        .filter((rec) => rec.kind === 'edge')
        .map((rec) => rec.body);
      expect(events.find((b) => b.event === 'session_detached')?.kept_open_ms).toBe(kept);
      expect(events.map((b) => b.event)).toContain('session_resumed');
    }, 20_000);
});
