/**
 * Isolation and memory (issue 12, item 8: "other sessions keep working and RSS returns to baseline"):
 * one edge takes a run of hostile inputs from agents and from a world, then a fresh well-behaved agent
 * opens a session and pings; and 200 repetitions of the deep-nesting message do not make the process
 * grow without bound.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AwpClient } from '../support/awp-client.js';
import { AGENT_TOKEN } from '../support/edge.js';
import {
  agentOn,
  deepArray,
  gc,
  metric,
  pingOk,
  rawRequest,
  scrape,
  series,
  sessionOn,
  sleep,
  startRig,
  until,
  upgradeHead,
  type HostileRig,
} from './support.js';

let rig: HostileRig;
beforeAll(async () => {
  rig = await startRig({ transport: { max_message_bytes: 65_536 } });
});
afterAll(async () => {
  await rig.close();
});

const DEEP = deepArray();
const MB = 1024 * 1024;

/** Runs one hostile input and waits for the edge's answer to it (an answer, a refusal, or a close). */
async function hostileRound(): Promise<void> {
  const r = rig;
  // Deep nesting in initialize, on a connection that then just leaves.
  const a = await AwpClient.connect(r.edge.url('/w'), { credential: AGENT_TOKEN });
  a.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":${DEEP}}}`);
  await Promise.race([a.waitFor((m) => m.error !== undefined || m.id === 1, 10_000), a.waitClosed(10_000)]);
  a.drop();
  // Duplicate ids, a response to nothing, an out-of-range integer (which ends that session).
  const { agent } = await sessionOn(r.edge, '/w');
  agent.send({ jsonrpc: '2.0', id: 70, method: 'ping', params: { origin_ns: 1 } });
  agent.send({ jsonrpc: '2.0', id: 70, method: 'ping', params: { origin_ns: 2 } });
  agent.send({ jsonrpc: '2.0', id: 'nobody-asked', result: {} });
  agent.send(`{"jsonrpc":"2.0","id":71,"method":"ping","params":{"origin_ns":1,"x":${DEEP}}}`);
  agent.send('{"jsonrpc":"2.0","id":72,"method":"ping","params":{"origin_ns":9007199254740993}}');
  await agent.waitClosed(10_000).catch(() => agent.drop());
  // A world that lies and nests deep at a session of its own.
  const w = await sessionOn(r.edge, '/w');
  r.world.sendRaw(
    `{"jsonrpc":"2.0","method":"world.event","params":{"status_seq":1,"event":"deep","data":${DEEP}}}`,
  );
  r.world.send({ jsonrpc: '2.0', id: 'never-forwarded', result: {} });
  await pingOk(w.agent);
  w.agent.drop();
  // A credential in the URL, a bad Host.
  const q = await rawRequest(
    r.edge.edge.port,
    upgradeHead(`/w?t=${AGENT_TOKEN}`, `127.0.0.1:${r.edge.edge.port}`),
  );
  q.raw.socket.destroy();
  const h = await rawRequest(r.edge.edge.port, upgradeHead('/w', 'a b'));
  h.raw.socket.destroy();
}

describe('hostile inputs in one edge', () => {
  it('after the hostile cases, a fresh well-behaved agent opens a session and pings; the bystander was served throughout', async () => {
    for (let i = 0; i < 3; i++) {
      await hostileRound();
      await pingOk(rig.bystander);
    }
    const fresh = await sessionOn(rig.edge, '/w');
    expect(typeof fresh.ready.session_token).toBe('string');
    await pingOk(fresh.agent);
    fresh.agent.close();
    await pingOk(rig.bystander);
    // Every hostile input above was refused by validation: none needed the containment boundary.
    const metrics = await scrape(rig.edge);
    expect(metrics).toContain('# TYPE awp_edge_internal_errors_total counter');
    expect(
      metric(metrics, 'awp_edge_internal_errors_total'),
      series(metrics, 'awp_edge_internal_errors_total'),
    ).toBe(0);
    // Nothing is left behind of the hostile connections: only the bystander's and what just closed.
    await until(
      () => rig.edge.edge.ctx.connections.size <= 1,
      5000,
      () => `connections to drain (${rig.edge.edge.ctx.connections.size})`,
    );
  }, 60_000);

  it('RSS does not grow without bound across 200 repetitions of the deep-nesting message', async () => {
    const agent = await agentOn(rig.edge, '/w');
    await agent.ok('session.open', { embodiment: 'e1', mode: 'streaming' });
    const round = async (n: number, base: number): Promise<void> => {
      for (let i = 0; i < n; i++) {
        const id = base + i;
        agent.send(`{"jsonrpc":"2.0","id":${id},"method":"ping","params":{"origin_ns":${id},"x":${DEEP}}}`);
        // One answer per message: the refusal (id null) or, were it let through, the pong.
        await agent.waitFor(
          (m) => (m.error !== undefined && m.id === null) || m.id === id,
          10_000,
          `the answer to deep message ${id}`,
          agent.received.length,
        );
      }
    };
    const rss = (): number => {
      gc();
      return process.memoryUsage().rss;
    };
    await round(20, 1000); // warm-up: code paths compiled, buffers pooled
    await sleep(50);
    const baseline = rss();
    await round(100, 2000);
    const mid = rss();
    await round(100, 3000);
    const end = rss();
    const report = `baseline ${(baseline / MB).toFixed(1)} MB, after 100 ${(mid / MB).toFixed(1)} MB, after 200 ${(end / MB).toFixed(1)} MB`;
    console.log(report);
    expect(end, report).toBeLessThan(baseline + 150 * MB);
    // Still the same working session.
    expect(agent.closed).toBeNull();
    await pingOk(agent);
    agent.close();
    await pingOk(rig.bystander);
  }, 120_000);
});
