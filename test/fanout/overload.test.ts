/**
 * Issue 15: the edge offered more frames than it can write keeps control live. The streaming demo arm in
 * its own process (100 Hz proprio, 30 Hz 64 KiB camera, 10 Hz reliable state), the edge in this process,
 * observers of all three channels on the `ws` binding in fleet processes (one per step, until more than
 * the edge delivers), and the benchmark's probe in a process of its own: an observer
 * pinging the edge every 50 ms and timing frame ages, and a relay agent pinging the world through the
 * edge. Behaviour only, with bounds generous enough for a loaded 2-core machine: the figures against
 * their targets are the benchmark's (`npm run bench -- overload`).
 */
import { describe, expect, it } from 'vitest';
import { Child } from '../../bench/lib/child.js';
import { resolveRuntime } from '../../bench/lib/runtime.js';
import { startWorld, type World } from '../../bench/lib/setup.js';
import { AGENT_TOKEN, startEdge, type TestEdge } from '../support/edge.js';
import { reliableLosses } from './delivery-stats.js';
import { Fleet, type FleetPlan, type ObserverReport } from './fleet.js';
import { hubsOf, ROUTE_PATH, sleep, until } from './rig.js';

/** Observers of all three channels, in steps until the edge cannot deliver what the world offers. */
const OBSERVER_STEPS = [300, 600, 1200] as const;
/** The world's heartbeat (the edge's to its observers too): a missed one shows in seconds. */
const HEARTBEAT_MS = 2000;
const WINDOW_MS = 8000;
/**
 * Generous: the targets are 20 ms (pings) and 2 intervals + 10 ms (ages); on a loaded 2-core runner (the
 * suite's other files in parallel) the edge gets a fraction of a core (seen: pings up to 1.5 s, camera
 * age p99 0.96 s). Before issue 15 a fan-out pass ran to completion: seconds.
 */
const PING_MAX_MS = 3000;
const AGE_P99_MS = 2000;

interface Latency {
  readonly count: number;
  readonly p99_us: number;
  readonly max_us: number;
}

interface ProbeReport {
  readonly observer_ping: { rtt: Latency; failures: number; sent: number };
  readonly relay_ping: { rtt: Latency; failures: number; sent: number };
  readonly observer_heartbeats: { received: number; max_gap_ms: number; missed: number };
  readonly relay_heartbeats: { received: number; max_gap_ms: number; missed: number };
  readonly age: Record<string, Latency>;
  readonly fps: Record<string, number>;
  readonly closed: { observer: number | null; relay: number | null };
}

const TITLE =
  'AWP-SAF-001 AWP-DAT-001 AWP-DAT-002 offered several times what it can write, the edge answers pings, keeps heartbeats, loses no reliable frame and delivers fresh latest-wins frames';

/**
 * The stream listener's variant (observers' streams on a worker thread) runs where uWebSockets.js is the
 * engine, on the production runtime only (Node 24): the suite runs on three, and this test takes minutes.
 */
const STREAM_LISTENER =
  process.env.AWP_EDGE_ENGINE === 'uws' && Number(process.versions.node.split('.')[0]) >= 24;

describe('overload (issue 15)', () => {
  it(TITLE, { timeout: 480_000 }, () => overload({}));
  it.runIf(STREAM_LISTENER)(`${TITLE}, with the stream listener (worker thread)`, { timeout: 480_000 }, () =>
    overload({ stream_listen: '127.0.0.1:0' }),
  );
});

async function overload(extra: Record<string, unknown>): Promise<void> {
  const runtime = resolveRuntime();
  let world: World | undefined;
  let edge: TestEdge | undefined;
  // One fleet process per step: a fleet reading hundreds of observers' frames is saturated, and
  // the new connections of a step would wait in it for minutes.
  const fleets: Fleet[] = [];
  let probe: Child | undefined;
  try {
    world = await startWorld({ ...runtime, build: undefined }, { heartbeatIntervalMs: HEARTBEAT_MS });
    edge = await startEdge(
      [{ path: ROUTE_PATH, upstream: world.url, observers: 'fanout', hub_linger_ms: 60_000 } as never],
      {
        // The hop's WebSocket ping is not what is measured here: out of the way.
        timing: { hop_ping_interval_ms: 120_000 },
        budgets: {
          max_connections: 4096,
          max_sessions: 4096,
          max_messages_per_second: 10_000_000,
          max_bytes_per_second: 2 ** 40,
        },
        ...extra,
      },
    );
    const openObservers = async (from: number, to: number) => {
      const before = hubsOf(edge!)[0]?.size ?? 0; // the probe's observer too, once it is open
      const plans: FleetPlan[] = Array.from({ length: to - from }, (_, i) => ({
        index: from + i,
        kind: 'ws',
        subscribe: [{ channel: 'camera' }, { channel: 'proprio' }, { channel: 'state' }],
        stalls: false,
      }));
      const fleet = await Fleet.start();
      fleets.push(fleet);
      await fleet.request(
        {
          type: 'open',
          url: edge!.url(ROUTE_PATH),
          credential: AGENT_TOKEN,
          origin: world!.origin,
          plans,
          batch: 20,
        },
        'opened',
        120_000,
      );
      await until(() => hubsOf(edge!)[0]?.size === before + to - from, 30_000, `${to} observers`);
    };
    await openObservers(0, OBSERVER_STEPS[0]);
    probe = await Child.start('bench/lib/probe-child.ts', [], { node: runtime.node, name: 'probe' });
    await probe.request(
      'open',
      {
        url: edge.url(ROUTE_PATH),
        origin: world.origin,
        credential: AGENT_TOKEN,
        channels: [{ channel: 'proprio' }, { channel: 'camera' }],
        embodiment: 'arm_01',
      },
      60_000,
    );
    const worldNow = () => Number(process.hrtime.bigint() - BigInt(world!.origin));
    // How much a machine delivers varies (a quiet runner delivered 96 % of 300 observers' frames): the
    // load grows until the observers get less than 90 % of what the world offered them in a window
    // (else this test proves nothing), and that window is the one judged.
    let observers: number = OBSERVER_STEPS[0];
    let p: ProbeReport;
    let report: ObserverReport[];
    for (let step = 0; ; step++) {
      await sleep(2000); // the load builds up
      await probe.request('begin', { intervalMs: 50 });
      const t0 = worldNow();
      await sleep(WINDOW_MS);
      const t1 = worldNow();
      p = (await probe.request('end', {}, 60_000)) as unknown as ProbeReport;
      // Per-frame arrays of the reliable channel only: a thousand observers' full logs take the
      // busy fleet longer to send than the test waits.
      const asked = { type: 'report', perFrame: ['state'], window: { from: t0, to: t1 } } as const;
      const reports = await Promise.all(fleets.map((f) => f.request(asked, 'report', 60_000)));
      report = reports.flatMap((r) => r.observers);
      const frames = report.reduce((n, o) => n + o.channels.reduce((m, c) => m + c.count, 0), 0);
      const inWindow = report.reduce((n, o) => n + o.channels.reduce((m, c) => m + c.inWindow!, 0), 0);
      const offered = observers * (100 + 30 + 10) * ((t1 - t0) / 1e9);
      const ms = (us: number) => (us / 1000).toFixed(1);
      console.log(
        [
          `${observers} observers received ${frames} frames in all, ${inWindow} of ${Math.round(offered)} offered in the window; the probe: proprio ${p.fps.proprio} fps, camera ${p.fps.camera} fps`,
          `  observer ping p99 ${ms(p.observer_ping.rtt.p99_us)} / max ${ms(p.observer_ping.rtt.max_us)} ms (${p.observer_ping.sent} sent); relay ping p99 ${ms(p.relay_ping.rtt.p99_us)} / max ${ms(p.relay_ping.rtt.max_us)} ms`,
          `  age p99: proprio ${ms(p.age.proprio?.p99_us ?? NaN)} ms, camera ${ms(p.age.camera?.p99_us ?? NaN)} ms`,
          `  heartbeats: observer ${p.observer_heartbeats.received} (max gap ${p.observer_heartbeats.max_gap_ms} ms), relay ${p.relay_heartbeats.received} (max gap ${p.relay_heartbeats.max_gap_ms} ms)`,
        ].join('\n'),
      );
      if (inWindow < 0.9 * offered) break;
      const next = OBSERVER_STEPS[step + 1];
      expect(next, `the edge was not overloaded at ${observers} observers`).toBeDefined();
      await openObservers(observers, next!);
      observers = next!;
    }
    // Control stays live: every ping answered, on both sessions, within the generous bound.
    for (const ping of [p.observer_ping, p.relay_ping]) {
      expect(ping.failures).toBe(0);
      expect(ping.rtt.count).toBeGreaterThan(WINDOW_MS / 50 / 2);
      expect(ping.rtt.max_us / 1000).toBeLessThan(PING_MAX_MS);
    }
    // No heartbeat missed (AWP-SAF-001): generous, none more than one and a half intervals late (the
    // world's timer and both processes share the loaded machine); no session lost.
    expect(p.observer_heartbeats.max_gap_ms).toBeLessThan(2.5 * HEARTBEAT_MS);
    expect(p.relay_heartbeats.max_gap_ms).toBeLessThan(2.5 * HEARTBEAT_MS);
    expect(p.closed).toEqual({ observer: null, relay: null });
    for (const o of report) expect(o.closed, `observer ${o.index}`).toBeNull();
    // Latest-wins frames delivered are fresh: the newest, not a queue (AWP-DAT-002).
    expect(p.age.proprio!.count).toBeGreaterThan(0);
    expect(p.age.proprio!.p99_us / 1000).toBeLessThan(AGE_P99_MS);
    expect(p.age.camera!.p99_us / 1000).toBeLessThan(AGE_P99_MS);
    // Reliable frames: none lost, none reordered, for every observer (AWP-DAT-001, AWP-DAT-002).
    for (const o of report) {
      for (const ch of o.channels) {
        expect(ch.orderViolations, `observer ${o.index} ${ch.name}: seq order`).toEqual([]);
        if (ch.name === 'state') {
          expect(ch.count, `observer ${o.index} state`).toBeGreaterThan(0);
          expect(reliableLosses(ch), `observer ${o.index} state`).toEqual({
            missingBefore: [],
            twice: [],
          });
        }
      }
    }
  } finally {
    await probe?.request('close', {}, 5000).catch(() => undefined);
    await probe?.stop();
    await Promise.all(fleets.map((f) => f.close()));
    await edge?.close();
    await world?.child.stop();
  }
}
