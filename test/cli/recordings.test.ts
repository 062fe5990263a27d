/**
 * `awp-edge recordings verify|show` and `awp-edge replay` as an operator meets them (issue 14 item 3), in a
 * child process as `npx awp-edge` runs: exit 0 with one ok line per file; exit 1 naming the first bad line;
 * a timeline; one-line usage errors (rc 2) and operator errors (rc 1).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFrameHeader, peekFrame } from '../../src/protocol/frame.js';
import { encodeFrame } from '../../src/protocol/frame-encode.js';
import { binaryFrameBody } from '../../src/recorder/frame-body.js';
import { RecordingWriter } from '../../src/recorder/io/writer.js';
import { SessionLog, type SessionLogOptions } from '../../src/recorder/session-log.js';

const root = join(import.meta.dirname, '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'awp-cli-recordings-'));
const files: string[] = [];
/** An observer session's file and its hub log, in a directory of their own. */
const observerDir = join(dir, 'observer');
let observerFile = '';
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function awpEdge(args: readonly string[]): Promise<Run> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/awp-edge.ts', ...args], { cwd: root });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const rpc = (o: object) => JSON.stringify({ jsonrpc: '2.0', ...o });

beforeAll(async () => {
  // A relay session's recording, rotated into two files.
  const events = {
    written: () => undefined,
    dropped: () => undefined,
    deleted: () => undefined,
    closed: () => undefined,
    error: () => undefined,
  };
  const w = await RecordingWriter.open(
    dir,
    'arm.',
    { queueBytes: 1 << 20, retainFiles: 100, retainBytes: 1 << 30 },
    events,
  );
  const log = new SessionLog(
    {
      route: 'arm',
      kind: 'relay',
      session_id: 'sess_1',
      startedWallMs: Date.UTC(2026, 10, 30),
      startedMs: 0,
      frames: 'hashes',
      rotateBytes: 2000,
      rotateMs: 3_600_000,
      isCredential: () => false,
      redactPaths: [],
      maxJsonDepth: 64,
      header: { edge_version: 'test' },
    },
    w,
  );
  log.message(
    'agent',
    rpc({ id: 1, method: 'session.open', params: { embodiment: 'arm_01', mode: 'lockstep' } }),
    1,
  );
  log.message(
    'world',
    rpc({
      id: 1,
      result: {
        session_id: 'sess_1',
        session_token: 'world-token-0123456789',
        granted: { channels: [{ channel: 'proprio', channel_id: 1 }] },
      },
    }),
    2,
  );
  for (let i = 1; i <= 6; i++)
    log.message(
      'world',
      rpc({
        method: 'obs.frame',
        params: { channel_id: 1, seq: i, ts_mono_ns: i, flags: 1, payload_b64: 'AAAA' },
      }),
      2 + i,
    );
  log.message(
    'world',
    rpc({ method: 'action.status', params: { action_id: 'a-1', state: 'executing', status_seq: 3 } }),
    10,
  );
  log.end('session closed', 11);
  await w.shutdown();

  // An observer session fed by a hub: its frames are in the hub log, its file refers to them.
  const ow = await RecordingWriter.open(
    observerDir,
    'arm.',
    { queueBytes: 1 << 20, retainFiles: 100, retainBytes: 1 << 30 },
    events,
  );
  const options = (kind: SessionLogOptions['kind'], session_id: string): SessionLogOptions => ({
    route: 'arm',
    kind,
    session_id,
    startedWallMs: Date.UTC(2026, 11, 2),
    startedMs: 0,
    frames: 'hashes',
    rotateBytes: 1 << 20,
    rotateMs: 3_600_000,
    isCredential: () => false,
    redactPaths: [],
    maxJsonDepth: 64,
    header: { edge_version: 'test' },
  });
  // The hub log rotates: its frames are in several files, all found by the first one's name.
  const hub = new SessionLog({ ...options('hub', 'streaming'), rotateBytes: 900 }, ow);
  const obs = new SessionLog(options('observer', 'edge-obs-1'), ow);
  obs.sent('edge_to_agent', rpc({ id: 2, result: { granted: [{ channel: 'proprio', channel_id: 1 }] } }), 1);
  const h = createFrameHeader();
  for (let seq = 1; seq <= 5; seq++) {
    const buf = encodeFrame({
      channel_id: 1,
      seq,
      ts_mono_ns: seq,
      flags: 1,
      payload: new Uint8Array([seq]),
      vendor: [],
    });
    const n = seq - 1;
    hub.sharedFrame(
      'world',
      {
        channel_id: 1,
        payloadBytes: 1,
        body: (keep) => binaryFrameBody('obs.frame', buf, peekFrame(buf, h), undefined, keep, undefined, n),
      },
      2000 * seq,
    );
    if (seq !== 3) obs.frameRef('edge_to_agent', hub.firstFile, 'ws', n, 2000 * seq + 1); // 3 was superseded
  }
  obs.end('session ended', 20_000);
  hub.end('edge stopped', 20_001);
  await ow.shutdown();
  observerFile = join(
    observerDir,
    readdirSync(observerDir).find((f) => f.includes('.observer.'))!,
  );
  files.push(
    ...readdirSync(dir)
      .filter((f) => f.endsWith('.jsonl'))
      .sort()
      .map((f) => join(dir, f)),
  );
});

describe('awp-edge recordings', () => {
  it('verify: one ok line per file and exit 0; the files of one session link up', async () => {
    expect(files.length).toBeGreaterThanOrEqual(2);
    const r = await awpEdge(['recordings', 'verify', ...files]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines).toHaveLength(files.length);
    expect(lines[0]).toBe(
      `${files[0]}: ok (${readFileSync(files[0]!, 'utf8').trim().split('\n').length} records, audit_record, relay session sess_1)`,
    );
    expect(lines[1]).toMatch(/, segment 1\)$/);
  });

  it('verify: an edited line is named (FILE:LINE) with exit 1; a missing file of the session too', async () => {
    const lines = readFileSync(files[0]!, 'utf8').split('\n');
    lines[2] = lines[2]!.replace('"direction":', '"direction": '); // still JSON, no longer what was hashed
    const edited = join(dir, 'edited.jsonl');
    writeFileSync(edited, lines.join('\n'));
    const r = await awpEdge(['recordings', 'verify', edited]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      new RegExp(
        `^${edited.replace(/[.]/g, '\\.')}:4: prev_hash does not match the previous line .*: line 3 was edited, or a line was removed or moved here\n$`,
      ),
    );
    if (files.length >= 3) {
      const gap = await awpEdge(['recordings', 'verify', files[0]!, files[2]!]);
      expect(gap.code).toBe(1);
      expect(gap.stderr).toMatch(/a file of the session is missing/);
    }
  });

  it('show: the file, then a timeline with the frames summed up', async () => {
    const r = await awpEdge(['recordings', 'show', files[0]!]);
    expect(r.code).toBe(0);
    const out = r.stdout.split('\n');
    expect(out[0]).toMatch(
      /: audit_record, relay session sess_1, route arm, started 2026-11-30T00:00:00\.000Z, recorded by awp-edge test; \d+ records$/,
    );
    expect(r.stdout).toMatch(/agent → edge\s+session\.open #1/);
    expect(r.stdout).toMatch(/world → edge\s+frames: proprio ×\d+/);
    expect(r.stdout).not.toContain('world-token-0123456789');
  });

  it("show: an observer's frames by reference, looked up in the hub log beside it", async () => {
    const r = await awpEdge(['recordings', 'show', observerFile]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/edge → agent\s+frames: proprio ×4/);
    const each = await awpEdge(['recordings', 'show', '--frames', observerFile]);
    const seqs = [...each.stdout.matchAll(/obs\.frame proprio seq (\d+)/g)].map((m) => Number(m[1]));
    expect(seqs).toEqual([1, 2, 4, 5]);
    const all = await awpEdge([
      'recordings',
      'verify',
      ...readdirSync(observerDir).map((f) => join(observerDir, f)),
    ]);
    expect(all.stderr).toBe('');
    expect(all.stdout).toMatch(/hub session streaming\)/);
    expect(all.stdout).toMatch(/hub session streaming, segment 2\)/);
  });

  it('answers mistakes in one line: rc 2 for the command line, rc 1 for a file it cannot read', async () => {
    const cases: [string[], number, RegExp][] = [
      [['recordings'], 2, /^awp-edge recordings: needs verify or show \(see awp-edge recordings --help\)$/],
      [
        ['recordings', 'verfy', 'x'],
        2,
        /^awp-edge recordings: unknown action "verfy" \(did you mean verify\?\)/,
      ],
      [['recordings', 'verify'], 2, /^awp-edge recordings verify: needs a FILE/],
      [['recordings', 'show', 'a', 'b'], 2, /^awp-edge recordings show: one FILE at a time$/],
      [['recordings', 'verify', '--final-hash', 'abc', 'x'], 2, /--final-hash takes 64 lowercase hex digits/],
      [
        ['recordings', 'verify', join(dir, 'nope.jsonl')],
        1,
        /^awp-edge recordings: cannot read .*nope\.jsonl: no such file$/,
      ],
      [['replay', files[0]!], 2, /^awp-edge replay: needs --world URL/],
      [
        ['replay', files[0]!, '--world', 'http://x/'],
        2,
        /^awp-edge replay: --world expects a ws:\/\/ or wss:\/\/ URL/,
      ],
      [
        ['replay', files[0]!, '--world', 'ws://h/?token=x'],
        2,
        /^awp-edge replay: --world carries a credential; give it in AWP_EDGE_UPSTREAM_TOKEN$/,
      ],
      [
        ['replay', files[0]!, '--world', 'ws://127.0.0.1:9/', '--seed', '1.5'],
        2,
        /^awp-edge replay: --seed expects an integer/,
      ],
    ];
    for (const [args, code, line] of cases) {
      const r = await awpEdge(args);
      expect(r.code, args.join(' ')).toBe(code);
      const lines = r.stderr.trimEnd().split('\n');
      expect(lines, r.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(line);
    }
  }, 120_000);

  it('--help says what each command does', async () => {
    for (const c of ['recordings', 'replay']) {
      const r = await awpEdge([c, '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^awp-edge ${c}: `));
    }
  });
});
