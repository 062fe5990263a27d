/**
 * `stream_listen` (issue 15 item 1): observers' stream connections on a listener of their own, served by
 * uWebSockets.js on a worker thread, so the engine's fan-out writes leave the main thread's event loop to
 * control messages. Over real sockets, in front of the streaming demo arm world: the observer's `ws`
 * endpoint names the stream listener and frames arrive there; the listener takes observers' stream
 * connections and nothing else; hostile input on it is contained to its connection; closing the edge frees
 * its port. Runs where uWebSockets.js loads; the configuration check runs everywhere.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createConnection, createServer, type AddressInfo, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { validateConfig } from '../../src/config/load.js';
import { uwsAvailability } from '../../src/transport/uws-load.js';
import { sleep, startRig, until, type Rig } from '../fanout/rig.js';
import { AwpClient, HttpRefusal } from '../support/awp-client.js';
import { AGENT_TOKEN } from '../support/edge.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('stream_listen configuration', () => {
  /** A configuration with a stream listener, the rest the least that validates. */
  const WITH_LISTENER = {
    stream_listen: '127.0.0.1:8722',
    agents: { tokens: [AGENT_TOKEN] },
    routes: [{ name: 'arm', path: '/arm', upstream: 'ws://127.0.0.1:9/' }],
  };

  it('needs the uWebSockets.js engine: with engine ws the config is refused, saying so', () => {
    const raw = { ...WITH_LISTENER, engine: 'ws' };
    expect(() => validateConfig(raw, 'edge.yaml', {})).toThrow(
      /stream_listen: needs the uWebSockets\.js engine \(engine: auto or uws\), not ws/,
    );
    expect(() => validateConfig({ ...raw, stream_listen: 'nowhere' }, 'edge.yaml', {})).toThrow(
      /stream_listen/,
    );
  });

  it('stream_worker_nice is 0-19 and needs stream_listen', () => {
    const raw = { ...WITH_LISTENER, engine: 'uws' };
    expect(validateConfig(raw, 'edge.yaml', {}).stream_worker_nice).toBe(0);
    expect(validateConfig({ ...raw, stream_worker_nice: 10 }, 'edge.yaml', {}).stream_worker_nice).toBe(10);
    for (const bad of [-1, 20, 2.5, '5'])
      expect(() => validateConfig({ ...raw, stream_worker_nice: bad }, 'edge.yaml', {})).toThrow(
        /stream_worker_nice: expected/,
      );
    const { stream_listen: _, ...noListener } = raw;
    expect(() => validateConfig({ ...noListener, stream_worker_nice: 5 }, 'edge.yaml', {})).toThrow(
      /stream_worker_nice: needs stream_listen \(the worker thread it lowers\)/,
    );
  });

  it('stream_public_url names the stream listener as agents reach it: it needs stream_listen, carries no credential and no path', () => {
    const raw = { ...WITH_LISTENER, engine: 'uws' };
    const ok = validateConfig({ ...raw, stream_public_url: 'wss://streams.example.com/' }, 'edge.yaml', {});
    expect(ok.stream_public_url).toBe('wss://streams.example.com');
    const { stream_listen: _, ...noListener } = raw;
    expect(() =>
      validateConfig({ ...noListener, stream_public_url: 'wss://streams.example.com' }, 'edge.yaml', {}),
    ).toThrow(/stream_public_url: needs stream_listen/);
    for (const key of ['stream_public_url', 'public_url']) {
      const withCredential = { ...raw, [key]: 'wss://user:s3cret-pass@edge.example.com' };
      let message = '';
      try {
        validateConfig(withCredential, 'edge.yaml', {});
      } catch (err) {
        message = String(err);
      }
      expect(message, key).toMatch(new RegExp(`${key}: the URL carries a credential`));
      expect(message, key).not.toContain('s3cret-pass'); // not echoed into logs
      expect(() => validateConfig({ ...raw, [key]: 'wss://edge.example.com/path' }, 'edge.yaml', {})).toThrow(
        new RegExp(`${key}: expected ws\\(s\\)://HOST\\[:PORT\\] without a path`),
      );
    }
  });
});

/** The port of a `ws://host:port/...` URL. */
function portOf(url: string): number {
  return Number(new URL(url).port);
}

/** Connects with a credential and expects an HTTP refusal; resolves with it. */
async function refusal(url: string, credential: string | undefined): Promise<HttpRefusal> {
  const err = await AwpClient.connect(url, credential !== undefined ? { credential } : {}).then(
    (c) => {
      c.close();
      throw new Error(`${url} was accepted`);
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(HttpRefusal);
  return err as HttpRefusal;
}

describe.skipIf(!uwsAvailability().ok)('observers stream on the stream listener (worker thread)', () => {
  async function rig(): Promise<Rig> {
    const r = await startRig({ edge: { engine: 'uws', stream_listen: '127.0.0.1:0' } });
    cleanups.push(() => r.close());
    return r;
  }

  it('AWP-TRN-004 AWP-TRN-013 the ws endpoint names the stream listener; frames arrive there in seq order', async () => {
    const r = await rig();
    const channels = [{ channel: 'proprio' }, { channel: 'camera' }];
    const a = await r.observer({ kind: 'ws', subscribe: channels });
    const b = await r.observer({ kind: 'ws', subscribe: channels });
    const streamPort = portOf(a.endpoint());
    expect(streamPort).not.toBe(r.edge.edge.port);
    expect(new URL(a.endpoint()).pathname).toMatch(/^\/arm/);
    // The stream connection is the worker's: its remote port is the stream listener's.
    expect((a.stream as unknown as { _socket: { remotePort: number } })._socket.remotePort).toBe(streamPort);
    await until(
      () => [a, b].every((o) => o.log('proprio').count > 50 && o.log('camera').count > 10),
      10_000,
      'frames of both channels on both observers',
    );
    for (const o of [a, b])
      for (const [id, log] of o.channels) expect(log.orderViolations, `channel ${id}`).toEqual([]);
  });

  it('takes observers’ stream connections only: a control connection, a relay stream and a URL credential are refused', async () => {
    const r = await rig();
    const o = await r.observer({ kind: 'ws', subscribe: [{ channel: 'proprio' }] });
    const base = `ws://127.0.0.1:${portOf(o.endpoint())}`;
    const control = await refusal(`${base}/arm`, AGENT_TOKEN);
    expect(control.status).toBe(404);
    expect(control.body).toContain('serves observers');
    // The refused control connection gave its budget slot back: the agent listener still takes agents.
    const agent = await AwpClient.connect(r.edge.url('/arm'), { credential: AGENT_TOKEN });
    agent.close();
    const noToken = await refusal(`${base}${new URL(o.endpoint()).pathname}`, undefined);
    expect(noToken.status).toBe(401);
    const inUrl = await refusal(`${base}/arm?token=${AGENT_TOKEN}`, AGENT_TOKEN);
    expect(inUrl.status).toBe(400);
    expect(inUrl.body).not.toContain(AGENT_TOKEN);
    const plain = await fetch(`http://127.0.0.1:${portOf(o.endpoint())}/viewer/`);
    expect(plain.status).toBe(426);
    const metrics = await (await fetch(`${r.edge.adminUrl}/metrics`)).text();
    expect(metrics).toMatch(/awp_edge_rejections_total\{route="r0",reason="no_route"\} [1-9]/);
  });

  it('contains hostile input to its connection: a malformed frame closes that stream 1002, others keep streaming', async () => {
    const r = await rig();
    const bad = await r.observer({ kind: 'ws', subscribe: [{ channel: 'proprio' }] });
    const good = await r.observer({ kind: 'ws', subscribe: [{ channel: 'proprio' }] });
    const closed = new Promise<[number, string]>((resolve) =>
      bad.stream!.once('close', (code, reason) => resolve([code, reason.toString()])),
    );
    bad.stream!.send('not a frame');
    expect(await closed).toEqual([1002, 'AWP_MALFORMED']);
    // Raw garbage that is not WebSocket at all, on a socket of its own: refused by the engine.
    const raw = createConnection({ host: '127.0.0.1', port: portOf(good.endpoint()) });
    raw.on('error', () => undefined);
    raw.write('\x16\x03\x01\x02\x00GARBAGE\r\n\r\n');
    await sleep(200);
    raw.destroy();
    const before = good.log('proprio').count;
    await until(() => good.log('proprio').count > before + 30, 5000, 'the other observer to keep streaming');
    // And the edge still opens new ones.
    const later = await r.observer({ kind: 'ws', subscribe: [{ channel: 'proprio' }] });
    await until(() => later.log('proprio').count > 10, 5000, 'a new observer to stream');
  });

  it('with stream_public_url, observers reach the stream listener the way it names: through a proxy on another port', async () => {
    // The proxy (a TCP forwarder, as a load balancer in front of the stream port) listens first: its port
    // is the public one; the stream listener's own port is known once the edge listens.
    let target = 0;
    const proxy = await tcpForwarder(() => target);
    cleanups.push(() => new Promise<void>((resolve) => proxy.close(() => resolve())));
    const publicPort = (proxy.address() as AddressInfo).port;
    const r = await startRig({
      edge: {
        engine: 'uws',
        stream_listen: '127.0.0.1:0',
        stream_public_url: `ws://127.0.0.1:${publicPort}`,
      },
    });
    cleanups.push(() => r.close());
    target = r.edge.edge.streamPort!;
    const o = await r.observer({ kind: 'ws', subscribe: [{ channel: 'proprio' }] });
    expect(new URL(o.endpoint()).host).toBe(`127.0.0.1:${publicPort}`);
    expect(new URL(o.endpoint()).pathname).toMatch(/^\/arm/);
    await until(() => o.log('proprio').count > 30, 10_000, 'frames through the proxy');
    expect(o.log('proprio').orderViolations).toEqual([]);
  });

  it('stream_worker_nice lowers the worker thread alone, by that much; frames still flow', async () => {
    const r = await startRig({
      edge: { engine: 'uws', stream_listen: '127.0.0.1:0', stream_worker_nice: 7 },
    });
    cleanups.push(() => r.close());
    const o = await r.observer({ kind: 'ws', subscribe: [{ channel: 'proprio' }] });
    await until(() => o.log('proprio').count > 20, 10_000, 'proprio frames on the stream listener');
    // Field 19 of /proc/<tid>/stat is the thread's niceness (after the parenthesised name).
    const nice = (stat: string) => Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
    const main = nice(readFileSync('/proc/self/stat', 'utf8'));
    const threads = readdirSync('/proc/self/task').map((t) =>
      nice(readFileSync(`/proc/self/task/${t}/stat`, 'utf8')),
    );
    const lowered = Math.min(19, main + 7);
    expect(threads.filter((n) => n === lowered)).toHaveLength(1);
    expect(threads.filter((n) => n !== main && n !== lowered)).toEqual([]);
  });

  it('closing the edge closes the streams and frees the stream listener’s port', async () => {
    const r = await startRig({ edge: { engine: 'uws', stream_listen: '127.0.0.1:0' } });
    const o = await r.observer({ kind: 'ws', subscribe: [{ channel: 'proprio' }] });
    const port = portOf(o.endpoint());
    const streamClosed = new Promise<number>((resolve) => o.stream!.once('close', (code) => resolve(code)));
    await r.close();
    expect(await streamClosed).toBeGreaterThan(0);
    const refused = await new Promise<boolean>((resolve) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/arm`, ['awp']);
      ws.on('error', () => resolve(true));
      ws.on('open', () => {
        ws.close();
        resolve(false);
      });
    });
    expect(refused).toBe(true);
  });
});

/** A TCP forwarder on a loopback port to `port()` on loopback (a load balancer's stand-in: bytes only). */
function tcpForwarder(port: () => number): Promise<Server> {
  const server = createServer((client) => {
    const upstream = createConnection({ host: '127.0.0.1', port: port() });
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}
