/**
 * The fan-out test rig: the streaming demo arm world behind a real edge whose route serves observers
 * from one upstream session (`observers: 'fanout'`), on 127.0.0.1, plus read-only views of what the
 * world and the edge hold (sessions, hubs, per-observer queues) for the assertions.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDemoWorld, type DemoServerOptions, type RunningDemoWorld } from '../../src/demo/index.js';
import { webtransportSection } from '../support/dev-certificate.js';
import type { ChannelHub } from '../../src/fanout/channel-hub.js';
import type { ObserverShell } from '../../src/fanout/observer-shell.js';
import type { Outbox } from '../../src/transport/outbox.js';
import type { Subscriber } from '../../src/fanout/subscriber.js';
import type { RouteRuntime } from '../../src/edge/route.js';
import type { ServerConnection } from '../../src/transport/engine.js';
import { AGENT_TOKEN, startEdge, type TestEdge } from '../support/edge.js';
import { ObserverClient, type ObserverOptions } from './observer-client.js';

export const ROUTE_PATH = '/arm';

export interface RigOptions {
  readonly world?: Partial<DemoServerOptions>;
  /** Extra edge config (merged over the test defaults). */
  readonly edge?: Record<string, unknown>;
  readonly lingerMs?: number;
  /** Also serve `webtransport` stream endpoints (HTTP/2 here), with a fresh self-signed certificate. */
  readonly webtransport?: boolean;
  /** The hub's control connection goes here instead of to the world (a relay in front of it, say). */
  readonly upstream?: (worldUrl: string) => Promise<string>;
}

export interface Rig {
  readonly world: RunningDemoWorld;
  readonly edge: TestEdge;
  /** process.hrtime.bigint() at the world's session-clock origin (taken right before it started). */
  readonly origin: bigint;
  /** SHA-256 of the edge's WebTransport certificate (with `webtransport`). */
  readonly certHash: Uint8Array | undefined;
  /** The world's session clock now (ns), as this process reads it. */
  worldNow(): number;
  observer(options: Omit<ObserverOptions, 'credential' | 'clockOrigin'>): Promise<ObserverClient>;
  /** Resumes an observer session on a new connection. */
  resume(
    options: Omit<ObserverOptions, 'credential' | 'clockOrigin'>,
    token: string,
    lastStatusSeq: number,
  ): Promise<ObserverClient>;
  /** Sessions the world holds (any kind: the hub's observer session is one). */
  worldSessions(): { id: string; embodiment: unknown; state: string }[];
  hubs(): ChannelHub[];
  close(): Promise<void>;
}

export async function startRig(options: RigOptions = {}): Promise<Rig> {
  // The demo server reads its clock origin synchronously on entry, so this brackets it to microseconds.
  const origin = process.hrtime.bigint();
  const world = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0, ...options.world });
  const route = {
    path: ROUTE_PATH,
    upstream: await (options.upstream?.(world.url) ?? world.url),
    observers: 'fanout',
    hub_linger_ms: options.lingerMs ?? 200,
  };
  let edge: TestEdge;
  let certHash: Uint8Array | undefined;
  const dir = options.webtransport === true ? mkdtempSync(join(tmpdir(), 'awp-fanout-wt-')) : undefined;
  try {
    let webtransport: Record<string, unknown> = {};
    if (dir !== undefined) {
      const { cert, section } = webtransportSection(dir);
      certHash = cert.hash;
      webtransport = { webtransport: section };
    }
    edge = await startEdge([route], { engine: 'ws', ...webtransport, ...options.edge });
  } catch (err) {
    await world.close();
    throw err;
  } finally {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true }); // read at config load
  }
  const clients: ObserverClient[] = [];
  return {
    world,
    edge,
    origin,
    certHash,
    worldNow: () => Number(process.hrtime.bigint() - origin),
    observer: async (o) => {
      const c = await ObserverClient.open(edge.url(ROUTE_PATH), {
        certHash,
        ...o,
        credential: AGENT_TOKEN,
        clockOrigin: origin,
      });
      clients.push(c);
      return c;
    },
    resume: async (o, token, last) => {
      const c = await ObserverClient.resume(
        edge.url(ROUTE_PATH),
        { certHash, ...o, credential: AGENT_TOKEN, clockOrigin: origin },
        token,
        last,
      );
      clients.push(c);
      return c;
    },
    worldSessions: () =>
      [...world.world.sessions.values()].map((s) => {
        const v = s as unknown as { id: string; embodiment: unknown; state: string };
        return { id: v.id, embodiment: v.embodiment, state: v.state };
      }),
    hubs: () => hubsOf(edge),
    close: async () => {
      for (const c of clients) c.terminate();
      await edge.close();
      await world.close();
    },
  };
}

/** The edge's observer hubs (read through the edge's private route list: a test-only view). */
export function hubsOf(edge: TestEdge): ChannelHub[] {
  const routes = edge.edge['routes'];
  return routes.flatMap((r: RouteRuntime) => [...r.allHubs()]);
}

/** Bytes the edge holds for one observer session, by where they wait. */
export interface ObserverHold {
  readonly session_id: string;
  /** Not yet handed to the engine: control FIFO + latest-wins slots (inline frames). */
  readonly controlQueued: number;
  /** Handed to the engine, not yet written to the kernel. */
  readonly controlBuffered: number;
  readonly streamQueued: number;
  readonly streamBuffered: number;
  /** Latest-wins frames waiting in slots (control and stream). */
  readonly slots: number;
  readonly slotBytes: number;
  /** Items in the ordered FIFOs (control messages, reliable frames). */
  readonly fifoBytes: number;
}

/** What the edge holds for each of a hub's observers (test-only view of private fields). */
export function observerHolds(hub: ChannelHub): ObserverHold[] {
  return [...hub.sessions()].map((o: ObserverShell) => {
    const sub: Subscriber | null = o.sub;
    const control = sub?.control;
    const conn = o['conn'];
    const sink = sub?.['stream'] as
      { out?: Outbox; conn?: ServerConnection; streams?: unknown } | null | undefined;
    const streamOut = sink?.out;
    const c = outboxParts(control);
    const s =
      sink?.streams !== undefined
        ? webTransportParts(sink.streams)
        : { ...outboxParts(streamOut), engine: sink?.conn?.bufferedAmount ?? 0 };
    return {
      session_id: o.session_id,
      controlQueued: control?.queuedBytes ?? 0,
      controlBuffered: conn?.sink.bufferedAmount ?? 0,
      streamQueued: s.slotBytes + s.fifoBytes,
      streamBuffered: s.engine,
      slots: c.slots + s.slots,
      slotBytes: c.slotBytes + s.slotBytes,
      fifoBytes: c.fifoBytes + s.fifoBytes,
    };
  });
}

function outboxParts(out: Outbox | undefined): { slots: number; slotBytes: number; fifoBytes: number } {
  if (out === undefined) return { slots: 0, slotBytes: 0, fifoBytes: 0 };
  const slots = out['slots'];
  let slotBytes = 0;
  for (const item of slots.values()) slotBytes += item.bytes;
  return { slots: slots.size, slotBytes, fifoBytes: out['fifoBytes'] };
}

/**
 * The per-channel streams of a `webtransport` sink (another module's private state, read by shape):
 * each channel's latest-wins slot, ordered queue, and bytes handed to the transport but not yet taken.
 */
function webTransportParts(streams: unknown): {
  slots: number;
  slotBytes: number;
  fifoBytes: number;
  engine: number;
} {
  const out = { slots: 0, slotBytes: 0, fifoBytes: 0, engine: 0 };
  const channels = (
    streams as {
      channels?: Map<number, { slot?: { buf: Uint8Array } | null; fifoBytes?: number; inFlight?: number }>;
    }
  ).channels;
  for (const ch of channels?.values() ?? []) {
    if (ch.slot != null) {
      out.slots++;
      out.slotBytes += ch.slot.buf.byteLength;
    }
    out.fifoBytes += ch.fifoBytes ?? 0;
    // Each channel's stream has its own high-water mark (its own flow control).
    out.engine += ch.inFlight ?? 0;
  }
  return out;
}

export async function until(cond: () => boolean, timeoutMs: number, what = 'condition'): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!cond()) {
    if (performance.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
