/**
 * The overload benchmark's probe, in its own process: one observer session of the fan-out workload on the
 * `ws` stream binding and one acting (relay) session, both on the edge, and (given `worldUrl`) a session
 * straight to the world, the relay's baseline under the same load. Inside a window it pings on all of them
 * every `intervalMs` on a fixed cadence (a ping never waits for the previous answer, so a stall shows as
 * many slow pings, not one): the observer's pings are the edge's to answer, the relay session's travel to
 * the world and back, the direct session's are the world's alone. It records each frame's age on arrival
 * (receipt - ts_mono_ns on the shared CLOCK_MONOTONIC, with the world's origin) and when the peer's
 * heartbeat pings arrive on each session.
 */
import { performance } from 'node:perf_hooks';
import { AwpSession } from './awp-session.js';
import { LogHistogram, type LatencySummary } from './histogram.js';
import { round, serve, type Message } from './ipc.js';
import { frameFacts, type FrameFacts } from './raw-ws.js';

interface Pinger {
  readonly session: AwpSession;
  readonly rtt: LogHistogram;
  /** Sent and not yet answered: id -> hrtime at send. */
  readonly outstanding: Map<number, bigint>;
  failures: number;
  sent: number;
  /** Heartbeat pings received from the peer in the window (hrtime). */
  readonly heartbeats: bigint[];
}

let origin = 0n;
let observer: AwpSession | null = null;
let relay: AwpSession | null = null;
let direct: AwpSession | null = null;
const names = new Map<number, string>();
const ages = new Map<string, LogHistogram>();
const frames = new Map<string, number>();
const facts: FrameFacts = { channel_id: 0, seq: 0, flags: 0, ts_send_ns: -1 };
let measuring = false;
let timer: NodeJS.Timeout | undefined;
/** The window's pingers by session: the observer's, the relay's and the direct one's (if opened). */
let pingers: { obs: Pinger; rel?: Pinger | undefined; dir?: Pinger | undefined } | null = null;
let windowStart = 0n;
let eluStart = performance.eventLoopUtilization();

function pinger(session: AwpSession): Pinger {
  const p: Pinger = {
    session,
    rtt: new LogHistogram(),
    outstanding: new Map(),
    failures: 0,
    sent: 0,
    heartbeats: [],
  };
  session.onPing = (at) => {
    if (measuring) p.heartbeats.push(at);
  };
  return p;
}

function ping(p: Pinger): void {
  const key = ++p.sent;
  const sent = process.hrtime.bigint();
  p.outstanding.set(key, sent);
  p.session.call('ping', { origin_ns: Number(sent % 10n ** 12n) }, 60_000).then(
    ({ msg, rtt_ns }) => {
      if (!p.outstanding.delete(key)) return; // answered after the window closed: counted there
      if (msg.error !== undefined) p.failures++;
      else p.rtt.add(rtt_ns);
    },
    () => {
      if (p.outstanding.delete(key)) p.failures++;
    },
  );
}

/** The heartbeats' gaps: the longest, and how many intervals passed without one (gap / interval - 1). */
function heartbeatGaps(at: readonly bigint[], end: bigint, intervalMs: number): Record<string, number> {
  const times = [windowStart, ...at, end];
  let maxGap = 0;
  let missed = 0;
  for (let i = 1; i < times.length; i++) {
    const gap = Number(times[i]! - times[i - 1]!) / 1e6;
    maxGap = Math.max(maxGap, gap);
    // A heartbeat more than half an interval late counts as missed (the edge's timer runs every 50 ms);
    // each further whole interval of silence counts one more.
    missed += Math.max(0, Math.floor(gap / intervalMs - 1.5) + 1);
  }
  return { received: at.length, max_gap_ms: round(maxGap), missed };
}

/** The session's heartbeat interval as its session.ready announced it (AWP-SAF-001). */
function heartbeatMs(s: AwpSession): number {
  return (s.ready?.heartbeat_interval_ms as number | undefined) ?? NaN;
}

function summary(
  p: Pinger,
  end: bigint,
): { rtt: LatencySummary; failures: number; unanswered: number; sent: number } {
  // Pings still unanswered when the window closes took at least until now: counted at that lower bound.
  for (const sent of p.outstanding.values()) p.rtt.add(Number(end - sent));
  const unanswered = p.outstanding.size;
  p.outstanding.clear();
  return { rtt: p.rtt.summary(), failures: p.failures, unanswered, sent: p.sent };
}

serve(
  {
    /** Opens the observer (subscribing `channels` on the ws stream) and the relay session (`embodiment`). */
    open: async (m) => {
      origin = BigInt(m.origin as string);
      const url = m.url as string;
      const credential = m.credential as string;
      observer = await AwpSession.connect(url, credential);
      await observer.initialize('awp-edge-bench-probe');
      await observer.open([]);
      await observer.openStream({
        binary: (head, headLen, _length, recvNs) => {
          if (!measuring) return;
          frameFacts(head, headLen, facts);
          const name = names.get(facts.channel_id) ?? `channel_${facts.channel_id}`;
          const tsMono = head.readUInt32LE(16) + head.readUInt32LE(20) * 2 ** 32;
          let h = ages.get(name);
          if (h === undefined) ages.set(name, (h = new LogHistogram()));
          h.add(Number(recvNs - origin) - tsMono);
          frames.set(name, (frames.get(name) ?? 0) + 1);
        },
      });
      const r = await observer.ok('obs.subscribe', { channels: m.channels }, 60_000);
      for (const g of (r.granted ?? []) as { channel: string; channel_id: number }[])
        names.set(g.channel_id, g.channel);
      if (typeof m.embodiment === 'string') {
        relay = await AwpSession.connect((m.relayUrl as string | undefined) ?? url, credential);
        await relay.initialize('awp-edge-bench-relay-probe');
        await relay.open([], m.embodiment);
      }
      if (typeof m.worldUrl === 'string') {
        direct = await AwpSession.connect(m.worldUrl, credential);
        await direct.initialize('awp-edge-bench-direct-probe');
        await direct.open([]);
      }
      return { grants: [...names.values()] };
    },
    begin: (m: Message) => {
      ages.clear();
      frames.clear();
      const p = {
        obs: pinger(observer!),
        rel: relay !== null ? pinger(relay) : undefined,
        dir: direct !== null ? pinger(direct) : undefined,
      };
      pingers = p;
      windowStart = process.hrtime.bigint();
      eluStart = performance.eventLoopUtilization();
      measuring = true;
      const interval = m.intervalMs as number;
      timer = setInterval(() => {
        for (const q of [p.obs, p.rel, p.dir]) if (q !== undefined) ping(q);
      }, interval);
      return {};
    },
    end: () => {
      measuring = false;
      clearInterval(timer);
      const end = process.hrtime.bigint();
      const wallS = Number(end - windowStart) / 1e9;
      const { obs, rel, dir } = pingers!;
      return {
        wall_ms: Math.round(wallS * 1000),
        observer_ping: summary(obs, end),
        observer_heartbeats: heartbeatGaps(obs.heartbeats, end, heartbeatMs(obs.session)),
        ...(rel !== undefined
          ? {
              relay_ping: summary(rel, end),
              relay_heartbeats: heartbeatGaps(rel.heartbeats, end, heartbeatMs(rel.session)),
            }
          : {}),
        ...(dir !== undefined ? { direct_ping: summary(dir, end) } : {}),
        age: Object.fromEntries([...ages].map(([k, h]) => [k, h.summary()])),
        fps: Object.fromEntries([...frames].map(([k, n]) => [k, round(n / wallS)])),
        closed: { observer: observer?.closedCode ?? null, relay: relay?.closedCode ?? null },
        elu: round(performance.eventLoopUtilization(eluStart).utilization, 3),
      };
    },
    close: () => {
      observer?.destroy();
      relay?.destroy();
      direct?.destroy();
      return {};
    },
  },
  {},
);
