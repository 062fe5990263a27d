/**
 * Issue 12, first case: a 5,000-level nested array (about 10 KB) from one authenticated agent, inside
 * `initialize` params or an in-session `ping`, once ended the process (a stack overflow in
 * JSON.stringify). The edge refuses it before walking it (-32600, id null, detail about nesting), the
 * offender's connection stays usable, nothing reaches the world, and other routes are not affected.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { AwpClient, initializeParams, type Json } from '../support/awp-client.js';
import { AGENT_TOKEN } from '../support/edge.js';
import { startRig as startFanoutRig } from '../fanout/rig.js';
import { DEPTH, deepArray, pingOk, sessionOn, startRig, type HostileRig } from './support.js';

let rig: HostileRig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

function isNestingRefusal(m: Json): boolean {
  return (m.error as { code?: unknown } | undefined)?.code === -32600;
}

/** What the contract says the refusal looks like (transport.max_json_depth, default 64). */
function expectNestingRefusal(m: Json): void {
  expect(m.id).toBeNull();
  expect(m.error).toMatchObject({ code: -32600 });
  const detail = (m.error as { data?: { detail?: unknown } }).data?.detail;
  expect(String(detail)).toMatch(/nest/i);
}

/** Nothing the world received carries the payload (it was refused before anything forwarded it). */
function worldSawNoDeepNesting(r: HostileRig): void {
  const deepOnes = r.world.allTexts().filter((t) => t.includes('[[[[[[[[[['));
  expect(deepOnes).toEqual([]);
}

describe('hostile agent: deep nesting', () => {
  it(`a ${DEPTH}-level nested array inside initialize params is refused (-32600), the edge and other routes keep serving`, async () => {
    rig = await startRig();
    const offender = await AwpClient.connect(rig.edge.url('/w'), { credential: AGENT_TOKEN });
    const text = `{"jsonrpc":"2.0","id":9001,"method":"initialize","params":${JSON.stringify(initializeParams()).slice(0, -1)},"x":${deepArray()}}}`;
    expect(text.length).toBeGreaterThan(10_000);
    offender.send(text);
    const answer = await offender.waitFor(
      (m) => isNestingRefusal(m) || m.id === 9001,
      10_000,
      'the answer to the nested initialize',
    );
    expectNestingRefusal(answer);
    // The offender's connection is still usable: a proper initialize and a ping work on it.
    expect(offender.closed).toBeNull();
    await offender.ok('initialize', initializeParams());
    await pingOk(offender);
    // Another agent on another route, and a new connection on the offender's route, are served.
    await pingOk(rig.bystander);
    const fresh = await sessionOn(rig.edge, '/w');
    await pingOk(fresh.agent);
    worldSawNoDeepNesting(rig);
    offender.close();
    fresh.agent.close();
  }, 20_000);

  it(`a ${DEPTH}-level nested array inside an in-session ping is refused (-32600), the session and other routes keep serving`, async () => {
    rig = await startRig();
    const { agent } = await sessionOn(rig.edge, '/w');
    const before = rig.world.allTexts().length;
    agent.send(`{"jsonrpc":"2.0","id":9031,"method":"ping","params":{"origin_ns":1,"x":${deepArray()}}}`);
    const answer = await agent.waitFor(
      (m) => isNestingRefusal(m) || m.id === 9031,
      10_000,
      'the answer to the nested ping',
    );
    expectNestingRefusal(answer);
    expect(agent.closed).toBeNull();
    await pingOk(agent);
    await pingOk(rig.bystander);
    // The only thing the world got after the offending message is the agent's own later ping.
    const after = rig.world.allTexts().slice(before);
    expect(after.map((t) => (JSON.parse(t) as Json).method)).toEqual(['ping']);
    worldSawNoDeepNesting(rig);
    agent.close();
  }, 20_000);
  it(`${DEPTH}-level nested objects in an in-session notification are refused (-32600, id null) and not forwarded`, async () => {
    rig = await startRig();
    const { agent } = await sessionOn(rig.edge, '/w');
    const before = rig.world.allTexts().length;
    const deepObject = '{"a":'.repeat(DEPTH) + '1' + '}'.repeat(DEPTH);
    agent.send(`{"jsonrpc":"2.0","method":"obs.report","params":{"x":${deepObject}}}`);
    const answer = await agent.waitFor(isNestingRefusal, 10_000, 'the refusal of the nested notification');
    expectNestingRefusal(answer);
    expect(agent.closed).toBeNull();
    await pingOk(agent);
    const after = rig.world.allTexts().slice(before);
    expect(after.map((t) => (JSON.parse(t) as Json).method)).toEqual(['ping']);
    await pingOk(rig.bystander);
    agent.close();
  }, 20_000);
});

describe('observer sessions served by the hub: transport.max_json_depth applies as configured', () => {
  const fanoutRigs: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    for (const r of fanoutRigs.splice(0)) await r.close();
  });

  it('with max_json_depth 8, an observer ping nesting 10 deep is refused (-32600) and one nesting 6 deep is answered', async () => {
    const r = await startFanoutRig({ edge: { transport: { max_json_depth: 8 } } });
    fanoutRigs.push(r);
    const observer = await r.observer({ kind: 'ws', subscribe: [{ channel: 'proprio' }] });
    const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
    observer.send(`{"jsonrpc":"2.0","id":"deep","method":"ping","params":{"origin_ns":1,"x":${nested(10)}}}`);
    const refusal = await observer.waitFor(
      (m) => isNestingRefusal(m) || m.id === 'deep',
      10_000,
      'the answer to the nested ping',
    );
    expectNestingRefusal(refusal);
    observer.send(
      `{"jsonrpc":"2.0","id":"shallow","method":"ping","params":{"origin_ns":1,"x":${nested(6)}}}`,
    );
    const answer = await observer.waitFor(
      (m) => m.id === 'shallow',
      10_000,
      'the answer to the shallow ping',
    );
    expect(answer.result).toBeDefined();
  }, 30_000);
});
