/**
 * Bad input at the edge: each gets the spec's answer, other agents keep being served, and nothing
 * leaks (connections, sessions, upstream sockets are released).
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoWorld, type RunningDemoWorld } from '../../src/demo/index.js';
import { AwpClient, HttpRefusal, initializeParams } from '../support/awp-client.js';
import { AGENT_TOKEN, startEdge, type TestEdge } from '../support/edge.js';

let arm: RunningDemoWorld;
let grid: RunningDemoWorld;
let edge: TestEdge;
/** An agent that keeps working while others misbehave. */
let bystander: AwpClient;

beforeAll(async () => {
  arm = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0 });
  grid = await startDemoWorld({ kind: 'grid', host: '127.0.0.1', port: 0 });
  edge = await startEdge(
    [
      { path: '/arm', upstream: arm.url },
      { path: '/grid', upstream: grid.url },
    ],
    { transport: { max_message_bytes: 65536 } },
  );
  bystander = await AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN });
  await bystander.ok('initialize', initializeParams());
  await bystander.ok('session.open', { embodiment: 'arm_01', mode: 'streaming' });
});

afterAll(async () => {
  bystander.close();
  await edge.close();
  await arm.close();
  await grid.close();
});

async function stillServed(): Promise<void> {
  const pong = await bystander.ok('ping', { origin_ns: 1 });
  expect(pong.origin_ns).toBe(1);
}

async function agent(path = '/arm'): Promise<AwpClient> {
  const a = await AwpClient.connect(edge.url(path), { credential: AGENT_TOKEN });
  await a.ok('initialize', initializeParams());
  return a;
}

async function refusal(
  url: string,
  options: Parameters<typeof AwpClient.connect>[1] = {},
  protocols?: string[],
): Promise<HttpRefusal> {
  try {
    if (protocols !== undefined) await rawUpgrade(url, protocols, options.credential);
    else await AwpClient.connect(url, options);
  } catch (err) {
    if (err instanceof HttpRefusal) return err;
    throw err;
  }
  throw new Error('the connection was accepted');
}

describe('bad input', () => {
  it('AWP-CTL-006 invalid JSON gets -32700 and a batch gets -32600; the connection keeps serving', async () => {
    const a = await agent();
    a.send('{"jsonrpc": "2.0", "id": 1, "method": ');
    expect((await a.waitFor((m) => m.error !== undefined)).error).toMatchObject({ code: -32700 });
    a.send('[{"jsonrpc":"2.0","id":5,"method":"ping","params":{"origin_ns":1}}]');
    expect(
      (await a.waitFor((m) => (m.error as { code?: number } | undefined)?.code === -32600)).id,
    ).toBeNull();
    expect((await a.ok('ping', { origin_ns: 7 })).origin_ns).toBe(7);
    a.close();
    await stillServed();
  });

  it('an oversized message closes that connection with 1009 only', async () => {
    const a = await agent();
    a.send(
      JSON.stringify({
        jsonrpc: '2.0',
        id: 9,
        method: 'ping',
        params: { origin_ns: 1, pad: 'x'.repeat(70_000) },
      }),
    );
    expect((await a.waitClosed()).code).toBe(1009);
    await stillServed();
  });

  it('AWP-SEC-002 a missing or wrong credential is refused before any upgrade', async () => {
    expect((await refusal(edge.url('/arm'))).status).toBe(401);
    expect((await refusal(edge.url('/arm'), { credential: 'not-the-token' })).status).toBe(401);
    await stillServed();
  });

  it('AWP-SEC-006 a URL carrying a credential is refused', async () => {
    const r = await refusal(`${edge.url('/arm')}?access_token=${AGENT_TOKEN}`, { credential: AGENT_TOKEN });
    expect(r.status).toBe(400);
    expect(r.body).toMatch(/AWP-SEC-006/);
    expect(r.body).not.toContain(AGENT_TOKEN);
    expect((await refusal(`${edge.url('/arm')}?token=abc`, { credential: AGENT_TOKEN })).status).toBe(400);
  });

  it('AWP-SEC-005 the awp.bearer.<credential> subprotocol authenticates, and only "awp" is selected', async () => {
    const headers = await rawUpgrade(edge.url('/arm'), ['awp', `awp.bearer.${AGENT_TOKEN}`]);
    expect(headers['sec-websocket-protocol']).toBe('awp');
    expect(JSON.stringify(headers)).not.toContain(AGENT_TOKEN);
    const a = await AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN, viaSubprotocol: true });
    expect(a.ws.protocol).toBe('awp');
    await a.ok('initialize', initializeParams());
    a.close();
  });

  it('an unknown route gets an HTTP 404 before any upgrade', async () => {
    expect((await refusal(edge.url('/nowhere'), { credential: AGENT_TOKEN })).status).toBe(404);
  });

  it('AWP-CTL-007 a second session.open on one connection gets AWP_SESSION_EXISTS', async () => {
    const a = await agent('/grid');
    await a.ok('session.open', { embodiment: 'avatar_0', mode: 'lockstep' });
    const second = await a.call('session.open', { embodiment: 'avatar_0', mode: 'lockstep' });
    expect(second.error).toMatchObject({
      code: 2004,
      message: 'AWP_SESSION_EXISTS',
      data: { retryable: false },
    });
    await a.ok('session.close', {});
    a.close();
    await stillServed();
  });

  it('AWP-CTL-009 an integer above 2^53 - 1 gets AWP_INTEGER_RANGE and ends only that session (1002)', async () => {
    const a = await agent();
    await a.ok('session.open', { mode: 'streaming' });
    a.send('{"jsonrpc":"2.0","id":77,"method":"ping","params":{"origin_ns":9007199254740993}}');
    expect((await a.waitFor((m) => m.id === 77)).error).toMatchObject({
      code: 2006,
      message: 'AWP_INTEGER_RANGE',
    });
    expect(await a.waitClosed()).toEqual({ code: 1002, reason: 'AWP_INTEGER_RANGE' });
    await stillServed();
  });

  it('AWP-SEC-004 AWP-TRN-013 a session token used on another session route, or with no live control connection, fails the stream connection', async () => {
    const g = await agent('/grid');
    const ready = await g.ok('session.open', { embodiment: 'avatar_0', mode: 'lockstep' });
    const token = ready.session_token as string;
    // The grid session's token at the arm route's stream endpoint.
    expect((await refusal(`${edge.url('/arm')}/stream`, { credential: token })).status).toBe(401);
    expect((await refusal(`${edge.url('/arm')}/stream`, { credential: 'made-up-token' })).status).toBe(401);
    g.drop();
    await until(() => edge.edge.ctx.registry.attachedSession(token) === undefined);
    expect((await refusal(`${edge.url('/grid')}/stream`, { credential: token })).status).toBe(401);
    // Resume and close, so the embodiment is released for the tests that follow.
    const back = await agent('/grid');
    await back.ok('session.resume', { session_token: token, last_status_seq: 0 });
    await back.ok('session.close', {});
    back.close();
  });

  it('AWP-TRN-013 AWP-DAT-010 a text message or a malformed frame on a stream connection closes it with 1002 AWP_MALFORMED', async () => {
    const a = await agent('/grid');
    const ready = await a.ok('session.open', {
      embodiment: 'avatar_0',
      mode: 'lockstep',
      subscribe: [{ channel: 'grid_view' }],
    });
    const endpoint = (ready.stream_endpoints as { binding: string; url: string }[]).find(
      (e) => e.binding === 'ws',
    )!;
    const s1 = await AwpClient.connect(endpoint.url, { credential: ready.session_token as string });
    s1.ws.send('{"not":"a frame"}');
    expect(await s1.waitClosed()).toEqual({ code: 1002, reason: 'AWP_MALFORMED' });
    const s2 = await AwpClient.connect(endpoint.url, { credential: ready.session_token as string });
    s2.ws.send(Buffer.from('AWPX not a frame at all, not even close'));
    expect(await s2.waitClosed()).toEqual({ code: 1002, reason: 'AWP_MALFORMED' });
    await a.ok('session.close', {});
    a.close();
    await stillServed();
  });

  it('releases every connection and session after the agents leave', async () => {
    const before = edge.edge.ctx.registry.size;
    const a = await agent('/grid');
    await a.ok('session.open', { embodiment: 'avatar_0', mode: 'lockstep' });
    expect(edge.edge.ctx.registry.size).toBe(before + 1);
    await a.ok('session.close', {});
    a.close();
    await until(() => edge.edge.ctx.registry.size === before && edge.edge.ctx.connections.size === 1).catch(
      () => {
        throw new Error(
          `registry ${edge.edge.ctx.registry.size} (was ${before}), connections ${edge.edge.ctx.connections.size}`,
        );
      },
    );
    // Only the bystander remains; the metrics agree.
    const metrics = await (await fetch(`${edge.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/awp_edge_agent_connections\{route="r0",kind="control"\} 1\b/);
  });
});

/** A hand-made upgrade, to see the raw response headers. */
function rawUpgrade(url: string, protocols: string[], credential?: string): Promise<Record<string, string>> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(u.port), u.hostname, () => {
      sock.write(
        [
          `GET ${u.pathname}${u.search} HTTP/1.1`,
          `Host: ${u.host}`,
          'Upgrade: websocket',
          'Connection: Upgrade',
          'Sec-WebSocket-Version: 13',
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
          `Sec-WebSocket-Protocol: ${protocols.join(', ')}`,
          ...(credential !== undefined ? [`Authorization: Bearer ${credential}`] : []),
          '',
          '',
        ].join('\r\n'),
      );
    });
    let data = '';
    sock.on('data', (d) => {
      data += d.toString();
      const end = data.indexOf('\r\n\r\n');
      if (end < 0) return;
      sock.destroy();
      const [status, ...lines] = data.slice(0, end).split('\r\n');
      const code = Number(status!.split(' ')[1]);
      if (code !== 101) return reject(new HttpRefusal(code, data.slice(end + 4)));
      resolve(
        Object.fromEntries(
          lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
        ),
      );
    });
    sock.on('error', reject);
  });
}

async function until(cond: () => boolean, timeoutMs = 3000): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!cond()) {
    if (performance.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}
