/**
 * Hostile agents in session over real sockets (issue 12): duplicate request ids, bad counts in
 * session.resume, agents that vanish, out-of-range integers, responses to ids the world never sent.
 * Each case checks the agent's answer, what the world saw (the edge never speaks for the agent
 * upstream), and that an agent on another route keeps being served.
 */
import { describe, expect, it } from 'vitest';
import { AwpClient, initializeParams, type Json } from '../support/awp-client.js';
import { AGENT_TOKEN } from '../support/edge.js';
import {
  agentBound,
  agentOn,
  metric,
  pingOk,
  scrape,
  series,
  sessionOn,
  sleep,
  rigPerTest,
  until,
  type HostileRig,
} from './support.js';
import { WORLD_TOKEN } from './world.js';

const { cleanups, start } = rigPerTest();
let rig: HostileRig | undefined;

function track(a: AwpClient): AwpClient {
  cleanups.push(() => a.close());
  return a;
}

function errorCode(m: Json): unknown {
  return (m.error as { code?: unknown } | undefined)?.code;
}

/** Nothing agent-bound names the world's own token or the world's address (issue 12 item 8 invariant). */
function expectNoWorldLeak(r: HostileRig, agent: AwpClient): void {
  const text = agentBound(agent);
  expect(text).not.toContain(WORLD_TOKEN);
  expect(text).not.toContain(`127.0.0.1:${r.world.port}`);
}

/** The edge's stream endpoints in a session.ready: every URL at the edge, none at the world. */
function expectEdgeEndpoints(r: HostileRig, ready: Json): void {
  const endpoints = ready.stream_endpoints as { binding: string; url?: string }[];
  expect(Array.isArray(endpoints)).toBe(true);
  const urls = endpoints.filter((e) => e.url !== undefined).map((e) => e.url!);
  expect(urls.length).toBeGreaterThan(0);
  for (const u of urls) {
    expect(new URL(u).port).toBe(String(r.edge.edge.port));
    expect(u).not.toContain(`:${r.world.port}`);
  }
}

/**
 * Sends `method` with id 7 and, before any answer can arrive, `world.manifest` with the same id: the
 * second must be refused -32600 (the id is pending). Returns the first one's result.
 */
async function sendTwiceWithId7(agent: AwpClient, method: string, params: Json, what: string): Promise<Json> {
  agent.send({ jsonrpc: '2.0', id: 7, method, params });
  agent.send({ jsonrpc: '2.0', id: 7, method: 'world.manifest', params: {} });
  const refusal = await agent.waitFor(
    (m) => m.id === 7 && errorCode(m) === -32600,
    10_000,
    'the -32600 refusal',
  );
  expect(JSON.stringify((refusal.error as Json).data ?? {})).toMatch(/pending/i);
  const answer = await agent.waitFor((m) => m.id === 7 && m.result !== undefined, 10_000, what);
  return answer.result as Json;
}

/**
 * After sendTwiceWithId7: the world got only the first request (`method`), the agent both answers and
 * nothing of the world's, and both it and the bystander are still served.
 */
async function expectFirstOnlyForwarded(
  r: HostileRig,
  agent: AwpClient,
  sevens: Json[],
  method: string,
): Promise<void> {
  expect(sevens.map((m) => m.method)).toEqual([method]);
  expect(agent.received.filter((m) => m.id === 7)).toHaveLength(2);
  expectNoWorldLeak(r, agent);
  await pingOk(agent);
  await pingOk(r.bystander);
}

/** Requests with `id` the world received on its control connections. */
function worldRequestsWithId(r: HostileRig, id: unknown): Json[] {
  return r.world.allMessages().filter((m) => m.id === id && typeof m.method === 'string');
}

describe('hostile agent: request ids', () => {
  it('session.open id 7 then world.manifest id 7: the second is refused -32600 and never forwarded; the agent gets the edge token and edge URLs', async () => {
    rig = await start();
    const agent = track(await agentOn(rig.edge, '/w'));
    const result = await sendTwiceWithId7(
      agent,
      'session.open',
      { embodiment: 'e1', mode: 'streaming' },
      'the session.open result',
    );
    expect(typeof result.session_token).toBe('string');
    expect(result.session_token).not.toBe(WORLD_TOKEN);
    expectEdgeEndpoints(rig, result);
    await sleep(200); // a forwarded duplicate would be on the wire right behind the first
    // The world saw one request with id 7, the session.open; the session is the edge's (pings go through).
    await expectFirstOnlyForwarded(rig, agent, worldRequestsWithId(rig, 7), 'session.open');
  }, 20_000);

  it('session.resume id 7 then a duplicate id 7: the second is refused -32600 and never forwarded; the resume result carries the edge token and edge URLs', async () => {
    rig = await start();
    const first = await sessionOn(rig.edge, '/w');
    const edgeToken = first.ready.session_token as string;
    expect(edgeToken).not.toBe(WORLD_TOKEN);
    first.agent.drop();
    await until(() => rig!.world.control.every((c) => c.closed), 5000, 'the upstream connection to close');
    const agent = track(await agentOn(rig.edge, '/w'));
    const before = new Set(rig.world.control.map((c) => c.id));
    const result = await sendTwiceWithId7(
      agent,
      'session.resume',
      { session_token: edgeToken, last_status_seq: 0 },
      'the resume result',
    );
    expect(result.session_token).toBe(edgeToken);
    expectEdgeEndpoints(rig, result);
    await sleep(200);
    const fresh = rig.world.control.filter((c) => !before.has(c.id));
    const sevens = fresh
      .flatMap((c) => c.messages)
      .filter((m): m is Json => m?.id === 7 && typeof m.method === 'string');
    await expectFirstOnlyForwarded(rig, agent, sevens, 'session.resume');
  }, 20_000);

  it("an agent's response to an id the world never sent is dropped (the world never receives it) and counted in awp_edge_messages_dropped_total", async () => {
    rig = await start();
    const { agent } = await sessionOn(rig.edge, '/w');
    track(agent);
    // Positive control: a response to a request the world did send reaches it.
    rig.world.send({ jsonrpc: '2.0', id: 'world-ping-1', method: 'ping', params: { origin_ns: 5 } });
    await until(
      () => rig!.world.allMessages().some((m) => m.id === 'world-ping-1' && m.result !== undefined),
      5000,
      "the agent's answer to the world's ping",
    );
    agent.send({
      jsonrpc: '2.0',
      id: 'never-sent-by-the-world',
      result: { origin_ns: 1, receive_ns: 2, transmit_ns: 3 },
    });
    agent.send({ jsonrpc: '2.0', id: 424242, result: {} });
    // A later request on the same connection: once the world has it, the bogus responses would be there too.
    await pingOk(agent, 77);
    const bogus = rig.world
      .allMessages()
      .filter((m) => m.id === 'never-sent-by-the-world' || m.id === 424242);
    expect(bogus).toEqual([]);
    const metrics = await scrape(rig.edge);
    expect(
      metric(metrics, 'awp_edge_messages_dropped_total', {
        route: 'w',
        from: 'agent',
        reason: 'unknown_response_id',
      }),
      series(metrics, 'awp_edge_messages_dropped_total'),
    ).toBeGreaterThanOrEqual(2);
    await pingOk(rig.bystander);
  }, 20_000);

  it('AWP-CTL-009: a numeric request id 2^53+1 (written literally) is refused with AWP_INTEGER_RANGE and never forwarded', async () => {
    rig = await start();
    const { agent } = await sessionOn(rig.edge, '/w');
    track(agent);
    const before = rig.world.allTexts().length;
    agent.send('{"jsonrpc":"2.0","id":9007199254740993,"method":"ping","params":{"origin_ns":1}}');
    const answer = await agent.waitFor((m) => errorCode(m) === 2006, 10_000, 'AWP_INTEGER_RANGE');
    expect(answer.error).toMatchObject({ code: 2006, message: 'AWP_INTEGER_RANGE' });
    // The out-of-range integer ends the agent's session like any other (AWP-CTL-009).
    expect(await agent.waitClosed(10_000)).toEqual({ code: 1002, reason: 'AWP_INTEGER_RANGE' });
    await sleep(100);
    const after = rig.world.allTexts().slice(before);
    expect(after.filter((t) => t.includes('9007199254740993') || t.includes('9007199254740992'))).toEqual([]);
    expect(after.filter((t) => (JSON.parse(t) as Json).method === 'ping')).toEqual([]);
    await pingOk(rig.bystander);
  }, 20_000);
});

describe('hostile agent: counts in requests', () => {
  // -32602 for values that are in range but are not a non-negative integer (contract item 5). For 2^53
  // the integer rule (AWP-CTL-009) comes first: every integer of every message is checked before its
  // method is, so the answer is AWP_INTEGER_RANGE (2006) and the connection closes with 1002.
  for (const [label, raw] of [
    ['-5', '-5'],
    ['1.5', '1.5'],
    ['"3"', '"3"'],
  ] as const) {
    it(`session.resume with last_status_seq ${label} is refused with -32602 and does not resume`, async () => {
      rig = await start();
      const first = await sessionOn(rig.edge, '/w');
      const token = first.ready.session_token as string;
      first.agent.drop();
      await until(() => rig!.world.control.every((c) => c.closed), 5000, 'the upstream connection to close');
      const agent = track(await agentOn(rig.edge, '/w'));
      const resumesBefore = rig.world.allMessages().filter((m) => m.method === 'session.resume').length;
      agent.send(
        `{"jsonrpc":"2.0","id":61,"method":"session.resume","params":{"session_token":${JSON.stringify(token)},"last_status_seq":${raw}}}`,
      );
      const answer = await agent.waitFor((m) => m.id === 61, 10_000, 'the answer to session.resume');
      expect(answer.error).toMatchObject({ code: -32602 });
      expect(rig.world.allMessages().filter((m) => m.method === 'session.resume')).toHaveLength(
        resumesBefore,
      );
      // The session is still there to be resumed properly, on the same connection.
      const ok = await agent.ok('session.resume', { session_token: token, last_status_seq: 0 });
      expect(ok.session_token).toBe(token);
      await pingOk(rig.bystander);
    }, 20_000);
  }

  it('session.resume with last_status_seq 2^53 is refused with AWP_INTEGER_RANGE (2006; the integer rule comes first)', async () => {
    rig = await start();
    const first = await sessionOn(rig.edge, '/w');
    const token = first.ready.session_token as string;
    first.agent.drop();
    await until(() => rig!.world.control.every((c) => c.closed), 5000, 'the upstream connection to close');
    const agent = track(await agentOn(rig.edge, '/w'));
    agent.send(
      `{"jsonrpc":"2.0","id":62,"method":"session.resume","params":{"session_token":${JSON.stringify(token)},"last_status_seq":9007199254740992}}`,
    );
    const answer = await agent.waitFor((m) => m.id === 62, 10_000, 'the answer to session.resume');
    expect(answer.error).toMatchObject({ code: 2006, message: 'AWP_INTEGER_RANGE' });
    expect(rig.world.allMessages().filter((m) => m.method === 'session.resume')).toEqual([]);
    await pingOk(rig.bystander);
  }, 20_000);
});

describe('hostile agent: acknowledgements', () => {
  it('a ping acknowledging a status_seq the world never issued is refused -32602 and not forwarded; later notifications still arrive', async () => {
    rig = await start();
    const r = rig;
    const { agent } = await sessionOn(r.edge, '/w');
    track(agent);
    const issued = r.world.seq();
    r.world.send({
      jsonrpc: '2.0',
      method: 'action.status',
      params: { action_id: 'a-1', state: 'executing', status_seq: issued, ts_mono_ns: 1_000 },
    });
    await agent.waitNotification('action.status', (p) => p.status_seq === issued, 10_000);
    const pingsBefore = r.world.allMessages().filter((m) => m.method === 'ping').length;
    agent.send({
      jsonrpc: '2.0',
      id: 71,
      method: 'ping',
      params: { origin_ns: 1, last_status_seq: issued + 50 },
    });
    const answer = await agent.waitFor((m) => m.id === 71, 10_000, 'the answer to the ping');
    expect(answer.error).toMatchObject({ code: -32602 });
    expect(JSON.stringify(answer.error)).toContain(`highest status_seq issued in this session (${issued})`);
    await sleep(200); // a forwarded ping would be on the wire right behind the answer
    expect(r.world.allMessages().filter((m) => m.method === 'ping')).toHaveLength(pingsBefore);
    // Had the edge taken the acknowledgement, it would drop the world's next notifications as redeliveries.
    const next = r.world.seq();
    r.world.send({
      jsonrpc: '2.0',
      method: 'action.status',
      params: { action_id: 'a-1', state: 'succeeded', status_seq: next, ts_mono_ns: 2_000 },
    });
    await agent.waitNotification('action.status', (p) => p.status_seq === next, 10_000);
    // An honest acknowledgement goes through.
    agent.send({ jsonrpc: '2.0', id: 72, method: 'ping', params: { origin_ns: 2, last_status_seq: next } });
    await until(
      () => r.world.allMessages().some((m) => m.method === 'ping' && m.id === 72),
      10_000,
      'the honest ping upstream',
    );
    await pingOk(r.bystander);
  }, 20_000);
});

describe('hostile agent: vanishing and protocol violations', () => {
  it('ten agents that initialize, send an unknown method and vanish: awp_edge_upstream_connections is never negative and returns to 0', async () => {
    rig = await start();
    const r = rig;
    const samples: number[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        samples.push(metric(await scrape(r.edge), 'awp_edge_upstream_connections', { route: 'w' }));
        await sleep(25);
      }
    })();
    try {
      await Promise.all(
        Array.from({ length: 10 }, async (_, i) => {
          const a = await AwpClient.connect(r.edge.url('/w'), { credential: AGENT_TOKEN });
          await a.ok('initialize', initializeParams());
          a.send({ jsonrpc: '2.0', id: 2, method: `no.such.method.${i}`, params: {} });
          a.drop();
        }),
      );
      await until(
        async () =>
          metric(await scrape(r.edge), 'awp_edge_upstream_connections', { route: 'w' }) === 0 &&
          r.world.control.every((c) => c.closed),
        10_000,
        () => `upstream connections to return to 0 (samples ${samples.join(',')})`,
      );
    } finally {
      sampling = false;
      await sampler;
    }
    const metrics = await scrape(r.edge);
    const all = series(metrics, 'awp_edge_upstream_connections');
    expect(
      samples.filter((s) => s < 0),
      all,
    ).toEqual([]);
    expect(metric(metrics, 'awp_edge_upstream_connections', { route: 'w' }), all).toBe(0);
    for (const line of all.split('\n').filter((l) => !l.startsWith('#')))
      expect(Number(line.split(' ').at(-1)), line).toBeGreaterThanOrEqual(0);
    await pingOk(r.bystander);
  }, 20_000);

  it('AWP-CTL-009: an out-of-range integer in an in-session action.submit gets AWP_INTEGER_RANGE and 1002; the world receives nothing after it and sees its connection closed', async () => {
    rig = await start();
    const { agent } = await sessionOn(rig.edge, '/w');
    track(agent);
    // valid_until_ns is a u53 field of action.submit (free-form action params are not integer-checked).
    const upstream = rig.world.current()!;
    const before = upstream.texts.length;
    agent.send(
      '{"jsonrpc":"2.0","id":50,"method":"action.submit","params":{"action_id":"a-1","type":"move","params":{},"valid_until_ns":9007199254740993}}',
    );
    const answer = await agent.waitFor((m) => m.id === 50, 10_000, 'the answer to action.submit');
    expect(answer.error).toMatchObject({ code: 2006, message: 'AWP_INTEGER_RANGE' });
    expect(await agent.waitClosed(10_000)).toEqual({ code: 1002, reason: 'AWP_INTEGER_RANGE' });
    await until(() => upstream.closed, 5000, 'the upstream connection to close');
    const after = upstream.texts.slice(before);
    expect(after).toEqual([]);
    expect(rig.world.allTexts().filter((t) => t.includes('awp-edge:session.close'))).toEqual([]);
    expect(rig.world.allMessages().filter((m) => m.method === 'session.close')).toEqual([]);
    // Closed like the agent's connection: a protocol error, which the world treats as a transport loss.
    expect(upstream.closeCode).toBe(1002);
    await pingOk(rig.bystander);
  }, 20_000);
});
