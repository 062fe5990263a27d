/**
 * The flight recorder in a running edge (issue 14 item 4), real sockets, the demo arm world: a relay
 * session with a `ws` stream connection, dropped and resumed, is one file with its binary frames (as their
 * sender sent them, with the binding), the detach and the resume, and no credential or token of the run;
 * and on a stalled disk the relay session completes every round trip while not one write has completed:
 * the records the queue cannot take are dropped, counted in awp_edge_recorder_records_dropped_total and
 * reported in the file, which still verifies.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDemoWorld, type RunningDemoWorld } from '../../src/demo/index.js';
import type { EdgeOptions } from '../../src/edge/edge.js';
import { peekFrame } from '../../src/protocol/frame.js';
import { refNumbers } from '../../src/recorder/frame-refs.js';
import { parseRecords } from '../../src/recorder/read.js';
import { verifyText } from '../../src/recorder/verify.js';
import { AwpClient, initializeParams, type Json } from '../support/awp-client.js';
import { AGENT_TOKEN, startEdge, type TestEdge } from '../support/edge.js';
import { GatedFs } from './slow-fs.js';

const UPSTREAM_CREDENTIAL = 'upstream-credential-recorder-5c1e9a7b';
const root = mkdtempSync(join(tmpdir(), 'awp-recording-edge-'));
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function armWorld(): Promise<RunningDemoWorld> {
  const world = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0, token: UPSTREAM_CREDENTIAL });
  cleanups.push(() => world.close());
  return world;
}

/** The demo arm world behind an edge recording its route `arm` into `<root>/<name>` (closed after the test). */
async function recordingEdge(
  name: string,
  record: Record<string, unknown> = {},
  options: EdgeOptions = {},
): Promise<{ world: RunningDemoWorld; dir: string; edge: TestEdge }> {
  const world = await armWorld();
  const dir = join(root, name);
  const route = { path: '/arm', name: 'arm', upstream: world.url, upstream_token: UPSTREAM_CREDENTIAL };
  const edge = await startEdge([{ ...route, record: { dir, ...record } }], {}, options);
  cleanups.push(() => edge.close());
  return { world, dir, edge };
}

async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A binary frame as a recording names it: channel, seq and the SHA-256 of its payload. */
function frameKey(buf: Buffer): string {
  const h = peekFrame(buf);
  const payload = buf.subarray(buf.length - h.payload_len);
  return `${h.channel_id}/${h.seq}/${createHash('sha256').update(payload).digest('hex')}`;
}

async function metric(edge: TestEdge, name: string): Promise<number> {
  const text = await (await fetch(`${edge.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{route="arm"}`));
  return line === undefined ? NaN : Number(line.split(' ').at(-1));
}

describe('flight recorder in the edge', () => {
  it('records a relay session with its stream frames, across a resume, in one file with no secret in it', async () => {
    const { world, dir, edge } = await recordingEdge('resume');
    const worldTokens = new Set<string>();
    const note = () => {
      for (const s of world.world.sessions.values()) worldTokens.add(s.token);
    };

    const agent = await AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN });
    cleanups.push(() => agent.drop());
    await agent.ok('initialize', initializeParams());
    const ready = await agent.ok('session.open', {
      embodiment: 'arm_01',
      mode: 'streaming',
      subscribe: [{ channel: 'state' }],
    });
    note();
    const url = (ready.stream_endpoints as { binding: string; url?: string }[]).find(
      (e) => e.binding === 'ws',
    )!.url!;
    const stream = new WebSocket(url, ['awp', `awp.bearer.${ready.session_token as string}`]);
    cleanups.push(() => stream.terminate());
    let frames = 0;
    stream.on('message', () => frames++);
    await until(() => frames >= 3, 'frames on the stream connection');
    await agent.ok('ping', { origin_ns: 1 });
    const last = agent.statusSeqs().at(-1) ?? 0;
    stream.terminate();
    agent.drop();

    const again = await AwpClient.connect(edge.url('/arm'), {
      credential: AGENT_TOKEN,
      viaSubprotocol: true,
    });
    cleanups.push(() => again.drop());
    await again.ok('initialize', initializeParams());
    const resumed = await again.ok('session.resume', {
      session_token: ready.session_token,
      last_status_seq: last,
    });
    note();
    await again.ok('session.close', {});
    again.drop();
    await edge.close();

    const files = readdirSync(dir);
    expect(files).toHaveLength(1); // resumed on this edge within its reconnect window: the same file
    const text = readFileSync(join(dir, files[0]!), 'utf8');
    const v = verifyText(text);
    expect(v.ok ? 'ok' : `${v.line}: ${v.problem}`).toBe('ok');
    const records = parseRecords(text);
    const streamFrames = records.filter((r) => r.kind === 'frame' && r.body.binding === 'ws');
    expect(streamFrames.length).toBeGreaterThanOrEqual(3);
    expect(streamFrames.every((r) => r.direction === 'world' && r.body.method === 'obs.frame')).toBe(true);
    expect(
      streamFrames.every((r) => typeof r.body.payload_sha256 === 'string' && !('payload_b64' in r.body)),
    ).toBe(true);
    const events = records.filter((r) => r.kind === 'edge').map((r) => r.body.event);
    expect(events).toEqual(expect.arrayContaining(['session_detached', 'session_resumed', 'session_ended']));
    const resumes = records.filter((r) => r.body.method === 'session.resume').map((r) => r.direction);
    expect(resumes).toEqual(['agent', 'edge_to_world']); // the agent's token, then the world's

    const secrets = [
      AGENT_TOKEN,
      UPSTREAM_CREDENTIAL,
      ready.session_token as string,
      resumed.session_token as string,
      ...worldTokens,
    ];
    expect(worldTokens.size).toBeGreaterThanOrEqual(1);
    for (const s of secrets) expect(text, s).not.toContain(s);
  });

  it('records an observer session as the observer saw it: its messages, the frames delivered to it, across a resume', async () => {
    const { world, dir, edge } = await recordingEdge('observer');
    const observer = await AwpClient.connect(edge.url('/arm'), {
      credential: AGENT_TOKEN,
      viaSubprotocol: true,
    });
    cleanups.push(() => observer.drop());
    await observer.ok('initialize', initializeParams());
    const ready = await observer.ok('session.open', { mode: 'streaming', subscribe: [{ channel: 'state' }] });
    await observer.waitFor((m) => m.method === 'obs.frame', 5000, 'an inline frame');
    observer.drop();
    const again = await AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN });
    cleanups.push(() => again.drop());
    await again.ok('initialize', initializeParams());
    const resumed = await again.ok('session.resume', {
      session_token: ready.session_token,
      last_status_seq: 0,
    });
    await again.waitFor((m) => m.method === 'obs.frame', 5000, 'an inline frame after the resume');
    await again.ok('session.close', {});
    // Every frame an observer got, as it got it (channel, seq, payload): what its recording must name.
    const delivered = [...observer.received, ...again.received]
      .filter((m) => m.method === 'obs.frame')
      .map((m) => {
        const p = m.params as Json;
        const payload = Buffer.from(p.payload_b64 as string, 'base64');
        return `${String(p.channel_id)}/${String(p.seq)}/${createHash('sha256').update(payload).digest('hex')}`;
      });
    again.drop();
    const hubTokens = [...world.world.sessions.values()].map((s) => s.token);
    await edge.close();

    const files = readdirSync(dir).sort();
    expect(files).toHaveLength(2);
    expect(files[0]).toMatch(/^arm\.hub\.streaming\./);
    expect(files[1]).toMatch(/^arm\.observer\./);
    const [hubText, text] = files.map((f) => readFileSync(join(dir, f), 'utf8')) as [string, string];
    for (const t of [hubText, text]) {
      const v = verifyText(t);
      expect(v.ok ? 'ok' : `${v.line}: ${v.problem}`).toBe('ok');
    }
    const records = parseRecords(text);
    expect(records[0]!.body).toMatchObject({ session_kind: 'observer', session_id: ready.session_id });
    const methods = (d: string) =>
      records.filter((r) => r.direction === d && r.kind === 'message').map((r) => r.body.method ?? 'result');
    expect(methods('agent')).toEqual([
      'initialize',
      'session.open',
      'initialize',
      'session.resume',
      'session.close',
    ]);
    // The hub's frames are recorded once, numbered, in the hub log; the observer's file refers to them.
    const hubFrames = new Map<number, Json>();
    for (const r of parseRecords(hubText).filter((r) => r.kind === 'frames'))
      for (const f of r.body.frames as Json[]) hubFrames.set(f.n as number, f);
    const refs = records.filter((r) => r.kind === 'frame_refs');
    expect(refs.every((r) => r.direction === 'edge_to_agent' && r.body.binding === 'inline')).toBe(true);
    expect(refs.every((r) => r.body.hub_file === files[0])).toBe(true);
    const recorded = refs
      .flatMap((r) => refNumbers(r.body)!)
      .map((n) => hubFrames.get(n)!)
      .map((f) => `${String(f.channel_id)}/${String(f.seq)}/${String(f.payload_sha256)}`);
    // What the edge had handed its socket when the observer dropped may be recorded and not received.
    expect(recorded).toEqual(expect.arrayContaining(delivered));
    expect(recorded.length).toBeLessThanOrEqual(delivered.length + 8);
    const events = records.filter((r) => r.kind === 'edge').map((r) => r.body.event);
    expect(events).toEqual(expect.arrayContaining(['session_detached', 'session_resumed']));
    expect(records.at(-1)).toMatchObject({ kind: 'end', body: { reason: 'session ended' } });
    for (const s of [
      AGENT_TOKEN,
      UPSTREAM_CREDENTIAL,
      ready.session_token as string,
      resumed.session_token as string,
      ...hubTokens,
    ])
      for (const t of [hubText, text]) expect(t, s).not.toContain(s);
  });

  it("records observers on stream connections (uws: through the engine's topics): every frame each received, per channel in order", async () => {
    const { dir, edge } = await recordingEdge('streams');
    const observers: { client: AwpClient; session_id: string; got: string[] }[] = [];
    for (let i = 0; i < 3; i++) {
      const client = await AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN });
      cleanups.push(() => client.drop());
      await client.ok('initialize', initializeParams());
      const ready = await client.ok('session.open', {
        mode: 'streaming',
        subscribe: [{ channel: 'proprio' }, { channel: 'camera' }],
      });
      const url = (ready.stream_endpoints as { binding: string; url?: string }[]).find(
        (e) => e.binding === 'ws',
      )!.url!;
      const stream = new WebSocket(url, ['awp', `awp.bearer.${ready.session_token as string}`]);
      cleanups.push(() => stream.terminate());
      const got: string[] = [];
      stream.on('message', (data: Buffer) => got.push(frameKey(data)));
      observers.push({ client, session_id: ready.session_id as string, got });
    }
    // ~130 frames/s on each stream: a second and more of them, most through the topics on uws.
    await until(() => observers.every((o) => o.got.length >= 200), 'frames on every stream connection');
    const members = (await (await fetch(`${edge.adminUrl}/metrics`)).text())
      .split('\n')
      .filter((l) => l.startsWith('awp_edge_topic_members{route="arm"'))
      .reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
    expect(members).toBe(process.env.AWP_EDGE_ENGINE === 'uws' ? 6 : 0); // three observers, two channels each
    for (const o of observers) await o.client.ok('session.close', {});
    await edge.close();

    const files = readdirSync(dir).sort();
    const hubFile = files.find((f) => f.startsWith('arm.hub.'))!;
    const hubFrames = new Map<number, Json>();
    for (const f of files.filter((f) => f.startsWith('arm.hub.'))) {
      const text = readFileSync(join(dir, f), 'utf8');
      const v = verifyText(text);
      expect(v.ok ? 'ok' : `${v.line}: ${v.problem}`).toBe('ok');
      for (const r of parseRecords(text).filter((r) => r.kind === 'frames'))
        for (const fr of r.body.frames as Json[]) hubFrames.set(fr.n as number, fr);
    }
    for (const o of observers) {
      const file = files.find((f) => f.startsWith('arm.observer.') && f.includes(o.session_id))!;
      const text = readFileSync(join(dir, file), 'utf8');
      const v = verifyText(text);
      expect(v.ok ? 'ok' : `${v.line}: ${v.problem}`).toBe('ok');
      const refs = parseRecords(text).filter((r) => r.kind === 'frame_refs');
      expect(refs.every((r) => r.body.hub_file === hubFile)).toBe(true);
      // Inline on the control connection until the stream connection is up, then only there (AWP-TRN-012).
      const inline = o.client.received
        .filter((m) => m.method === 'obs.frame')
        .map((m) => {
          const p = m.params as Json;
          const payload = Buffer.from(p.payload_b64 as string, 'base64');
          return `${String(p.channel_id)}/${String(p.seq)}/${createHash('sha256').update(payload).digest('hex')}`;
        });
      const got = [...inline, ...o.got];
      const bindings = refs.map((r) => r.body.binding as string);
      expect(bindings.indexOf('ws')).toBeGreaterThan(bindings.lastIndexOf('inline'));
      const recorded = refs
        .flatMap((r) => refNumbers(r.body)!)
        .map((n) => hubFrames.get(n)!)
        .map((f) => `${String(f.channel_id)}/${String(f.seq)}/${String(f.payload_sha256)}`);
      // Per channel, what the observer received is what its file names, in order. (Across channels the
      // wire order may differ: uWS writes a small published frame after the turn, a large one at once.)
      for (const channel of new Set(got.map((k) => k.split('/')[0]))) {
        const of = (keys: string[]) => keys.filter((k) => k.startsWith(`${channel!}/`));
        expect(of(recorded)).toEqual(of(got));
      }
      expect(recorded).toHaveLength(got.length);
    }
  });

  it('on a stalled disk never holds the relay back: records are dropped, counted, and said in the file', async () => {
    const fs = new GatedFs();
    const { dir, edge } = await recordingEdge('stalled', { queue_bytes: 65_536 }, { recorderFs: fs });
    const agent = await AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN });
    cleanups.push(() => agent.drop());
    await agent.ok('initialize', initializeParams());
    await agent.ok('session.open', {
      embodiment: 'arm_01',
      mode: 'streaming',
      subscribe: [{ channel: 'state' }],
    });
    const rounds = 400;
    for (let i = 0; i < rounds; i++) {
      const r = await agent.ok('ping', { origin_ns: i + 1, pad: 'x'.repeat(200) });
      expect(r.origin_ns).toBe(i + 1);
    }
    // Every round trip completed while the disk had not completed a single write.
    expect(fs.writes).toBe(0);
    const dropped = await metric(edge, 'awp_edge_recorder_records_dropped_total');
    expect(dropped).toBeGreaterThan(rounds); // four records a round trip, 64 KiB of queue

    fs.release();
    await agent.ok('session.close', {});
    agent.drop();
    await edge.close();
    const [file] = readdirSync(dir);
    const text = readFileSync(join(dir, file!), 'utf8');
    const v = verifyText(text);
    expect(v.ok ? 'ok' : `${v.line}: ${v.problem}`).toBe('ok');
    const records = parseRecords(text);
    const said = records
      .filter((r) => r.kind === 'dropped')
      .reduce((n, r) => n + (r.body.records as number), 0);
    expect(said).toBeGreaterThanOrEqual(dropped); // frames dropped after the scrape are said too
    const end = records.at(-1)!;
    expect(end.kind).toBe('end');
    expect(end.body.dropped).toBe(said);
    const pings = records.filter((r) => r.direction === 'agent' && (r.body as Json).method === 'ping').length;
    expect(pings).toBeLessThan(rounds);
  });
});
