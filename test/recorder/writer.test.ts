/**
 * The recording writer on a real disk (src/recorder/io/writer.ts): files written in order and closed with
 * their final hash, rotation into linked files, retention of the newest files, a stalled disk (the queue
 * fills, records are dropped, counted and reported in the file, nothing waits), and a file that cannot be
 * written (reported once, its records counted as dropped).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RecordingWriter, type WriterEvents } from '../../src/recorder/io/writer.js';
import { SessionLog, type SessionLogOptions } from '../../src/recorder/session-log.js';
import { verifyLinks, verifyText } from '../../src/recorder/verify.js';
import { GatedFs } from './slow-fs.js';

const root = mkdtempSync(join(tmpdir(), 'awp-writer-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshDir = () => join(root, `d${n++}`);

/** WriterEvents as plain closures over counters (a class field cannot share a method's name). */
function counters() {
  const c = {
    bytes: 0,
    lines: 0,
    dropped: 0,
    deleted: [] as string[],
    closed: new Map<string, string>(),
    errors: [] as string[],
  };
  const ev: WriterEvents = {
    written: (bytes, lines) => {
      c.bytes += bytes;
      c.lines += lines;
    },
    dropped: (records) => (c.dropped += records),
    deleted: (file) => c.deleted.push(file),
    closed: (file, finalHash) => c.closed.set(file, finalHash),
    error: (file, err) => c.errors.push(`${file}: ${String(err)}`),
  };
  return { c, ev };
}

function logOn(writer: RecordingWriter, session_id: string, o: Partial<SessionLogOptions> = {}): SessionLog {
  return new SessionLog(
    {
      route: 'arm',
      kind: 'relay',
      session_id,
      startedWallMs: Date.now(),
      startedMs: 0,
      frames: 'hashes',
      rotateBytes: 1 << 20,
      rotateMs: 3_600_000,
      isCredential: () => false,
      redactPaths: [],
      maxJsonDepth: 64,
      header: {},
      ...o,
    },
    writer,
  );
}

const limits = { queueBytes: 1 << 20, retainFiles: 1000, retainBytes: 1 << 30 };
const ping = (i: number, pad = 0) =>
  JSON.stringify({ jsonrpc: '2.0', id: i, method: 'ping', params: { origin_ns: i, pad: 'x'.repeat(pad) } });

async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('recording writer', () => {
  it('writes each file in order, closes it with its final hash, and rotates into linked files', async () => {
    const dir = freshDir();
    const { c, ev } = counters();
    const w = await RecordingWriter.open(dir, 'arm.', limits, ev);
    const log = logOn(w, 's1', { rotateBytes: 8192 });
    for (let i = 0; i < 200; i++) log.message('agent', ping(i, 40), i);
    log.end('done', 300);
    await w.flushed();
    const files = readdirSync(dir).sort();
    expect(files.length).toBeGreaterThan(2);
    const summaries = files.map((f) => {
      const v = verifyText(readFileSync(join(dir, f), 'utf8'), { finalHash: c.closed.get(f) });
      if (!v.ok) throw new Error(`${f}:${v.line}: ${v.problem}`);
      return { name: f, summary: v.summary };
    });
    expect(verifyLinks(summaries)).toBeUndefined();
    expect(c.lines).toBe(log.totals.records);
    expect(c.bytes).toBe(files.reduce((s, f) => s + readFileSync(join(dir, f)).length, 0));
    expect(c.dropped).toBe(0);
    await w.shutdown();
  });

  it('creates a session file with its header at once; later lines wait to be written together', async () => {
    const dir = freshDir();
    const { c, ev } = counters();
    const w = await RecordingWriter.open(dir, 'arm.', limits, ev);
    const log = logOn(w, 's1');
    await until(() => c.lines === 1, 'the header written');
    const text = () => readFileSync(join(dir, log.currentFile), 'utf8');
    expect(verifyText(text(), { allowOpen: true }).ok).toBe(true);
    for (let i = 0; i < 5; i++) log.message('agent', ping(i), i);
    await new Promise((r) => setTimeout(r, 100));
    expect(text().split('\n').length).toBe(2); // the header and its newline: the pings wait
    log.end('done', 10);
    await w.flushed();
    expect(c.lines).toBe(7);
    expect(verifyText(text()).ok).toBe(true);
    await w.shutdown();
  });

  it('keeps the newest files of the route within retain_files, deleting the oldest closed ones', async () => {
    const dir = freshDir();
    const { c, ev } = counters();
    const w = await RecordingWriter.open(dir, 'arm.', { ...limits, retainFiles: 3 }, ev);
    const names: string[] = [];
    for (let s = 0; s < 6; s++) {
      const log = logOn(w, `s${s}`);
      log.message('agent', ping(s), 1);
      names.push(log.currentFile);
      log.end('done', 2);
      await w.flushed();
      await new Promise((r) => setTimeout(r, 5)); // distinct modification times
    }
    await until(() => c.deleted.length === 3, 'retention to delete three files');
    expect(readdirSync(dir).sort()).toEqual(names.slice(3).sort());
    expect(c.deleted.sort()).toEqual(names.slice(0, 3).sort());
    await w.shutdown();
  });

  it('on a stalled disk fills its queue, then the session drops records, counts them and says so in the file', async () => {
    const dir = freshDir();
    const fs = new GatedFs();
    const { c, ev } = counters();
    const w = await RecordingWriter.open(dir, 'arm.', { ...limits, queueBytes: 65_536 }, ev, fs);
    const log = logOn(w, 's1');
    for (let i = 0; i < 2000; i++) log.message('world', ping(i, 200), i); // returns at once: nothing waits
    expect(fs.writes).toBe(0);
    expect(w.queuedBytes).toBeLessThanOrEqual(65_536);
    expect(log.totals.dropped).toBeGreaterThan(1000);
    expect(c.dropped).toBe(log.totals.dropped);
    fs.release();
    log.message('world', ping(9999), 3000);
    log.end('done', 3001);
    await w.flushed();
    const [file] = readdirSync(dir);
    const text = readFileSync(join(dir, file!), 'utf8');
    expect(verifyText(text, { finalHash: c.closed.get(file!) }).ok).toBe(true);
    const records = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { kind: string; body: { records?: number } });
    const said = records.filter((r) => r.kind === 'dropped').reduce((s, r) => s + r.body.records!, 0);
    expect(said).toBe(log.totals.dropped);
    expect(records.length + log.totals.dropped).toBe(
      2000 + 1 + 2 + records.filter((r) => r.kind === 'dropped').length,
    );
    await w.shutdown();
  });

  it('reports a file it cannot create once, and counts what it could not write', async () => {
    const dir = freshDir();
    const { c, ev } = counters();
    const w = await RecordingWriter.open(dir, 'arm.', limits, ev);
    rmSync(dir, { recursive: true }); // the directory is gone: creating the file fails
    const log = logOn(w, 's1');
    for (let i = 0; i < 10; i++) log.message('agent', ping(i), i);
    log.end('done', 20);
    await w.flushed();
    expect(c.errors).toHaveLength(1);
    expect(c.errors[0]).toMatch(/ENOENT/);
    expect(c.dropped).toBe(log.totals.records);
    expect(c.closed.size).toBe(0);
    await w.shutdown();
  });
});
