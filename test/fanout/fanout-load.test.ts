/**
 * Issue 5 acceptance: 200 observers on the streaming demo arm behind one edge (inline, ws and
 * webtransport), 20 of them stalled at the TCP level (they stop reading, so the edge's backpressure
 * really builds). The observers run in a child process (fleet.ts) so they do not share the edge's event
 * loop.
 *
 * One rig, measurement windows in turn: B while the 20 are stalled, then, after they read again and catch
 * up, A with all 200 reading (the run with no stalled observers); twice, so the second stall follows a
 * recovery. Both are measured over the same 180 healthy observers. Asserted: order, completeness of the
 * reliable channel, what the edge holds for the stalled observers, and that what it released arrives.
 * Printed: frames, delivery percentages and p50/p99 delivery latency of A and B. Latency with and without
 * stalled observers is compared by the benchmark (`npm run bench -- slow-consumers`), not here: on a
 * loaded 2-core machine a latency comparison measures the machine.
 */
import { describe, expect, it } from 'vitest';
import type { ChannelHub } from '../../src/fanout/channel-hub.js';
import { AGENT_TOKEN } from '../support/edge.js';
import { installTaps, ms, percentile, reliableLosses, type Taps } from './delivery-stats.js';
import { Fleet, type FleetPlan, type ObserverReport } from './fleet.js';
import type { ObserverKind } from './observer-client.js';
import { observerHolds, ROUTE_PATH, sleep, startRig, until, type ObserverHold, type Rig } from './rig.js';

const OBSERVERS = 200;
const STALLED = 20;
/** How observers take their frames: inline and ws alternately, and every tenth over webtransport. */
const KINDS: readonly ObserverKind[] = ['inline', 'ws'];
const WEBTRANSPORT_EVERY = 10;
/**
 * Stalled observers stop reading at the TCP level: inline and ws. (The WebTransport client library
 * here, over HTTP/2, keeps reading the connection and buffers what the application does not take, so
 * it cannot be stalled from the application; its transport-level flow control is the webtransport
 * sink's own test.)
 */
const STALL_KINDS: readonly ObserverKind[] = ['inline', 'ws'];
/** 256 x 256 mono8 at 30 Hz: big enough that a stalled observer's socket buffers fill within seconds. */
const CAMERA_BYTES = 64 * 1024;
const PROPRIO_HZ = 50;
const WINDOW_MS = 2000;
/** B/A window pairs. */
const PAIRS = 2;
const HIGH_WATER = 256 * 1024;
const MAX_QUEUED = 16 * 1024 * 1024;
/**
 * How long a stalled observer may take to build backpressure: the kernel's socket buffers (autotuned up to
 * tens of MiB on loopback once the observer has read fast) fill at the world's camera rate, which next to
 * a CPU hog is a third of 30 Hz (seen: 50 s and more). The heartbeats below outlast it.
 */
const BACKPRESSURE_MS = 100_000;

type Sub = { channel: string; rate_hz?: number };
/** What healthy observers watch: dashboards at reduced camera rates, proprio-only panels, a few full-rate. */
const FULL: Sub[] = [{ channel: 'camera' }, { channel: 'proprio' }, { channel: 'state' }];
const HEALTHY_PROFILES: readonly Sub[][] = [
  [{ channel: 'camera', rate_hz: 5 }, { channel: 'proprio' }, { channel: 'state' }],
  [{ channel: 'camera', rate_hz: 2 }, { channel: 'proprio', rate_hz: 25 }, { channel: 'state' }],
  [{ channel: 'camera', rate_hz: 1 }, { channel: 'proprio', rate_hz: 10 }, { channel: 'state' }],
  [{ channel: 'proprio' }, { channel: 'state' }],
];

function plans(): FleetPlan[] {
  let stalledSoFar = 0;
  return Array.from({ length: OBSERVERS }, (_, index) => {
    const stalls = index % (OBSERVERS / STALLED) === 3; // spread over the connection order
    const wt = !stalls && index % WEBTRANSPORT_EVERY === WEBTRANSPORT_EVERY / 2;
    // Every kind gets every profile: the profile cycles faster than the kind.
    let subscribe =
      HEALTHY_PROFILES[(wt ? Math.floor(index / WEBTRANSPORT_EVERY) : index) % HEALTHY_PROFILES.length]!;
    // Stalled observers take everything at full rate (the most there is to hold for them); so do 1 in 10 others.
    if (stalls || index % 10 === 8) subscribe = FULL;
    const kind = stalls
      ? STALL_KINDS[stalledSoFar++ % STALL_KINDS.length]!
      : wt
        ? 'webtransport'
        : KINDS[Math.floor(index / HEALTHY_PROFILES.length) % KINDS.length]!;
    return { index, kind, subscribe, stalls };
  });
}

interface WindowResult {
  readonly label: string;
  readonly ta: number;
  readonly tb: number;
  readonly maxHold: Map<string, ObserverHold>;
  readonly mem: [NodeJS.MemoryUsage, NodeJS.MemoryUsage];
  readonly elu: number;
}

interface Delivery {
  readonly released: number;
  readonly delivered: number;
  /** Released frames above the newest seq the observer had received on the channel at the report. */
  readonly inFlight: number;
  readonly byRateExpected: number;
  readonly byRateReceived: number;
  readonly worstObserver: number;
  /** Healthy observers' channels that received nothing in the windows. */
  readonly starved: string[];
  readonly sent: Record<string, number>;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly samples: number;
  readonly byKind: Record<string, { p50: number; p99: number; frames: number }>;
}

/** One measurement window on the world's session clock, sampling what the edge holds for `watched`. */
async function measure(
  label: string,
  rig: Rig,
  hub: ChannelHub,
  watched: ReadonlySet<string>,
): Promise<WindowResult> {
  const mem0 = process.memoryUsage();
  const elu0 = performance.eventLoopUtilization();
  const ta = rig.worldNow();
  const maxHold = new Map<string, ObserverHold>();
  const end = performance.now() + WINDOW_MS;
  while (performance.now() < end) {
    for (const h of observerHolds(hub)) {
      if (!watched.has(h.session_id)) continue;
      const m = maxHold.get(h.session_id);
      maxHold.set(h.session_id, m === undefined ? h : maxOf(m, h));
    }
    await sleep(100);
  }
  const tb = rig.worldNow();
  return {
    label,
    ta,
    tb,
    maxHold,
    mem: [mem0, process.memoryUsage()],
    elu: performance.eventLoopUtilization(elu0).utilization,
  };
}

/**
 * Healthy observers over some windows: what the edge released to each (frames that passed its rate gate
 * and were handed to its outbox, less latest-wins frames a newer one replaced there while the observer's
 * socket was busy: on a loaded machine healthy observers read late too) against what arrived; and,
 * independently of the edge's decisions, what
 * arrived against the granted rate (or all the world sent, if less).
 */
function delivery(
  windows: readonly WindowResult[],
  report: ObserverReport[],
  taps: Taps,
  hub: ChannelHub,
  healthy: (o: ObserverReport) => boolean,
): Delivery {
  const inside = (ts: number) => windows.some((w) => ts >= w.ta && ts <= w.tb);
  let released = 0;
  let delivered = 0;
  let inFlight = 0;
  let byRateExpected = 0;
  let byRateReceived = 0;
  let worstObserver = 1;
  const starved: string[] = [];
  const lat: number[] = [];
  const kindLat = new Map<string, number[]>();
  const hubInWindows = new Map(
    [...taps.hub].map(([id, f]) => [id, windows.reduce((n, w) => n + f.inWindow(w.ta, w.tb).length, 0)]),
  );
  const spanS = windows.reduce((t, w) => t + (w.tb - w.ta) / 1e9, 0);
  const subs = new Map([...hub.sessions()].map((o) => [o.session_id, o.sub]));
  for (const o of report.filter(healthy)) {
    const sub = subs.get(o.session_id);
    expect(sub, `observer ${o.index} attached`).toBeTruthy();
    let rel = 0;
    let got = 0;
    for (const ch of o.channels) {
      const received = new Set(ch.seqs.filter((_, i) => inside(ch.ts[i]!)));
      // Released and not replaced by a newer frame while it waited for the observer's socket.
      const dropped = taps.replaced(sub!, ch.channel_id);
      // A connection (and a WebTransport stream per channel) is ordered: a frame above the newest one
      // received is still on its way (a lagging client on a loaded machine: seconds), one below it is not.
      const sent = windows
        .flatMap((w) => taps.released(sub!, ch.channel_id).inWindow(w.ta, w.tb))
        .filter((x) => !dropped.has(x));
      const should = sent.filter((x) => x <= ch.lastSeq);
      inFlight += sent.length - should.length;
      rel += should.length;
      got += should.filter((x) => received.has(x)).length;
      byRateExpected += Math.min((ch.rate_hz ?? Infinity) * spanS, hubInWindows.get(ch.channel_id) ?? 0);
      byRateReceived += received.size;
      if (received.size === 0) starved.push(`observer ${o.index} ${ch.name}`);
      let mine = kindLat.get(o.kind);
      if (mine === undefined) kindLat.set(o.kind, (mine = []));
      const into = mine;
      ch.latencies.forEach((l, i) => {
        if (l >= 0 && inside(ch.ts[i]!)) {
          lat.push(l);
          into.push(l);
        }
      });
    }
    released += rel;
    delivered += got;
    worstObserver = Math.min(worstObserver, rel === 0 ? 0 : got / rel);
  }
  lat.sort((a, b) => a - b);
  const names = new Map(report[0]!.channels.map((c) => [c.channel_id, c.name]));
  return {
    released,
    delivered,
    inFlight,
    byRateExpected,
    byRateReceived,
    worstObserver,
    starved,
    sent: Object.fromEntries([...hubInWindows].map(([id, n]) => [names.get(id) ?? String(id), n])),
    p50: percentile(lat, 0.5),
    p99: percentile(lat, 0.99),
    max: lat.at(-1) ?? NaN,
    samples: lat.length,
    byKind: Object.fromEntries(
      [...kindLat].map(([k, v]) => {
        v.sort((a, b) => a - b);
        return [k, { p50: percentile(v, 0.5), p99: percentile(v, 0.99), frames: v.length }];
      }),
    ),
  };
}

function maxOf(a: ObserverHold, b: ObserverHold): ObserverHold {
  return {
    session_id: a.session_id,
    controlQueued: Math.max(a.controlQueued, b.controlQueued),
    controlBuffered: Math.max(a.controlBuffered, b.controlBuffered),
    streamQueued: Math.max(a.streamQueued, b.streamQueued),
    streamBuffered: Math.max(a.streamBuffered, b.streamBuffered),
    slots: Math.max(a.slots, b.slots),
    slotBytes: Math.max(a.slotBytes, b.slotBytes),
    fifoBytes: Math.max(a.fifoBytes, b.fifoBytes),
  };
}

function printHolds(windows: readonly WindowResult[], stalled: ObserverReport[]): Map<string, ObserverHold> {
  const merged = new Map<string, ObserverHold>();
  for (const w of windows) {
    for (const [id, h] of w.maxHold) {
      const m = merged.get(id);
      merged.set(id, m === undefined ? h : maxOf(m, h));
    }
  }
  const rows = stalled.map((o) => merged.get(o.session_id)!);
  const worst = (f: (h: ObserverHold) => number) => Math.max(...rows.map(f));
  const total = rows.reduce(
    (s, h) => s + h.controlQueued + h.streamQueued + h.controlBuffered + h.streamBuffered,
    0,
  );
  const mem = windows.map(
    (w) =>
      `arrayBuffers ${mib(w.mem[0].arrayBuffers)} -> ${mib(w.mem[1].arrayBuffers)} MiB, rss ${mib(w.mem[0].rss)} -> ${mib(w.mem[1].rss)} MiB`,
  );
  console.log(
    [
      `edge memory held for the ${rows.length} stalled observers (max over the stalled windows, per observer):`,
      `  latest-wins slots: max ${worst((h) => h.slots)} (bound 2: one per latest-wins channel, camera and proprio); slot bytes max ${worst((h) => h.slotBytes)}`,
      `  ordered FIFO (control messages + reliable frames): max ${worst((h) => h.fifoBytes)} bytes (reliable bound: max_queued_bytes ${MAX_QUEUED})`,
      `  handed to the engine, unwritten: control max ${worst((h) => h.controlBuffered)}, stream max ${worst((h) => h.streamBuffered)} bytes (high water ${HIGH_WATER} + one message)`,
      `  all stalled observers together (sum of per-observer maxima, queued + engine): ${mib(total)} MiB`,
      `  edge + world process over the stalled windows: ${mem.join('; ')}`,
    ].join('\n'),
  );
  return merged;
}

function mib(bytes: number): string {
  return (bytes / 1048576).toFixed(1);
}

function summary(label: string, windows: readonly WindowResult[], d: Delivery): string {
  const span = windows.reduce((t, w) => t + (w.tb - w.ta) / 1e9, 0);
  return [
    `${label}: world sent ${JSON.stringify(d.sent)} frames in ${span.toFixed(2)} s; edge+world event loop ${windows.map((w) => `${(w.elu * 100).toFixed(0)}%`).join('/')} busy`,
    `  180 healthy observers: ${d.delivered}/${d.released} frames the edge released (not replaced, not in flight) were received (${((100 * d.delivered) / d.released).toFixed(3)}%), worst observer ${(100 * d.worstObserver).toFixed(2)}%; ${d.inFlight} still in flight at the report`,
    `  against granted rates, independent of the edge's decisions: ${d.byRateReceived} received / ${d.byRateExpected.toFixed(0)} expected (${((100 * d.byRateReceived) / d.byRateExpected).toFixed(2)}%)`,
    `  delivery latency (receipt - ts_send_ns) over ${d.samples} frames: p50 ${ms(d.p50)} ms, p99 ${ms(d.p99)} ms, max ${ms(d.max)} ms`,
    `  by binding: ${Object.entries(d.byKind)
      .map(([k, v]) => `${k} p50 ${ms(v.p50)} / p99 ${ms(v.p99)} ms (${v.frames} frames)`)
      .join('; ')}`,
  ].join('\n');
}

/** Every observer: strictly increasing seq per channel; the reliable channel complete or restarted with resync. */
function checkOrder(report: ObserverReport[]): void {
  for (const o of report) {
    for (const ch of o.channels) {
      expect(ch.orderViolations, `observer ${o.index} ${ch.name}: seq not increasing (AWP-DAT-001)`).toEqual(
        [],
      );
      if (ch.name === 'state')
        expect(reliableLosses(ch), `observer ${o.index} state: gap without resync`).toEqual({
          missingBefore: [],
          twice: [],
        });
    }
    expect(o.closed, `observer ${o.index}`).toBeNull();
  }
}

describe('observer fan-out under load (issue 5 acceptance)', () => {
  it(
    'AWP-DAT-001 AWP-DAT-002 AWP-TRN-009 AWP-MA-004 200 observers, 20 stalled: order, completeness, >= 98% of released frames delivered within the window, bounded edge memory',
    // Generous: on a loaded 2-core machine (a CPU hog next to it) backpressure and catch-up take a while.
    { timeout: 360_000 },
    async () => {
      const taps = installTaps();
      let rig: Rig | undefined;
      let fleet: Fleet | undefined;
      try {
        rig = await startRig({
          // Observer heartbeats follow the world's interval: 3 silent intervals would end a stalled
          // observer's connection, so they outlast the longest wait for backpressure.
          world: { cameraBytes: CAMERA_BYTES, proprioHz: PROPRIO_HZ, heartbeatIntervalMs: 40_000 },
          webtransport: true,
          edge: {
            // Likewise the hop's WebSocket ping (two missed intervals).
            timing: { hop_ping_interval_ms: 120_000 },
            transport: { high_water_bytes: HIGH_WATER, max_queued_bytes: MAX_QUEUED },
            budgets: {
              max_connections: 4096,
              max_sessions: 4096,
              max_messages_per_second: 1_000_000,
              max_bytes_per_second: 2 ** 40,
            },
          },
        });
        fleet = await Fleet.start();
        const r = rig;
        const all = plans();
        // Stalled observers first, so their socket buffers fill while the others connect.
        const order = [...all.filter((p) => p.stalls), ...all.filter((p) => !p.stalls)];
        const opened = await fleet.request(
          {
            type: 'open',
            url: r.edge.url(ROUTE_PATH),
            credential: AGENT_TOKEN,
            origin: r.origin.toString(),
            plans: order,
            batch: 20,
            ...(r.certHash !== undefined ? { certHash: Buffer.from(r.certHash).toString('base64') } : {}),
          },
          'opened',
          60_000,
        );
        const sessionOf = new Map(opened.sessions.map((s) => [s.index, s.session_id]));
        expect(r.worldSessions()).toHaveLength(1); // one upstream observer session for all 200 (AWP-MA-004)
        const hub = r.hubs()[0]!;
        expect(hub.size).toBe(OBSERVERS);
        const stalledIds = new Set(all.filter((p) => p.stalls).map((p) => sessionOf.get(p.index)!));
        const stateId = hub.grants().get('state')!.channel_id;
        const none = new Set<string>();

        /** Waits until the edge holds something for every stalled observer: the backpressure is real. */
        const backpressure = async (): Promise<number> => {
          const pressed = new Set<string>();
          const t0 = performance.now();
          const camera = taps.hub.get(hub.grants().get('camera')!.channel_id)!;
          const sent0 = camera.seq.length;
          try {
            await until(
              () => {
                for (const h of observerHolds(hub)) {
                  if (
                    stalledIds.has(h.session_id) &&
                    (h.slots > 0 || Math.max(h.controlBuffered, h.streamBuffered) >= HIGH_WATER)
                  )
                    pressed.add(h.session_id);
                }
                return pressed.size === STALLED;
              },
              BACKPRESSURE_MS,
              'backpressure on every stalled observer',
            );
          } catch (err) {
            const holds = observerHolds(hub).filter(
              (h) => stalledIds.has(h.session_id) && !pressed.has(h.session_id),
            );
            console.log(
              `not pressed: ${STALLED - pressed.size} (${holds.length} still attached): ${JSON.stringify(holds)}; world sent ${camera.seq.length - sent0} camera frames meanwhile`,
            );
            throw err;
          }
          return performance.now() - t0;
        };
        let reopened = 0;
        /** The stalled observers read again until they hold the newest reliable frame the hub has. */
        const release = async (): Promise<void> => {
          const target = taps.hub.get(stateId)!.seq.at(-1)!;
          const done = await fleet!.request(
            { type: 'unstall', catchUpStateSeq: target, timeoutMs: 45_000 },
            'unstalled',
            50_000,
          );
          reopened += done.reopenedStreams;
          await sleep(1000);
        };

        // B (20 stalled) then A (all read), PAIRS times.
        const waits: number[] = [];
        const bs: WindowResult[] = [];
        const as: WindowResult[] = [];
        for (let k = 1; k <= PAIRS; k++) {
          if (k > 1) await fleet.request({ type: 'stall' }, 'stalled', 5000);
          waits.push(await backpressure());
          bs.push(await measure(`B${k}`, r, hub, stalledIds));
          await release();
          as.push(await measure(`A${k}`, r, hub, none));
        }
        // Most frames captured by the last window's end are delivered by now; on a loaded machine some
        // take seconds (counted as in flight, see delivery()).
        await sleep(1000);
        const report = (await fleet.request({ type: 'report' }, 'report', 30_000)).observers;
        console.log(
          `backpressure on all ${STALLED} stalled observers within ${waits.map((w) => w.toFixed(0)).join(' / ')} ms of stalling; ${reopened} stream connections reopened after`,
        );

        const holds = printHolds(
          bs,
          report.filter((o) => o.stalls),
        );
        for (const o of report.filter((x) => x.stalls)) {
          const h = holds.get(o.session_id)!;
          const frameBytes =
            o.kind === 'inline' ? Math.ceil((CAMERA_BYTES * 4) / 3) + 512 : CAMERA_BYTES + 64;
          // One pending frame per latest-wins channel (camera, proprio), never a queue (AWP-DAT-002, AWP-TRN-009).
          expect(h.slots).toBeLessThanOrEqual(2);
          expect(h.slotBytes).toBeLessThanOrEqual(2 * frameBytes);
          // The ordered FIFO (control messages, reliable frames) stays within the reliable bound.
          expect(h.fifoBytes).toBeLessThanOrEqual(MAX_QUEUED);
          // The engine holds at most its high-water mark plus the message that crossed it.
          expect(Math.max(h.controlBuffered, h.streamBuffered)).toBeLessThanOrEqual(HIGH_WATER + frameBytes);
        }
        checkOrder(report);

        const healthy = (o: ObserverReport) => !o.stalls;
        const dA = delivery(as, report, taps, hub, healthy);
        const dB = delivery(bs, report, taps, hub, healthy);
        console.log(summary('windows A (all 200 read)', as, dA));
        console.log(summary(`windows B (${STALLED} stalled)`, bs, dB));
        // Latency with and without stalled observers is a comparison of speed: it is the benchmark's
        // (`npm run bench -- slow-consumers`: alternating pairs, medians, checked against its target), not
        // this test's. Here it is printed above, never asserted.
        for (const d of [dA, dB]) {
          expect(d.released).toBeGreaterThan(0);
          // Frames still in flight at the report are left out (above); what remains must have arrived. A
          // frame lost for good would also show as a gap in a reliable channel, checked per observer above.
          expect(d.delivered / d.released).toBeGreaterThanOrEqual(0.98);
          // Against the granted rates the share is printed, not asserted: an overloaded edge (this test's
          // edge and world share one process on a loaded machine) rightly skips latest-wins frames a newer
          // one superseded, and a healthy observer reading late has frames replaced in its slot. What must
          // hold is that nobody starves: every healthy observer got frames on every channel it subscribed.
          expect(d.starved).toEqual([]);
        }
      } finally {
        taps.remove();
        await fleet?.close();
        await rig?.close();
      }
    },
  );
});
