/**
 * The recorder core on concrete sessions: the record format (awp-sim's, checked with awp-sim's own chain
 * verifier when test:interop's .venv holds it), the class label, redact_paths from the world's manifest,
 * the payload budget and channel choice, drops reported in the file, and rotation.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { peekFrame } from '../../src/protocol/frame.js';
import { encodeFrame } from '../../src/protocol/frame-encode.js';
import { sha256Hex } from '../../src/recorder/record.js';
import { MAX_REDACT_PATHS } from '../../src/recorder/redact.js';
import { SessionLog, type SessionLogOptions } from '../../src/recorder/session-log.js';
import { verifyLinks, verifyText } from '../../src/recorder/verify.js';
import { MemorySink } from './memory-sink.js';

const START = Date.UTC(2026, 10, 30, 16, 48, 0, 123);

function newLog(sink: MemorySink, o: Partial<SessionLogOptions> = {}): SessionLog {
  return new SessionLog(
    {
      route: 'arm',
      kind: 'relay',
      session_id: 'sess_1',
      startedWallMs: START,
      startedMs: 100,
      frames: 'hashes',
      rotateBytes: 1 << 20,
      rotateMs: 3_600_000,
      isCredential: (v) => v === 'agent-credential-0123456789',
      redactPaths: [],
      maxJsonDepth: 64,
      header: { version: '0.1.0' },
      ...o,
    },
    sink,
  );
}

type Rec = {
  class?: string;
  ts_mono_ns: number;
  direction: string;
  kind: string;
  body: Record<string, unknown>;
};
const records = (text: string): Rec[] =>
  text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Rec);

const manifest = {
  world: { name: 'w' },
  safety_policy: { audit: { redact_paths: ['/task/content', '/secret_note'] } },
};
const ready = {
  session_id: 'sess_1',
  session_token: 'world-token-abcdefghijklmnop',
  granted: {
    channels: [
      { channel: 'proprio', channel_id: 1 },
      { channel: 'camera', channel_id: 2 },
    ],
  },
};
const rpc = (o: object) => JSON.stringify({ jsonrpc: '2.0', ...o });

describe('recorder core', () => {
  it("writes awp-sim's record format: keys in order, class first, prev_hash chained over each line", () => {
    const sink = new MemorySink();
    const log = newLog(sink);
    log.message('agent', rpc({ id: 1, method: 'initialize', params: {} }), 101);
    log.message('world', rpc({ id: 1, result: manifest }), 102.5);
    log.end('session closed', 103);
    const [name] = [...sink.files.keys()];
    expect(name).toBe('arm.relay.sess_1.20261130T164800123Z.0000.jsonl');
    const lines = sink.files.get(name!)!;
    expect(Object.keys(JSON.parse(lines[0]!) as object)).toEqual([
      'class',
      'ts_mono_ns',
      'direction',
      'kind',
      'body',
      'prev_hash',
    ]);
    expect(Object.keys(JSON.parse(lines[1]!) as object)).toEqual([
      'ts_mono_ns',
      'direction',
      'kind',
      'body',
      'prev_hash',
    ]);
    const rs = records(sink.text(name!));
    expect(rs.map((r) => [r.direction, r.kind, r.ts_mono_ns])).toEqual([
      ['edge', 'header', 0],
      ['agent', 'message', 1_000_000],
      ['world', 'message', 2_500_000],
      ['edge', 'end', 3_000_000],
    ]);
    expect(rs[0]!.class).toBe('audit_record');
    expect(rs[0]!.body).toMatchObject({
      recorder: 'awp-edge',
      route: 'arm',
      session_kind: 'relay',
      segment: 0,
    });
    for (let i = 1; i < lines.length; i++)
      expect((JSON.parse(lines[i]!) as { prev_hash: string }).prev_hash).toBe(sha256Hex(lines[i - 1]!));
    expect(verifyText(sink.text(name!), { finalHash: sink.closed.get(name!)!.finalHash }).ok).toBe(true);
  });

  const verifyChain = join(process.cwd(), '.venv', 'bin', 'python');
  it.skipIf(!existsSync(verifyChain))("passes awp-sim's own verify_chain (awp_sim.audit)", () => {
    const sink = new MemorySink();
    const log = newLog(sink);
    log.message('agent', rpc({ id: 1, method: 'ping', params: { origin_ns: 5, note: 'ünïcødé ✓' } }), 101);
    log.message('world', rpc({ id: 2, result: ready }), 102);
    log.end('session closed', 103);
    const dir = mkdtempSync(join(tmpdir(), 'awp-rec-'));
    try {
      const file = join(dir, 'r.jsonl');
      writeFileSync(file, sink.text([...sink.files.keys()][0]!));
      const out = execFileSync(verifyChain, [
        '-c',
        'import sys; from awp_sim.audit import verify_chain; print(verify_chain(open(sys.argv[1], encoding="utf-8")))',
        file,
      ]).toString();
      expect(out.trim()).toBe('True');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('redacts session tokens and the paths the world manifest names, learned when the manifest passes', () => {
    const sink = new MemorySink();
    const log = newLog(sink, { redactPaths: ['/params/route_secret'] });
    const before = rpc({ method: 'x', params: { route_secret: 's1', secret_note: 'n0' } });
    log.message('agent', before, 101);
    log.message('world', rpc({ id: 1, result: manifest }), 102);
    log.message('world', rpc({ id: 2, result: ready }), 103);
    log.message(
      'agent',
      rpc({ id: 3, method: 'action.submit', params: { task: { content: 'pii' }, secret_note: 'n1' } }),
      104,
    );
    log.end('done', 105);
    const rs = records(sink.all()[0]!.text);
    expect(rs[1]!.body).toMatchObject({
      params: { route_secret: '[redacted:sha256:' + sha256Hex('s1').slice(0, 8) + ']', secret_note: 'n0' },
    });
    expect((rs[3]!.body.result as { session_token: string }).session_token).toBe(
      `[redacted:sha256:${sha256Hex('world-token-abcdefghijklmnop').slice(0, 8)}]`,
    );
    const submit = rs[4]!.body.params as { task: { content: string }; secret_note: string };
    expect(submit.task.content).toMatch(/^\[redacted:sha256:[0-9a-f]{8}\]$/);
    expect(submit.secret_note).toMatch(/^\[redacted:sha256:[0-9a-f]{8}\]$/);
  });

  it('learns at most MAX_REDACT_PATHS in all, however many results name new ones; the first stay in force', () => {
    const sink = new MemorySink();
    const log = newLog(sink);
    log.message('world', rpc({ id: 1, result: manifest }), 101);
    for (let i = 0; i < 500; i++) {
      const paths = Array.from({ length: 64 }, (_, j) => `/p${i}_${j}`);
      // Either peer can send a result: an agent answering, or a world's reply to an id never forwarded.
      log.message(
        'agent',
        rpc({ id: i, result: { safety_policy: { audit: { redact_paths: paths } } } }),
        102,
      );
    }
    const paths = (log as unknown as { rules: { paths: string[] } }).rules.paths;
    expect(paths).toHaveLength(MAX_REDACT_PATHS);
    expect(paths.slice(0, 2)).toEqual(['/task/content', '/secret_note']);
    log.message('agent', rpc({ id: 9, method: 'x', params: { secret_note: 'n1' } }), 103);
    log.end('done', 104);
    const rs = records(sink.all()[0]!.text);
    expect((rs.at(-2)!.body.params as { secret_note: string }).secret_note).toMatch(/^\[redacted:/);
  });

  it('records frames as header + payload hash, or with payloads for chosen channels within a budget', () => {
    const payload = Buffer.from('{"p_m":[0.1,0.2,0.3]}');
    const inline = (ch: number) =>
      rpc({
        method: 'obs.frame',
        params: {
          channel_id: ch,
          seq: 3,
          ts_mono_ns: 77,
          flags: 1,
          tick: 4,
          payload_b64: payload.toString('base64'),
        },
      });
    const binary = encodeFrame({
      channel_id: 1,
      seq: 4,
      ts_mono_ns: 78,
      flags: 1,
      tick: 5,
      payload,
      vendor: [],
    });

    const hashes = new MemorySink();
    const a = newLog(hashes);
    a.message('world', inline(1), 101);
    a.frame('world', 'obs.frame', binary, peekFrame(binary), 'ws', 102);
    a.end('done', 103);
    const [, f1, f2] = records(hashes.all()[0]!.text);
    expect(f1).toMatchObject({ kind: 'frame', direction: 'world' });
    expect(f1!.body).toEqual({
      channel_id: 1,
      seq: 3,
      ts_mono_ns: 77,
      flags: 1,
      tick: 4,
      method: 'obs.frame',
      payload_sha256: sha256Hex(payload),
    });
    expect(f2!.body).toEqual({
      channel_id: 1,
      seq: 4,
      ts_mono_ns: 78,
      flags: 1,
      tick: 5,
      method: 'obs.frame',
      binding: 'ws',
      payload_sha256: sha256Hex(payload),
    });

    const all = new MemorySink();
    const b = newLog(all, { frames: 'payloads' });
    b.message('world', inline(1), 101);
    b.end('done', 102);
    const rb = records(all.all()[0]!.text);
    expect(rb[0]!.class).toBe('replay_bundle');
    expect(rb[1]!.body.payload_b64).toBe(payload.toString('base64'));

    const some = new MemorySink();
    const c = newLog(some, { frames: 'payloads', channels: ['camera'], maxPayloadBytes: payload.length * 2 });
    c.message('world', rpc({ id: 2, result: ready }), 101);
    for (let i = 0; i < 4; i++) c.message('world', inline(2), 102 + i);
    c.message('world', inline(1), 110);
    c.end('done', 111);
    const rc = records(some.all()[0]!.text);
    expect(rc[0]!.class).toBe('audit_record'); // not every payload is kept: not a replay bundle
    const frames = rc.filter((r) => r.kind === 'frame');
    expect(frames.map((r) => 'payload_b64' in r.body)).toEqual([true, true, false, false, false]);
    expect(rc.find((r) => r.kind === 'edge')!.body).toMatchObject({ event: 'payload_budget_reached' });
  });

  it('says in the file how many records the write queue could not take', () => {
    const sink = new MemorySink();
    const log = newLog(sink);
    log.message('agent', rpc({ id: 1, method: 'ping', params: {} }), 101);
    sink.open = false;
    for (let i = 0; i < 5; i++)
      log.message('world', rpc({ method: 'action.status', params: { i } }), 102 + i);
    sink.open = true;
    log.message('agent', rpc({ id: 2, method: 'ping', params: {} }), 110);
    log.end('done', 111);
    const text = sink.all()[0]!.text;
    const rs = records(text);
    expect(rs.map((r) => r.kind)).toEqual(['header', 'message', 'dropped', 'message', 'end']);
    expect(rs[2]!.body).toMatchObject({
      records: 5,
      first_ts_mono_ns: 1_000_000 * 2,
      last_ts_mono_ns: 1_000_000 * 6,
    });
    expect(sink.droppedRecords).toBe(5);
    expect(verifyText(text).ok).toBe(true);
  });

  it('rotates by size and by time, each file a chain of its own linked to the one before', () => {
    const sink = new MemorySink();
    const log = newLog(sink, { rotateBytes: 700, rotateMs: 50 });
    for (let i = 0; i < 6; i++)
      log.message('agent', rpc({ id: i, method: 'ping', params: { pad: 'x'.repeat(100) } }), 101 + i);
    log.message('agent', rpc({ id: 99, method: 'ping' }), 200); // 50 ms later: a new file
    log.end('done', 201);
    const files = sink.all();
    expect(files.length).toBeGreaterThanOrEqual(3);
    const summaries = files.map(({ name, text }) => {
      const v = verifyText(text);
      if (!v.ok) throw new Error(`${name}:${v.line}: ${v.problem}`);
      return { name, summary: v.summary };
    });
    expect(verifyLinks(summaries)).toBeUndefined();
    const second = records(files[1]!.text);
    expect(second[0]!.body).toMatchObject({ segment: 1, continues: { file: files[0]!.name } });
    expect(records(files[0]!.text).at(-1)).toMatchObject({ kind: 'rotated', body: { next: files[1]!.name } });
    expect(files.map((f) => f.name.slice(-10))).toEqual(
      files.map((_, i) => `${String(i).padStart(4, '0')}.jsonl`),
    );
  });

  it('records what the edge sent as it is when there is nothing to redact or learn in it, else parses it', () => {
    const sink = new MemorySink();
    const log = newLog(sink, { credentials: () => ['agent-credential-0123456789'] });
    const plain = '{"jsonrpc":"2.0","method":"session.telemetry","params":{"window_ms":1000,"ok":true}}';
    log.sent('edge_to_agent', plain, 101);
    log.sent('edge_to_agent', rpc({ id: 2, result: ready }), 102); // a token, grants: parsed
    log.sent('edge_to_agent', rpc({ method: 'x', params: { note: 'agent-credential-0123456789' } }), 103);
    log.sent('edge_to_agent', '{"jsonrpc":"2.0",\n"method":"x"}', 104); // a line break: parsed
    log.end('done', 105);
    const lines = sink.all()[0]!.text.split('\n');
    expect(lines[1]).toContain(`"body":${plain},`);
    expect(lines[2]).toContain('[redacted:sha256:');
    expect(lines[3]).not.toContain('agent-credential');
    expect(lines[4]).toContain('"body":{"jsonrpc":"2.0","method":"x"}');
    expect(verifyText(sink.all()[0]!.text).ok).toBe(true);
  });

  it('records telemetry (numbers only) as it is, and through redact_paths when some are in force', () => {
    const telemetry = (p50: number) =>
      rpc({ method: 'session.telemetry', params: { window_ms: 1000, observation_latency_ns: { p50 } } });
    const sink = new MemorySink();
    const log = newLog(sink);
    log.sentNumbers('edge_to_agent', telemetry(5), 101);
    log.end('done', 102);
    const text = sink.all()[0]!.text;
    expect(text.split('\n')[1]).toContain(`"body":${telemetry(5)},`);
    expect(verifyText(text).ok).toBe(true);

    const redacting = new MemorySink();
    const r = newLog(redacting, { redactPaths: ['/observation_latency_ns/p50'] });
    r.sentNumbers('edge_to_agent', telemetry(7), 101);
    r.end('done', 102);
    const body = records(redacting.all()[0]!.text)[1]!.body as {
      params: { observation_latency_ns: { p50: unknown } };
    };
    expect(body.params.observation_latency_ns.p50).toMatch(/^\[redacted:sha256:[0-9a-f]{8}\]$/);
  });

  it('records what is not JSON, or nests too deep, by size and hash only', () => {
    const sink = new MemorySink();
    const log = newLog(sink, { maxJsonDepth: 8 });
    log.message('agent', '{not json agent-credential-0123456789', 101);
    log.message('agent', '['.repeat(20) + ']'.repeat(20), 102);
    log.message('agent', '[1,2]', 103);
    log.end('done', 104);
    const text = sink.all()[0]!.text;
    expect(text).not.toContain('agent-credential');
    expect(
      records(text)
        .slice(1, 4)
        .map((r) => r.body.unparsed),
    ).toEqual(['invalid_json', 'too_deep', 'not_an_object']);
  });
});
