/**
 * While the edge dials the world's side of an agent's stream connection, the agent's control messages
 * wait (the world must see the stream first, AWP-TRN-012). What waits is bounded like any queue for a
 * peer: an agent sending more than transport.max_queued_bytes meanwhile is closed (1008), alone.
 */
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { AwpClient } from '../support/awp-client.js';
import { agentOn, pingOk, rigPerTest, sessionOn, until } from './support.js';

const { cleanups, start } = rigPerTest();

/** A TCP server that takes connections and never answers: a stream endpoint whose dial hangs. */
async function silentServer(): Promise<{ server: Server; sockets: Socket[]; port: number }> {
  const sockets: Socket[] = [];
  const server = createServer((s) => sockets.push(s));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return { server, sockets, port: (server.address() as AddressInfo).port };
}

const MAX_QUEUED = 65_536;

describe('control messages held while a stream connection is dialled', () => {
  it('an agent sending more than transport.max_queued_bytes while its stream is dialled is closed (1008); others go on', async () => {
    const silent = await silentServer();
    const r = await start({
      transport: { max_queued_bytes: MAX_QUEUED },
      timing: { upstream_connect_timeout_ms: 10_000 },
    });
    r.world.sessionFields = {
      stream_endpoints: [
        { binding: 'ws', url: `ws://127.0.0.1:${silent.port}/stream` },
        { binding: 'inline' },
      ],
    };
    const { agent, ready } = await sessionOn(r.edge, '/w');
    cleanups.push(() => agent.close());
    const endpoint = (ready.stream_endpoints as { binding: string; url: string }[]).find(
      (e) => e.binding === 'ws',
    )!;
    // The agent's stream connection: the edge dials the world's side, which never answers.
    void AwpClient.connect(endpoint.url, { credential: ready.session_token as string }, 15_000).then(
      (s) => cleanups.push(() => s.close()),
      () => undefined,
    );
    await until(() => silent.sockets.length > 0, 5000, "the edge's dial of the world's stream endpoint");
    const pad = 'x'.repeat(1000);
    for (let i = 0; i < (2 * MAX_QUEUED) / 1000; i++)
      agent.send({ jsonrpc: '2.0', id: `p${i}`, method: 'ping', params: { origin_ns: i, pad } });
    expect(await agent.waitClosed(5000)).toEqual({ code: 1008, reason: 'send queue full' });
    await pingOk(r.bystander);
  }, 30_000);

  it("an agent sending more than transport.max_queued_bytes while the world does not finish the edge's handshake is closed (1008); others go on", async () => {
    const r = await start({ transport: { max_queued_bytes: MAX_QUEUED } });
    // The first agent's initialize fills the route's manifest cache; the world answers none after it.
    const first = await agentOn(r.edge, '/w');
    first.close();
    r.world.responder = (msg) => (msg.method === 'initialize' ? null : undefined);
    const agent = await agentOn(r.edge, '/w'); // answered from the cache: no world connection yet
    cleanups.push(() => agent.close());
    const connections = r.world.control.length;
    // session.open needs the world: the edge dials, sends the cached initialize first, and waits for it.
    agent.send({ jsonrpc: '2.0', id: 'open', method: 'session.open', params: { embodiment: 'e1' } });
    await until(
      () =>
        r.world.control.length > connections &&
        r.world.allMessages().filter((m) => m.method === 'initialize').length >= 2,
      5000,
      "the edge's initialize on its new world connection",
    );
    const pad = 'x'.repeat(1000);
    for (let i = 0; i < (2 * MAX_QUEUED) / 1000; i++)
      agent.send({ jsonrpc: '2.0', id: `p${i}`, method: 'ping', params: { origin_ns: i, pad } });
    expect(await agent.waitClosed(5000)).toEqual({ code: 1008, reason: 'send queue full' });
    expect(r.world.allMessages().filter((m) => m.method === 'ping')).toEqual([]); // none went upstream
    await pingOk(r.bystander);
  }, 30_000);
});
