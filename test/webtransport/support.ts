/**
 * WebTransport test support: an edge with a `webtransport` section (a fresh dev certificate written to
 * a temporary directory), and an agent-side session made with the library's own client that records
 * every frame per channel and which of the edge's streams carried it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ReadableStream, WritableStream } from 'node:stream/web';
import { WebTransport } from '@fails-components/webtransport';
import { createFrameHeader, peekFrame } from '../../src/protocol/frame.js';
import { webtransportSection, type DevCertificate } from '../support/dev-certificate.js';
import { FrameSplitter } from '../../src/transport/webtransport-framing.js';
import { startEdge, type TestEdge, type TestRoute } from '../support/edge.js';

export interface WtEdge extends TestEdge {
  readonly cert: DevCertificate;
}

export async function startWtEdge(
  routes: readonly TestRoute[],
  extra: Record<string, unknown> = {},
  wtListen = '127.0.0.1:0',
): Promise<WtEdge> {
  const dir = mkdtempSync(join(tmpdir(), 'awp-edge-wt-'));
  const { cert, section } = webtransportSection(dir, wtListen);
  try {
    const edge = await startEdge(routes, { webtransport: section, ...extra });
    return { ...edge, cert };
  } finally {
    rmSync(dir, { recursive: true, force: true }); // read at config load
  }
}

/** What the library's client session offers (its .d.ts resolves to `any`; typed here for the tests). */
export interface ClientSession {
  readonly ready: Promise<void>;
  readonly closed: Promise<{ closeCode?: number; reason?: string }>;
  readonly protocol: string | undefined;
  close(info?: { closeCode?: number; reason?: string }): void;
  createUnidirectionalStream(): Promise<WritableStream<Uint8Array>>;
  readonly incomingUnidirectionalStreams: ReadableStream<ReadableStream<Uint8Array>>;
  readonly datagrams: { createWritable(): WritableStream<Uint8Array> };
}

export interface FrameRecord {
  readonly seq: number;
  readonly flags: number;
  readonly bytes: number;
  /** Index of the edge stream (in arrival order) that carried it. */
  readonly stream: number;
  readonly at: number;
  readonly buf: Buffer;
}

/** An agent's WebTransport stream connection, recording frames per channel. */
export class WtAgent {
  readonly frames = new Map<number, FrameRecord[]>();
  /** The channel(s) each incoming stream carried, by stream index. */
  readonly streamChannels: Set<number>[] = [];
  closeInfo: { closeCode?: number; reason?: string } | null = null;
  readonly errors: string[] = [];

  private constructor(readonly session: ClientSession) {}

  /**
   * Opens a session with the session token as an offered `awp.bearer.<token>` protocol (the library's
   * client, like a browser's, cannot set an Authorization header).
   */
  static async connect(url: string, token: string, hash: Buffer, timeoutMs = 5000): Promise<WtAgent> {
    // The library's client class, seen through the typed interface above.
    const options = {
      forceReliable: true, // WebTransport over HTTP/2 (no HTTP/3 transport here)
      serverCertificateHashes: [{ algorithm: 'sha-256', value: hash }],
      protocols: ['awp', `awp.bearer.${token}`],
    };
    const session = new WebTransport(url, options) as unknown as ClientSession;
    const agent = new WtAgent(session);
    session.closed.then(
      (info) => (agent.closeInfo = info),
      (err: unknown) => (agent.closeInfo = { reason: String(err) }),
    );
    await withTimeout(session.ready, timeoutMs, 'webtransport session ready');
    void agent.readStreams();
    return agent;
  }

  /** Resolves once every channel in `ids` has at least `n` frames. */
  async waitFrames(ids: readonly number[], n: number, timeoutMs = 5000): Promise<void> {
    const end = Date.now() + timeoutMs;
    while (ids.some((id) => (this.frames.get(id)?.length ?? 0) < n)) {
      if (Date.now() > end) {
        const counts = ids.map((id) => `${id}:${this.frames.get(id)?.length ?? 0}`).join(' ');
        throw new Error(
          `timed out waiting for ${n} frames per channel (have ${counts}; errors ${this.errors.join('; ')})`,
        );
      }
      await sleep(10);
    }
  }

  async waitClosed(timeoutMs = 5000): Promise<{ closeCode?: number; reason?: string }> {
    await withTimeout(
      this.session.closed.catch(() => undefined),
      timeoutMs,
      'webtransport session close',
    );
    await sleep(0);
    return this.closeInfo ?? {};
  }

  /** Writes bytes on a new unidirectional stream of the agent's, then finishes it. */
  async sendOnNewStream(...chunks: Uint8Array[]): Promise<void> {
    const w = (await this.session.createUnidirectionalStream()).getWriter();
    for (const c of chunks) await w.write(c);
    await w.close().catch(() => undefined);
  }

  /** Sends each buffer as one datagram. */
  async sendDatagrams(...datagrams: Uint8Array[]): Promise<void> {
    const w = this.session.datagrams.createWritable().getWriter();
    for (const d of datagrams) await w.write(d);
    w.releaseLock();
  }

  close(): void {
    try {
      this.session.close({ closeCode: 0, reason: 'test done' });
    } catch {
      // already closed
    }
  }

  private async readStreams(): Promise<void> {
    const reader = this.session.incomingUnidirectionalStreams.getReader();
    for (;;) {
      let next;
      try {
        next = await reader.read();
      } catch {
        return;
      }
      if (next.done) return;
      const index = this.streamChannels.length;
      this.streamChannels.push(new Set());
      void this.readFrames(next.value, index);
    }
  }

  private async readFrames(stream: ReadableStream<Uint8Array>, index: number): Promise<void> {
    const splitter = new FrameSplitter(64 * 1024 * 1024);
    const header = createFrameHeader();
    const reader = stream.getReader();
    for (;;) {
      let next;
      try {
        next = await reader.read();
      } catch {
        return;
      }
      if (next.done) return;
      try {
        for (const buf of splitter.push(next.value)) {
          peekFrame(buf, header);
          this.streamChannels[index]!.add(header.channel_id);
          let list = this.frames.get(header.channel_id);
          if (list === undefined) this.frames.set(header.channel_id, (list = []));
          list.push({
            seq: header.seq,
            flags: header.flags,
            bytes: buf.length,
            stream: index,
            at: performance.now(),
            buf: Buffer.from(buf),
          });
        }
      } catch (err) {
        this.errors.push(String(err));
        return;
      }
    }
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(t);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

export async function until(cond: () => boolean, timeoutMs = 5000, what = 'a condition'): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}
