/**
 * A load generator process: opens many observers (or plain subscribers, or idle sessions) and records
 * what they receive inside a measurement window: frames, bytes and delivery latency per channel, by
 * group (healthy / stalled), plus this process's own CPU and event-loop utilisation so that a
 * saturated generator shows in the results.
 *
 * Latency = (receipt hrtime - origin) - ts_send_ns, where origin is the sender's session-clock origin on
 * the shared monotonic clock (world-child.ts). Receipt is the read that completed the message.
 * Centrifugo subscribers (the fan-out scenario's peer baseline, centrifugo-wire.ts) are counted the same
 * way, one frame per publication, latency = receipt - the publisher's stamp.
 */
import { performance } from 'node:perf_hooks';
import { AwpSession } from './awp-session.js';
import { CentrifugoSubscriber } from './centrifugo-wire.js';
import { LogHistogram, type HistogramData } from './histogram.js';
import { cpuShare, round, serve, type Message } from './ipc.js';
import { frameFacts, RawWs, type FrameFacts, type RawWsHandlers } from './raw-ws.js';

/**
 * awp: observer session + ws stream; raw: frames only (the raw broadcast); idle: a session, no frames;
 * centrifugo: a Centrifugo client (protobuf), channels subscribed later as the observers' are.
 */
type Mode = 'awp' | 'raw' | 'idle' | 'connect' | 'centrifugo';

interface ChannelStats {
  frames: number;
  bytes: number;
  readonly latency: LogHistogram;
}

interface Observer {
  readonly session: AwpSession | null;
  readonly stream: RawWs | null;
  readonly cf?: CentrifugoSubscriber;
  stalled: boolean;
  frames: number;
  closed: boolean;
}

const observers: Observer[] = [];
const groups = { healthy: new Map<number, ChannelStats>(), stalled: new Map<number, ChannelStats>() };
const names = new Map<number, string>();
/** Channel name -> id (Centrifugo publications name their channel). */
const ids = new Map<string, number>();
let origin = 0n;
let measuring = false;
let windowStart = 0;
let cpuStart = process.cpuUsage();
let eluStart = performance.eventLoopUtilization();
const facts: FrameFacts = { channel_id: 0, seq: 0, flags: 0, ts_send_ns: -1 };
let lastRecv = -1n;
let lastRel = 0;

function stats(stalled: boolean, channel_id: number): ChannelStats {
  const g = stalled ? groups.stalled : groups.healthy;
  let s = g.get(channel_id);
  if (s === undefined) g.set(channel_id, (s = { frames: 0, bytes: 0, latency: new LogHistogram() }));
  return s;
}

function frameHandlers(o: () => Observer): RawWsHandlers {
  return {
    binary: (head, headLen, length, recvNs) => {
      if (!measuring) return;
      const obs = o();
      frameFacts(head, headLen, facts);
      const s = stats(obs.stalled, facts.channel_id);
      s.frames++;
      s.bytes += length;
      obs.frames++;
      if (facts.ts_send_ns >= 0) {
        if (recvNs !== lastRecv) {
          lastRecv = recvNs;
          lastRel = Number(recvNs - origin);
        }
        s.latency.add(lastRel - facts.ts_send_ns);
      }
    },
    close: () => {
      o().closed = true;
    },
  };
}

async function openOne(m: Message): Promise<void> {
  const mode = m.mode as Mode;
  const url = m.url as string;
  const credential = m.credential as string;
  const ref: { o?: Observer } = {};
  const get = () => ref.o!;
  if (mode === 'centrifugo') {
    const cf = await CentrifugoSubscriber.connect(url, (channel, stamp, length, recvNs) => {
      if (!measuring) return;
      const obs = get();
      const s = stats(obs.stalled, ids.get(channel) ?? 0);
      s.frames++;
      s.bytes += length;
      obs.frames++;
      if (stamp >= 0) s.latency.add(Number(recvNs) - stamp);
    });
    ref.o = { session: null, stream: cf.stream, cf, stalled: false, frames: 0, closed: false };
  } else if (mode === 'raw' || mode === 'connect') {
    const stream = await RawWs.connect(
      url,
      { Authorization: `Bearer ${credential}` },
      mode === 'raw' ? frameHandlers(get) : {},
    );
    ref.o = { session: null, stream, stalled: false, frames: 0, closed: false };
  } else {
    const session = await AwpSession.connect(url, credential);
    await session.initialize();
    // Channels are subscribed later, all observers together (`subscribe`): opening a thousand sessions
    // is not slowed by the frames the first ones already receive.
    await session.open([]);
    ref.o = { session, stream: null, stalled: false, frames: 0, closed: false };
    if (mode === 'awp') {
      const stream = await session.openStream(frameHandlers(get));
      ref.o = { ...ref.o, stream };
    }
  }
  observers.push(ref.o);
}

async function open(m: Message): Promise<Record<string, unknown>> {
  origin = BigInt(m.origin as string);
  for (const [id, name] of Object.entries((m.channelNames ?? {}) as Record<string, string>)) {
    names.set(Number(id), name);
    ids.set(name, Number(id));
  }
  const count = m.count as number;
  const batch = (m.batch as number | undefined) ?? 50;
  const t0 = performance.now();
  const before = observers.length;
  const errors: string[] = [];
  let failed = 0;
  for (let i = 0; i < count; i += batch) {
    const results = await Promise.allSettled(
      Array.from({ length: Math.min(batch, count - i) }, () => openOne(m)),
    );
    for (const r of results) {
      if (r.status === 'rejected') {
        failed++;
        if (errors.length < 3) errors.push(r.reason instanceof Error ? r.reason.message : String(r.reason));
      }
    }
  }
  return { opened: observers.length - before, failed, errors, open_ms: Math.round(performance.now() - t0) };
}

function report(): Record<string, unknown> {
  const wallMs = performance.now() - windowStart;
  const cpu = cpuShare(cpuStart, wallMs);
  const elu = performance.eventLoopUtilization(eluStart).utilization;
  const group = (g: Map<number, ChannelStats>, members: Observer[]) => {
    const channels: Record<string, { frames: number; bytes: number; fps: number; latency: HistogramData }> =
      {};
    for (const [id, s] of g) {
      channels[names.get(id) ?? `channel_${id}`] = {
        frames: s.frames,
        bytes: s.bytes,
        fps: round(s.frames / (wallMs / 1000)),
        latency: s.latency.data(),
      };
    }
    const perObs = members.map((o) => o.frames / (wallMs / 1000)).sort((a, b) => a - b);
    return {
      observers: members.length,
      closed: members.filter((o) => o.closed || o.session?.closedCode != null || o.cf?.stream.closed === true)
        .length,
      channels,
      per_observer_fps: {
        min: round(perObs[0] ?? 0),
        median: round(perObs[Math.floor(perObs.length / 2)] ?? 0),
        max: round(perObs.at(-1) ?? 0),
      },
    };
  };
  return {
    wall_ms: Math.round(wallMs),
    cpu,
    elu: round(elu, 3),
    // One JS thread: near a full core or a busy event loop means the generator, not the server, bounds the result.
    saturated: elu > 0.9 || cpu.cpu_pct > 90,
    healthy: group(
      groups.healthy,
      observers.filter((o) => !o.stalled),
    ),
    stalled: group(
      groups.stalled,
      observers.filter((o) => o.stalled),
    ),
  };
}

/** obs.subscribe on every observer session (batches in parallel). */
async function subscribe(m: Message): Promise<Record<string, unknown>> {
  const channels = m.channels as { channel: string; rate_hz?: number }[];
  const batch = (m.batch as number | undefined) ?? 50;
  const t0 = performance.now();
  const timeoutMs = m.timeoutMs as number | undefined;
  const subscribers = observers.filter((o) => o.session !== null || o.cf !== undefined);
  let failed = 0;
  for (let i = 0; i < subscribers.length; i += batch) {
    const results = await Promise.allSettled(
      subscribers.slice(i, i + batch).map(async (o) => {
        if (o.cf !== undefined) {
          await o.cf.subscribe(
            channels.map((c) => c.channel),
            timeoutMs,
          );
          return;
        }
        const r = await o.session!.ok('obs.subscribe', { channels }, timeoutMs);
        for (const g of (r.granted ?? []) as { channel: string; channel_id: number }[])
          names.set(g.channel_id, g.channel);
      }),
    );
    const refused = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    // `tolerant` (the overload scenario): an edge that drops or does not answer is the finding, counted.
    if (refused !== undefined && m.tolerant !== true) throw refused.reason;
    failed += results.filter((r) => r.status === 'rejected').length;
  }
  return {
    subscribed: subscribers.length - failed,
    failed,
    subscribe_ms: Math.round(performance.now() - t0),
  };
}

serve(
  {
    open,
    subscribe,
    /** Stalls the stream connections of the first `count` observers (TCP level: they stop reading). */
    stall: (m) => {
      const count = m.count as number;
      for (const o of observers.slice(0, count)) {
        o.stalled = true;
        o.stream?.pause();
      }
      return { stalled: Math.min(count, observers.length) };
    },
    begin: () => {
      for (const g of Object.values(groups)) g.clear();
      for (const o of observers) o.frames = 0;
      windowStart = performance.now();
      cpuStart = process.cpuUsage();
      eluStart = performance.eventLoopUtilization();
      measuring = true;
      return {};
    },
    end: () => {
      measuring = false;
      return report();
    },
    /** Sessions still connected. */
    alive: () => ({
      alive: observers.filter((o) => !o.closed && !(o.session?.control.closed ?? false)).length,
    }),
    close: () => {
      for (const o of observers) {
        o.stream?.destroy();
        o.session?.destroy();
      }
      return {};
    },
  },
  {},
);
