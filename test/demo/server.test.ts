import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startDemoWorld } from '../../src/demo/server.js';
import type { RunningDemoWorld } from '../../src/demo/server.js';
import { decodeFrame } from '../../src/protocol/frame.js';

type Json = Record<string, unknown>;

/** A tiny AWP client over a real socket: buffered messages, awaited with a bounded wait. */
class Client {
  readonly texts: Json[] = [];
  readonly binaries: Buffer[] = [];
  private waiters: (() => void)[] = [];
  private nextId = 1;
  closed: { code: number; reason: string } | undefined;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary) this.binaries.push(data);
      else {
        const msg = JSON.parse(data.toString('utf8')) as Json;
        // answer world pings like an agent's transport
        if (msg.method === 'ping' && msg.id !== undefined) {
          ws.send(
            JSON.stringify({
              jsonrpc: '2.0',
              id: msg.id,
              result: { origin_ns: (msg.params as Json).origin_ns, receive_ns: 1, transmit_ns: 1 },
            }),
          );
        }
        this.texts.push(msg);
      }
      this.wake();
    });
    ws.on('close', (code, reason) => {
      this.closed = { code, reason: reason.toString() };
      this.wake();
    });
  }

  static open(
    url: string,
    opts: { protocols?: string[]; headers?: Record<string, string> } = {},
  ): Promise<Client> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, opts.protocols ?? ['awp'], { headers: opts.headers ?? {} });
      ws.once('open', () => resolve(new Client(ws)));
      ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode ?? 0}`)));
      ws.once('error', reject);
    });
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  async until<T>(probe: () => T | undefined, what: string, ms = 3000): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      const got = probe();
      if (got !== undefined) return got;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  async call(method: string, params?: Json): Promise<Json> {
    const id = this.nextId++;
    this.ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, ...(params && { params }) }));
    const res = await this.until(
      () => this.texts.find((m) => m.id === id && m.method === undefined),
      `${method} response`,
    );
    if (res.error !== undefined) throw new Error(JSON.stringify(res.error));
    return res.result as Json;
  }

  async init(consumes = ['proprio/json', 'image/raw', 'text/event+json']): Promise<Json> {
    return this.call('initialize', {
      protocol_versions: ['0.1'],
      agent: { name: 'socket-test', version: '0', vendor: 'test' },
      consumes_modalities: consumes,
    });
  }

  close(): void {
    this.ws.terminate();
  }
}

const running: RunningDemoWorld[] = [];
const clients: Client[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const w of running.splice(0)) await w.close();
});

async function start(kind: 'arm' | 'grid', extra: Record<string, unknown> = {}): Promise<RunningDemoWorld> {
  const w = await startDemoWorld({ kind, host: '127.0.0.1', port: 0, cameraBytes: 4096, ...extra });
  running.push(w);
  return w;
}

async function client(
  url: string,
  opts?: { protocols?: string[]; headers?: Record<string, string> },
): Promise<Client> {
  const c = await Client.open(url, opts);
  clients.push(c);
  return c;
}

describe('demo world server (ws + node:http)', () => {
  it('AWP-TRN-001 control at / with subprotocol awp; the grid world answers initialize with its manifest', async () => {
    const w = await start('grid');
    expect(w.url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/$/);
    const c = await client(w.url);
    expect(c.ws.protocol).toBe('awp');
    const manifest = await c.init();
    expect(manifest).toMatchObject({
      protocol_version: '0.1',
      world: { name: 'gridworld' },
      time_models: ['lockstep'],
    });
    const ready = await c.call('session.open', {
      embodiment: 'avatar_0',
      mode: 'lockstep',
      subscribe: [{ channel: 'grid_view' }],
    });
    expect(ready.tick).toBe(0);
    await c.call('world.tick', { expected_tick: 0, count: 2 });
    const frames = c.texts.filter((m) => m.method === 'obs.frame').map((m) => (m.params as Json).tick);
    expect(frames).toEqual([0, 1, 2]);
  });

  it('AWP-SEC-005 a configured credential is required: Authorization: Bearer or awp.bearer.<credential>, selecting awp without echoing it', async () => {
    const w = await start('arm', { token: 'sekrit-credential' });
    await expect(Client.open(w.url)).rejects.toThrow('HTTP 401');
    await expect(Client.open(w.url, { headers: { Authorization: 'Bearer wrong' } })).rejects.toThrow(
      'HTTP 401',
    );
    const viaHeader = await client(w.url, { headers: { Authorization: 'Bearer sekrit-credential' } });
    expect(viaHeader.ws.protocol).toBe('awp');
    const viaProtocol = await client(w.url, { protocols: ['awp', 'awp.bearer.sekrit-credential'] });
    expect(viaProtocol.ws.protocol).toBe('awp');
    await viaProtocol.init();
  });

  it('AWP-SEC-006 a URL carrying a credential is refused with HTTP 400', async () => {
    const w = await start('arm');
    await expect(Client.open(`${w.url}?token=abc`)).rejects.toThrow('HTTP 400');
    await expect(Client.open(`${w.url}?access_token=abc`)).rejects.toThrow('HTTP 400');
    await expect(Client.open(`${w.url.replace(/\/$/, '')}/stream?session_token=abc`)).rejects.toThrow(
      'HTTP 400',
    );
  });

  it('AWP-DAT-004 the arm world streams inline obs.frame with ts_send_ns, and telemetry', async () => {
    const w = await start('arm');
    const c = await client(w.url);
    await c.init();
    const ready = await c.call('session.open', {
      embodiment: 'arm_01',
      mode: 'streaming',
      subscribe: [{ channel: 'proprio' }, { channel: 'camera' }],
    });
    expect((ready.stream_endpoints as Json[]).map((e) => e.binding)).toEqual(['ws', 'inline']);
    await c.until(
      () => (c.texts.some((m) => m.method === 'session.telemetry') ? true : undefined),
      'telemetry',
      3000,
    );
    const frames = c.texts.filter((m) => m.method === 'obs.frame').map((m) => m.params as Json);
    expect(frames.filter((f) => f.channel_id === 1).length).toBeGreaterThan(50);
    for (const f of frames) expect(f.ts_send_ns as number).toBeGreaterThanOrEqual(f.ts_mono_ns as number);
    const camera = frames.find((f) => f.channel_id === 2)!;
    expect(Buffer.from(camera.payload_b64 as string, 'base64').length).toBe(4096);
  });

  it('AWP-TRN-013 ws stream binding at /stream: session token as bearer, binary frames, resync keyframes first; bad tokens get 401', async () => {
    const w = await start('arm');
    const c = await client(w.url);
    await c.init();
    const ready = await c.call('session.open', {
      embodiment: 'arm_01',
      mode: 'streaming',
      subscribe: [{ channel: 'proprio' }, { channel: 'camera' }, { channel: 'state' }],
    });
    const endpoint = (ready.stream_endpoints as Json[])[0]!;
    expect(endpoint.url).toBe(w.url.replace(/\/$/, '/stream'));
    await expect(
      Client.open(endpoint.url as string, { headers: { Authorization: 'Bearer not-a-session' } }),
    ).rejects.toThrow('HTTP 401');
    const s = await client(endpoint.url as string, {
      protocols: ['awp', `awp.bearer.${ready.session_token as string}`],
    });
    expect(s.ws.protocol).toBe('awp');
    await s.until(() => (s.binaries.length >= 30 ? true : undefined), 'binary frames');
    const decoded = s.binaries.map((b) => decodeFrame(b));
    const firsts = [1, 2, 3].map((ch) => decoded.find((f) => f.channel_id === ch)!);
    for (const f of firsts) expect(f.flags & 9).toBe(9);
    expect(decoded.every((f) => f.ts_send_ns !== undefined)).toBe(true);
    const inlineAfter = c.texts.length;
    await s.until(() => (s.binaries.length >= 60 ? true : undefined), 'more binary frames');
    expect(c.texts.slice(inlineAfter).filter((m) => m.method === 'obs.frame')).toEqual([]);
    // a text message on a stream connection closes it: 1002 AWP_MALFORMED
    s.ws.send('hello');
    await s.until(() => s.closed, 'stream close');
    expect(s.closed).toEqual({ code: 1002, reason: 'AWP_MALFORMED' });
  });

  it('AWP-SES-010 resuming on a new socket closes the old one and replays what it missed', async () => {
    const w = await start('arm');
    const a = await client(w.url);
    await a.init();
    const ready = await a.call('session.open', { embodiment: 'arm_01', mode: 'streaming' });
    const b = await client(w.url);
    await b.init();
    const resumed = await b.call('session.resume', {
      session_token: ready.session_token,
      last_status_seq: 0,
    });
    expect(resumed.replay_to_status_seq).toBe(2);
    await a.until(() => a.closed, 'old connection closed');
    await b.until(
      () => (b.texts.filter((m) => m.method === 'session.state').length >= 3 ? true : undefined),
      'replay',
    );
    const states = b.texts
      .filter((m) => m.method === 'session.state')
      .map((m) => [(m.params as Json).status_seq, (m.params as Json).reason]);
    expect(states).toEqual([
      [1, 'opened'],
      [2, 'connection_replaced'],
      [3, 'resumed'],
    ]);
  });
});
