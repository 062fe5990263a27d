/**
 * The HTTP load generator process: autocannon against a URL (its own connections, pipelining off), and
 * a WebSocket upgrade loop (connect, upgrade, reset) at a fixed concurrency. Reports its own CPU.
 */
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { LogHistogram } from './histogram.js';
import { cpuShare, serve, type Message } from './ipc.js';
import { HttpRefused, RawWs } from './raw-ws.js';

async function cannon(m: Message): Promise<Record<string, unknown>> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const r = await autocannon({
    url: m.url as string,
    connections: m.connections as number,
    duration: m.durationS as number,
  });
  const cpu = cpuShare(cpu0, performance.now() - t0);
  return {
    requests_per_s: r.requests.average,
    latency_ms: { p50: r.latency.p50, p99: r.latency.p99, max: r.latency.max },
    bytes_per_s: r.throughput.average,
    errors: r.errors,
    timeouts: r.timeouts,
    non2xx: r.non2xx,
    cpu,
    saturated: cpu.cpu_pct > 90,
  };
}

/**
 * `concurrency` loops each opening a WebSocket, then dropping it with a FIN, no closing handshake (a
 * reset would make the server build an ECONNRESET error per connection, a cost real clients rarely cause).
 */
async function upgrades(m: Message): Promise<Record<string, unknown>> {
  const url = m.url as string;
  const headers = { Authorization: `Bearer ${m.credential as string}` };
  const end = performance.now() + (m.durationS as number) * 1000;
  const hist = new LogHistogram();
  let done = 0;
  let failed = 0;
  const statuses: Record<string, number> = {};
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const loop = async () => {
    while (performance.now() < end) {
      const s = process.hrtime.bigint();
      try {
        const ws = await RawWs.connect(url, headers, {});
        hist.add(Number(process.hrtime.bigint() - s));
        done++;
        ws.socket.end();
      } catch (err) {
        failed++;
        const k = err instanceof HttpRefused ? String(err.status) : 'error';
        statuses[k] = (statuses[k] ?? 0) + 1;
      }
    }
  };
  await Promise.all(Array.from({ length: m.concurrency as number }, loop));
  const wall = performance.now() - t0;
  const cpu = cpuShare(cpu0, wall);
  return {
    upgrades_per_s: Math.round((done / wall) * 1000),
    upgrades: done,
    failed,
    statuses,
    latency: hist.summary(),
    cpu,
    saturated: cpu.cpu_pct > 90,
  };
}

serve({ autocannon: cannon, upgrades }, {});
