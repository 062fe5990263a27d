/**
 * No credential leaks into logs or metrics (AWP-AUD-006, brief: "no credential in a URL, a log line, a
 * metric label"): sessions with known credentials go through the edge — relay and observer sessions,
 * opened and resumed, stream connections, credentials as the Authorization header and as the
 * `awp.bearer.<token>` subprotocol, refused connections — while every log line is captured at level
 * trace; then every log line and the whole /metrics output are searched for every secret.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoWorld } from '../../src/demo/index.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { redact } from '../../src/telemetry/redact.js';
import { AwpClient, HttpRefusal, initializeParams, type Json } from '../support/awp-client.js';
import { AGENT_TOKEN, startEdge, type TestEdge } from '../support/edge.js';

/** The edge's credential toward the world (the world refuses agents without it). */
const UPSTREAM_CREDENTIAL = 'upstream-credential-7f3c9a1b5d2e4f60';
const WRONG_CREDENTIAL = 'wrong-credential-5a1c0e9d7b3f';
const URL_CREDENTIAL = 'url-credential-93b7c2e14d6a';
const UNKNOWN_SESSION_TOKEN = 'unknown-session-token-1d2c3b4a5e6f';
const WRONG_STREAM_TOKEN = 'wrong-stream-token-8e7d6c5b4a39';

const REDACTED = /^\[redacted:sha256:[0-9a-f]{8}\]$/;
const SESSION_EVENTS = ['session_opened', 'session_resumed', 'session_suspended', 'session_ended'];

interface Run {
  readonly lines: string[];
  /** The flight recorder's files of the route (issue 14), as written so far. */
  readonly recordings: string[];
  readonly metrics: string;
  /** Session tokens the edge minted, read from session.ready results. */
  readonly edgeTokens: string[];
  /** Session tokens the world minted for the edge's upstream sessions (relay and hub). */
  readonly worldTokens: string[];
  readonly relayToken: string;
}

const cleanups: (() => Promise<void> | void)[] = [];
let run: Run;

beforeAll(async () => {
  run = await drive();
}, 30_000);

afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('credentials in logs and metrics', () => {
  it('AWP-AUD-006 no credential or session token appears in any log line (level trace) or in /metrics', () => {
    const secrets: Record<string, string> = {
      'agent credential': AGENT_TOKEN,
      'upstream credential': UPSTREAM_CREDENTIAL,
      'refused credential': WRONG_CREDENTIAL,
      'credential in a URL': URL_CREDENTIAL,
      'unknown session token': UNKNOWN_SESSION_TOKEN,
      'refused stream token': WRONG_STREAM_TOKEN,
      ...Object.fromEntries(run.edgeTokens.map((t, i) => [`edge session token ${i}`, t])),
      ...Object.fromEntries(run.worldTokens.map((t, i) => [`world session token ${i}`, t])),
    };
    expect(run.edgeTokens.length).toBeGreaterThanOrEqual(2); // a relay and an observer session
    expect(run.worldTokens.length).toBeGreaterThanOrEqual(2); // the relay's and the hub's upstream sessions
    expect(run.lines.length).toBeGreaterThan(5);
    const leaks: string[] = [];
    for (const [what, secret] of Object.entries(secrets)) {
      run.lines.forEach((line, i) => {
        if (line.includes(secret)) leaks.push(`${what} in log line ${i}: ${line}`);
      });
      if (run.metrics.includes(secret)) leaks.push(`${what} in /metrics`);
    }
    console.log(
      `searched ${run.lines.length} log lines and ${run.metrics.length} bytes of /metrics for ${Object.keys(secrets).length} secrets`,
    );
    expect(leaks).toEqual([]);
  });

  it('AWP-AUD-006 no credential or session token appears in any recording file (the flight recorder)', () => {
    const secrets = [
      AGENT_TOKEN,
      UPSTREAM_CREDENTIAL,
      WRONG_CREDENTIAL,
      URL_CREDENTIAL,
      UNKNOWN_SESSION_TOKEN,
      WRONG_STREAM_TOKEN,
      ...run.edgeTokens,
      ...run.worldTokens,
    ];
    // The relay session, and the observer session (both opened and resumed, a stream connection each).
    expect(run.recordings.length).toBeGreaterThanOrEqual(2);
    const text = run.recordings.join('');
    expect(text).toContain('[redacted:sha256:');
    for (const s of secrets)
      expect(text.includes(s), `a secret in a recording: ${s.slice(0, 6)}...`).toBe(false);
  });

  it('AWP-AUD-006 session events are one line each with route, session_id and the token as [redacted:sha256:<8 hex>]', () => {
    const records = run.lines.map((l) => JSON.parse(l) as Json);
    const events = records.filter((r) => SESSION_EVENTS.includes(r.event as string));
    expect(events.map((e) => e.event)).toEqual(
      expect.arrayContaining(['session_opened', 'session_suspended', 'session_resumed', 'session_ended']),
    );
    const relayRedacted = redact(run.relayToken);
    expect(relayRedacted).toMatch(REDACTED);
    for (const e of events) {
      expect(e.route).toBe('arm');
      expect(typeof e.session_id).toBe('string');
      expect(e.token).toMatch(REDACTED);
    }
    // The relay session's lines name it by the digest of its token, so lines of one session can be joined.
    expect(events.filter((e) => e.token === relayRedacted).map((e) => e.event)).toEqual([
      'session_opened',
      'session_suspended',
      'session_resumed',
      'session_ended',
    ]);
    expect(typeof events.find((e) => e.event === 'session_ended')?.reason).toBe('string');
    // Observer sessions (served by the hub) log their events with the route and a reason where there is one.
    const observer = records.filter((r) => typeof r.event === 'string' && r.event.startsWith('observer_'));
    expect(observer.map((r) => r.event)).toEqual(
      expect.arrayContaining(['observer_opened', 'observer_suspended', 'observer_resumed']),
    );
    for (const r of observer) expect(r.route).toBe('arm');
    expect(typeof observer.find((r) => r.event === 'observer_suspended')?.reason).toBe('string');
  });
});

/** Every secret path through the edge, with every log line captured. */
async function drive(): Promise<Run> {
  const lines: string[] = [];
  let partial = '';
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      const text = partial + chunk.toString();
      const parts = text.split('\n');
      partial = parts.pop()!;
      lines.push(...parts.filter((p) => p !== ''));
      done();
    },
  });
  const world = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0, token: UPSTREAM_CREDENTIAL });
  cleanups.push(() => world.close());
  const recordings = mkdtempSync(join(tmpdir(), 'awp-redaction-recordings-'));
  cleanups.push(() => rmSync(recordings, { recursive: true, force: true }));
  const edge = await startEdge(
    [
      {
        path: '/arm',
        upstream: world.url,
        name: 'arm',
        upstream_token: UPSTREAM_CREDENTIAL,
        record: { dir: recordings },
      },
    ],
    { log_level: 'trace' },
    { log: createLogger('trace', destination) },
  );
  cleanups.push(() => edge.close());
  const worldTokens = new Set<string>();
  const noteWorldTokens = () => {
    for (const s of world.world.sessions.values()) worldTokens.add(s.token);
  };
  const clients: AwpClient[] = [];
  cleanups.push(() => clients.forEach((c) => c.drop()));
  const connect = async (viaSubprotocol: boolean) => {
    const c = await AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN, viaSubprotocol });
    clients.push(c);
    await c.ok('initialize', initializeParams());
    return c;
  };

  // A relay session, credential in the Authorization header; a stream connection with its token.
  const agent = await connect(false);
  const opened = await agent.ok('session.open', {
    embodiment: 'arm_01',
    mode: 'streaming',
    subscribe: [{ channel: 'state' }],
  });
  const relayToken = opened.session_token as string;
  noteWorldTokens();
  await agent.ok('ping', { origin_ns: 1 });
  await agent.ok('action.submit', {
    action_id: 'redaction-1',
    type: 'move_to_pose',
    params: { pose: { frame: 'base', p_m: [0.1, 0.1, 0.3], q: [0, 0, 0, 1] }, max_velocity_mps: 0.1 },
  });
  await streamFrames(edge, opened, 'header');
  // Dropped, then resumed on a new connection, credential as the awp.bearer.<token> subprotocol.
  const last = agent.statusSeqs().at(-1) ?? 0;
  agent.drop();
  await waitFor(() => lines.some((l) => l.includes('"session_suspended"')), 'the edge to log the suspension');
  const again = await connect(true);
  const resumed = await again.ok('session.resume', { session_token: relayToken, last_status_seq: last });
  noteWorldTokens();

  // An observer session, credential as the subprotocol; its stream authenticated the same way; resumed.
  const observer = await connect(true);
  const observed = await observer.ok('session.open', {
    mode: 'streaming',
    subscribe: [{ channel: 'state' }],
  });
  noteWorldTokens();
  await streamFrames(edge, observed, 'subprotocol');
  observer.drop();
  await waitFor(
    () => lines.some((l) => l.includes('"observer_suspended"')),
    'the edge to log the observer suspension',
  );
  const observerAgain = await connect(false);
  const observerResumed = await observerAgain.ok('session.resume', {
    session_token: observed.session_token,
    last_status_seq: 0,
  });

  // Refusals: a wrong credential, a credential in the URL, an unknown session token, a wrong stream token.
  await expect(AwpClient.connect(edge.url('/arm'), { credential: WRONG_CREDENTIAL })).rejects.toMatchObject({
    status: 401,
  });
  await expect(
    AwpClient.connect(edge.url('/arm'), { credential: WRONG_CREDENTIAL, viaSubprotocol: true }),
  ).rejects.toBeInstanceOf(HttpRefusal);
  await expect(
    AwpClient.connect(`${edge.url('/arm')}?access_token=${URL_CREDENTIAL}`, { credential: AGENT_TOKEN }),
  ).rejects.toMatchObject({ status: 400 });
  const stray = await connect(false);
  const refused = await stray.call('session.resume', {
    session_token: UNKNOWN_SESSION_TOKEN,
    last_status_seq: 0,
  });
  expect(refused.error).toBeDefined();
  await expect(
    AwpClient.connect(`ws://127.0.0.1:${edge.edge.port}/arm/stream`, { credential: WRONG_STREAM_TOKEN }),
  ).rejects.toMatchObject({ status: 401 });

  // The relay session ends (a session_ended line with its reason).
  await again.ok('session.close', {});
  await waitFor(
    () => lines.some((l) => l.includes('"session_ended"')),
    'the edge to log the end of the session',
  );
  noteWorldTokens();

  const metrics = await (await fetch(`${edge.adminUrl}/metrics`)).text();
  const edgeTokens = [
    relayToken,
    resumed.session_token,
    observed.session_token,
    observerResumed.session_token,
  ].filter((t): t is string => typeof t === 'string');
  await Promise.all([...edge.edge.ctx.recorders.values()].map((r) => r.flushed()));
  const files = readdirSync(recordings).map((f) => readFileSync(join(recordings, f), 'utf8'));
  return {
    lines,
    recordings: files,
    metrics,
    edgeTokens: [...new Set(edgeTokens)],
    worldTokens: [...worldTokens],
    relayToken,
  };
}

/** Opens the session's ws stream endpoint with its token and waits for a frame. */
async function streamFrames(edge: TestEdge, ready: Json, how: 'header' | 'subprotocol'): Promise<void> {
  const url = (ready.stream_endpoints as { binding: string; url?: string }[]).find(
    (e) => e.binding === 'ws',
  )?.url;
  if (url === undefined) throw new Error('no ws stream endpoint');
  expect(url.startsWith(edge.url('/arm'))).toBe(true);
  const token = ready.session_token as string;
  const ws =
    how === 'header'
      ? new WebSocket(url, ['awp'], { headers: { authorization: `Bearer ${token}` } })
      : new WebSocket(url, ['awp', `awp.bearer.${token}`]);
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no frame on the stream connection within 5 s')), 5000);
      ws.once('message', () => {
        clearTimeout(timer);
        resolve();
      });
      ws.once('error', reject);
    });
  } finally {
    ws.terminate();
  }
}

async function waitFor(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!cond()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
