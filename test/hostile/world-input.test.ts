/**
 * A hostile world behind the edge (issue 12, item 8: "in both directions"): responses to ids the edge
 * never forwarded, lies about status_seq, deep nesting, malformed frames on a stream connection and
 * messages over transport.max_message_bytes. The agent sees only what the contract lets through, and
 * the edge keeps serving the other route.
 */
import { describe, expect, it } from 'vitest';
import { encodeFrame } from '../../src/protocol/frame-encode.js';
import { MAX_STATUS_SEQ_GAP } from '../../src/session/journal.js';
import { AwpClient, type Json } from '../support/awp-client.js';
import {
  deepArray,
  metric,
  pingOk,
  scrape,
  series,
  sessionOn,
  rigPerTest,
  until,
  type HostileRig,
} from './support.js';

const { cleanups, start } = rigPerTest();
let rig: HostileRig | undefined;

let tsNs = 1_000_000;
function statusNote(seq: unknown, actionId = 'a-1'): Json {
  tsNs += 1000;
  return {
    jsonrpc: '2.0',
    method: 'action.status',
    params: { action_id: actionId, state: 'executing', status_seq: seq, ts_mono_ns: tsNs },
  };
}

/** Sends a marker notification and waits until the agent has it: everything the world sent before is in. */
async function barrier(r: HostileRig, agent: AwpClient, seq: number): Promise<void> {
  r.world.send(statusNote(seq, `marker-${seq}`));
  await agent.waitNotification('action.status', (p) => p.action_id === `marker-${seq}`, 10_000);
}

describe('hostile world', () => {
  it('a result for an id the edge never forwarded, or a second result for one it did, never reaches the agent', async () => {
    rig = await start();
    const r = rig;
    const { agent } = await sessionOn(r.edge, '/w');
    cleanups.push(() => agent.close());
    // The world answers the agent's next ping twice.
    r.world.responder = (msg, conn) => {
      if (msg.method === 'ping')
        conn.ws.send(
          JSON.stringify({
            jsonrpc: '2.0',
            id: msg.id,
            result: { origin_ns: 666, receive_ns: 1, transmit_ns: 1 },
          }),
        );
      return undefined;
    };
    r.world.send({
      jsonrpc: '2.0',
      id: 'never-forwarded',
      result: { session_token: 'x', stream_endpoints: [] },
    });
    r.world.send({ jsonrpc: '2.0', id: 987654, result: {} });
    r.world.send({ jsonrpc: '2.0', id: 987655, error: { code: -32603, message: 'made up' } });
    const pong = await agent.call('ping', { origin_ns: 5 });
    await barrier(r, agent, 1);
    expect(
      agent.received.filter((m) => m.id === 'never-forwarded' || m.id === 987654 || m.id === 987655),
    ).toEqual([]);
    // Exactly one answer to the ping: the first, whichever the world wrote first.
    expect(agent.received.filter((m) => m.id === pong.id)).toHaveLength(1);
    const metrics = await scrape(r.edge);
    expect(
      metric(metrics, 'awp_edge_messages_dropped_total', {
        route: 'w',
        from: 'world',
        reason: 'unknown_response_id',
      }),
      series(metrics, 'awp_edge_messages_dropped_total'),
    ).toBeGreaterThanOrEqual(4);
    await pingOk(r.bystander);
  }, 20_000);

  it('a lying status_seq (backwards, duplicated) reaches the agent strictly increasing', async () => {
    rig = await start();
    const r = rig;
    const { agent } = await sessionOn(r.edge, '/w');
    cleanups.push(() => agent.close());
    for (const seq of [3, 2, 3, 1, 4, 4, 0, 5]) r.world.send(statusNote(seq));
    await barrier(r, agent, 6);
    const seqs = agent.statusSeqs();
    expect(seqs).toEqual([3, 4, 5, 6]);
    await pingOk(agent);
    await pingOk(r.bystander);
  }, 20_000);

  it('a world skipping status_seq past what a session may skip ends that session (agent 1014, world 1002); the edge goes on', async () => {
    rig = await start();
    const r = rig;
    const { agent } = await sessionOn(r.edge, '/w');
    cleanups.push(() => agent.close());
    const upstream = r.world.current()!;
    // Each jump is within MAX_STATUS_SEQ_GAP; together they skip more than MAX_SKIPPED_STATUS_SEQ.
    const jumps = [1, 1 + MAX_STATUS_SEQ_GAP, 1 + 2 * MAX_STATUS_SEQ_GAP];
    for (const seq of jumps) r.world.send(statusNote(seq));
    expect((await agent.waitClosed(10_000)).code).toBe(1014);
    await until(() => upstream.closed, 5000, 'the upstream connection to be closed');
    expect(upstream.closeCode).toBe(1002);
    expect(agent.statusSeqs()).toEqual(jumps.slice(0, 2));
    await pingOk(r.bystander);
  }, 20_000);

  it('a status_seq that is not a count (1.5, "2", -1) ends that session (agent 1014, world 1002); the edge goes on', async () => {
    rig = await start();
    const r = rig;
    for (const bad of [1.5, '2', -1]) {
      const { agent } = await sessionOn(r.edge, '/w');
      cleanups.push(() => agent.close());
      const upstream = r.world.current()!;
      r.world.send(statusNote(1));
      r.world.send(statusNote(bad));
      expect((await agent.waitClosed(10_000)).code).toBe(1014);
      await until(() => upstream.closed, 5000, 'the upstream connection to be closed');
      expect(upstream.closeCode).toBe(1002);
      expect(agent.statusSeqs()).toEqual([1]);
    }
    await pingOk(r.bystander);
  }, 30_000);

  it('a 5,000-deep nested notification from the world is dropped and counted; the edge and the session go on', async () => {
    rig = await start();
    const r = rig;
    const { agent } = await sessionOn(r.edge, '/w');
    cleanups.push(() => agent.close());
    r.world.sendRaw(
      `{"jsonrpc":"2.0","method":"world.event","params":{"status_seq":1,"event":"deep","data":${deepArray()}}}`,
    );
    r.world.sendRaw(
      `{"jsonrpc":"2.0","id":"world-deep-1","method":"ping","params":{"origin_ns":1,"x":${deepArray()}}}`,
    );
    await barrier(r, agent, 2);
    expect(agent.received.filter((m) => JSON.stringify(m).includes('[[[[[[[['))).toEqual([]);
    expect(agent.closed).toBeNull();
    const metrics = await scrape(r.edge);
    expect(
      metric(metrics, 'awp_edge_messages_dropped_total', { route: 'w', from: 'world', reason: 'too_deep' }),
      series(metrics, 'awp_edge_messages_dropped_total'),
    ).toBe(2);
    await pingOk(agent);
    await pingOk(r.bystander);
  }, 20_000);

  it('malformed binary frames on a stream connection from the world are never forwarded; the agent stream closes (1014), the session goes on', async () => {
    rig = await start();
    const r = rig;
    const { agent, ready } = await sessionOn(r.edge, '/w');
    cleanups.push(() => agent.close());
    const endpoint = (ready.stream_endpoints as { binding: string; url: string }[]).find(
      (e) => e.binding === 'ws',
    )!;
    const valid = encodeFrame({
      channel_id: 1,
      seq: 1,
      ts_mono_ns: 1000,
      flags: 0,
      vendor: [],
      payload: Buffer.from('{"q":[0,0]}'),
    });
    const longLength = Buffer.from(valid);
    longLength.writeUInt32LE(0xffffff00, 24); // payload_len (little-endian) far beyond the message
    const badVersion = Buffer.from(valid);
    badVersion[4] = 0xee; // version 1 is the only one
    const bigSeq = Buffer.from(valid);
    bigSeq.writeBigUInt64LE(2n ** 53n + 1n, 8); // AWP-CTL-009 in binary frames too
    const bad: [string, Buffer][] = [
      ['garbage', Buffer.from('AWPX this is not a frame at all')],
      ['truncated', valid.subarray(0, 20)],
      ['payload_len beyond the message', longLength],
      ['unknown version', badVersion],
      ['seq above 2^53-1', bigSeq],
    ];
    for (const [what, bytes] of bad) {
      const streamsBefore = r.world.streams.length;
      const s = await AwpClient.connect(endpoint.url, { credential: ready.session_token as string });
      cleanups.push(() => s.close());
      await until(
        () => r.world.streams.length > streamsBefore && !r.world.streams.at(-1)!.closed,
        5000,
        'the world stream connection',
      );
      r.world.sendStream(valid);
      await until(() => s.binary.length === 1, 5000, `the valid frame before the ${what} one`);
      r.world.sendStream(bytes);
      const closed = await s.waitClosed(5000);
      expect(closed.code, what).toBe(1014);
      expect(
        s.binary.map((b) => b.equals(valid)),
        what,
      ).toEqual([true]);
      await until(() => r.world.streams.at(-1)!.closed, 5000, 'the world stream connection to be closed');
    }
    await pingOk(agent);
    await pingOk(r.bystander);
  }, 30_000);

  it('a message over transport.max_message_bytes from the world closes the upstream, the agent gets 1014, the edge goes on', async () => {
    rig = await start({ transport: { max_message_bytes: 65_536 } });
    const r = rig;
    const { agent } = await sessionOn(r.edge, '/w');
    cleanups.push(() => agent.close());
    const upstream = r.world.current()!;
    r.world.send({
      jsonrpc: '2.0',
      method: 'world.event',
      params: { status_seq: 1, event: 'huge', pad: 'x'.repeat(200_000) },
    });
    expect((await agent.waitClosed(10_000)).code).toBe(1014);
    await until(() => upstream.closed, 5000, 'the upstream connection to be closed');
    expect(upstream.closeCode).toBe(1009);
    expect(agent.received.filter((m) => (m.params as Json | undefined)?.event === 'huge')).toEqual([]);
    await pingOk(r.bystander);
    const fresh = await sessionOn(r.edge, '/w');
    await pingOk(fresh.agent);
    fresh.agent.close();
  }, 20_000);
});
