/** Operator budgets per agent credential, enforced at the edge in front of a demo world. */
import { connect as tcpConnect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoWorld, type RunningDemoWorld } from '../../src/demo/index.js';
import { AwpClient, HttpRefusal, initializeParams } from '../support/awp-client.js';
import { startEdge, type TestEdge } from '../support/edge.js';

let world: RunningDemoWorld;
let edge: TestEdge;
const LIMITED = 'limited-agent-credential';
const OTHER = 'other-agent-credential';

beforeAll(async () => {
  world = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0 });
  edge = await startEdge([{ path: '/arm', upstream: world.url }], {
    agents: { tokens: [LIMITED, OTHER] },
    budgets: { max_connections: 3, max_sessions: 1, max_messages_per_second: 20, max_message_bytes: 4096 },
  });
});

afterAll(async () => {
  await edge.close();
  await world.close();
});

const connect = (credential = LIMITED) => AwpClient.connect(edge.url('/arm'), { credential });

/**
 * An upgrade request on a raw socket, with the credential: `version` 13 is valid, another is refused by
 * the engine after the edge accepted the credential; `leave` drops the socket as soon as it is sent.
 */
function rawUpgrade(version: string, leave: boolean): Promise<void> {
  const { hostname, port } = new URL(edge.url('/arm'));
  return new Promise((resolve) => {
    const s = tcpConnect(Number(port), hostname, () => {
      s.write(
        `GET /arm HTTP/1.1\r\nHost: ${hostname}:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: ${version}\r\nSec-WebSocket-Protocol: awp\r\n` +
          `Authorization: Bearer ${LIMITED}\r\n\r\n`,
      );
      if (leave) s.destroy();
    });
    s.on('data', () => s.destroy());
    s.on('error', () => s.destroy());
    s.on('close', () => resolve());
    s.setTimeout(5000, () => s.destroy());
  });
}

async function metric(reason: string): Promise<number> {
  const text = await (await fetch(`${edge.adminUrl}/metrics`)).text();
  const m = new RegExp(`awp_edge_rejections_total\\{route="r0",reason="${reason}"\\} (\\d+)`).exec(text);
  return m === null ? 0 : Number(m[1]);
}

describe('operator budgets', () => {
  it('refuses a connection beyond the credential budget with HTTP 429, and serves other credentials', async () => {
    const held = [await connect(), await connect(), await connect()];
    await expect(connect()).rejects.toSatisfy((e) => e instanceof HttpRefusal && e.status === 429);
    const other = await connect(OTHER);
    await other.ok('initialize', initializeParams());
    other.close();
    for (const c of held) c.close();
    await new Promise((r) => setTimeout(r, 100));
    const again = await connect();
    again.close();
    expect(await metric('budget_connections')).toBeGreaterThanOrEqual(1);
  });

  it('gives a connection slot back when the handshake never completes (refused version, client gone)', async () => {
    // Each attempt passes the credential check (taking a slot), then never becomes a connection.
    for (let i = 0; i < 4; i++) await rawUpgrade('12', false);
    for (let i = 0; i < 4; i++) await rawUpgrade('13', true);
    // Releases follow the sockets' close events: a slot is free again within a bounded wait.
    let held: AwpClient[] = [];
    for (const end = Date.now() + 10_000; held.length < 3;) {
      try {
        held.push(await connect());
      } catch (err) {
        if (!(err instanceof HttpRefusal && err.status === 429) || Date.now() > end) throw err;
        for (const c of held) c.close();
        held = [];
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    await expect(connect()).rejects.toSatisfy((e) => e instanceof HttpRefusal && e.status === 429);
    for (const c of held) c.close();
    await new Promise((r) => setTimeout(r, 100));
  });

  it('answers a session beyond the budget with a retryable AWP_EDGE_BUDGET_EXCEEDED error', async () => {
    const a = await connect();
    await a.ok('initialize', initializeParams());
    await a.ok('session.open', { mode: 'streaming' }); // an observer session counts too
    const b = await connect();
    await b.ok('initialize', initializeParams());
    const refused = await b.call('session.open', { mode: 'streaming' });
    expect(refused.error).toMatchObject({
      code: -32004,
      message: 'AWP_EDGE_BUDGET_EXCEEDED',
      data: { retryable: true },
    });
    a.close();
    await new Promise((r) => setTimeout(r, 100));
    await b.ok('session.open', { mode: 'streaming' });
    b.close();
  });

  it('closes a connection that exceeds its message rate with 1008, and one that sends a message too large with 1009', async () => {
    const fast = await connect();
    for (let i = 0; i < 60; i++)
      fast.send({ jsonrpc: '2.0', id: i + 1, method: 'ping', params: { origin_ns: i } });
    expect((await fast.waitClosed()).code).toBe(1008);
    const big = await connect();
    big.send({ jsonrpc: '2.0', id: 1, method: 'ping', params: { origin_ns: 1, pad: 'x'.repeat(5000) } });
    expect((await big.waitClosed()).code).toBe(1009);
    const other = await connect(OTHER);
    expect((await other.ok('ping', { origin_ns: 5 })).origin_ns).toBe(5);
    other.close();
    expect(await metric('budget_messages_per_second')).toBeGreaterThanOrEqual(1);
    expect(await metric('budget_message_bytes')).toBeGreaterThanOrEqual(1);
  });
});
