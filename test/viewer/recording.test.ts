/**
 * The live viewer opens a flight-recorder file and steps through it (issue 14 item 3), in a real browser
 * (Debian's Chromium via playwright-core): the file chosen in the page is read there, its records counted and
 * its hash chain checked (an edited copy is named broken at the line after the edit); the buttons step
 * through the records, each shown with its time, who sent it to whom and what it is; the page's strict
 * policy holds (no console error).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionLog } from '../../src/recorder/session-log.js';
import { chromiumAvailable, launchChromium, CHROMIUM_PATH, type TestBrowser } from '../browser/chromium.js';
import { MemorySink } from '../recorder/memory-sink.js';
import { startEdge, type TestEdge } from '../support/edge.js';

const dir = mkdtempSync(join(tmpdir(), 'awp-viewer-recording-'));
let edge: TestEdge | undefined;
let browser: TestBrowser | undefined;
const log: string[] = [];
let file = '';

interface RecordingState {
  awpRecording?: { records: number; index: number; chain: string; file: string };
}

async function state(page: Page): Promise<NonNullable<RecordingState['awpRecording']>> {
  return page.evaluate(() => (globalThis as unknown as RecordingState).awpRecording!);
}

async function until(
  page: Page,
  cond: (s: NonNullable<RecordingState['awpRecording']>) => boolean,
): Promise<void> {
  const end = Date.now() + 10_000;
  while (!cond(await state(page))) {
    if (Date.now() > end) throw new Error(`timed out: ${JSON.stringify(await state(page))}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const rpc = (o: object) => JSON.stringify({ jsonrpc: '2.0', ...o });

beforeAll(async () => {
  if (!chromiumAvailable()) return;
  const sink = new MemorySink();
  const rec = new SessionLog(
    {
      route: 'grid',
      kind: 'relay',
      session_id: 'sess_7',
      startedWallMs: Date.UTC(2026, 11, 2),
      startedMs: 0,
      frames: 'hashes',
      rotateBytes: 1 << 20,
      rotateMs: 3_600_000,
      isCredential: () => false,
      redactPaths: [],
      maxJsonDepth: 64,
      header: {},
    },
    sink,
  );
  rec.message(
    'agent',
    rpc({ id: 2, method: 'session.open', params: { embodiment: 'avatar_0', mode: 'lockstep' } }),
    1,
  );
  rec.message(
    'world',
    rpc({
      id: 2,
      result: { session_id: 'sess_7', granted: { channels: [{ channel: 'grid_view', channel_id: 1 }] } },
    }),
    2,
  );
  rec.message(
    'world',
    rpc({
      method: 'obs.frame',
      params: { channel_id: 1, seq: 1, ts_mono_ns: 0, flags: 1, payload_b64: 'e30=' },
    }),
    3,
  );
  rec.message('agent', rpc({ id: 3, method: 'world.tick', params: { expected_tick: 0 } }), 4);
  rec.end('session closed', 5);
  file = join(dir, 'grid.relay.sess_7.jsonl');
  writeFileSync(file, sink.all()[0]!.text);
  edge = await startEdge([{ path: '/grid', upstream: 'ws://127.0.0.1:9/' }], { viewer: { enabled: true } });
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await edge?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(!chromiumAvailable())(`viewer: a recording stepped through (${CHROMIUM_PATH})`, () => {
  it('reads the file in the page, checks its chain and steps through its records', async () => {
    const page = await browser!.newPage(log);
    const failed: string[] = [];
    page.on('response', (r) => {
      if (r.status() >= 400) failed.push(`${r.status()} ${new URL(r.url()).pathname}`);
    });
    await page.goto(`http://127.0.0.1:${edge!.edge.port}/viewer/`);
    await page.setInputFiles('#recording-file', file);
    await until(page, (s) => s.records === 6 && s.chain !== 'checking');
    expect(await state(page)).toMatchObject({
      records: 6,
      index: 0,
      chain: 'ok',
      file: 'grid.relay.sess_7.jsonl',
    });
    expect(await page.textContent('#recording-line')).toMatch(
      /^1 \/ 6\s+0\.000 ms\s+edge\s+header: audit_record, relay session sess_7, route grid/,
    );
    await page.click('#recording-next');
    expect(await page.textContent('#recording-line')).toMatch(
      /^2 \/ 6\s+1\.000 ms\s+agent → edge\s+session\.open #2$/,
    );
    await page.click('#recording-next');
    await page.click('#recording-next');
    expect(await page.textContent('#recording-line')).toMatch(
      /world → edge\s+obs\.frame grid_view seq 1, sha256:[0-9a-f]{12}$/,
    );
    expect(await page.textContent('#recording-record')).toContain('"payload_sha256"');
    await page.click('#recording-last');
    expect(await page.textContent('#recording-line')).toMatch(/^6 \/ 6 .*end: session closed$/);
    await page.click('#recording-first');
    expect((await state(page)).index).toBe(0);

    const lines = (await readFile(file, 'utf8')).split('\n');
    lines[2] = lines[2]!.replace('"direction":', '"direction": ');
    const edited = join(dir, 'edited.jsonl');
    writeFileSync(edited, lines.join('\n'));
    await page.setInputFiles('#recording-file', edited);
    await until(page, (s) => s.file === 'edited.jsonl' && s.chain !== 'checking');
    expect((await state(page)).chain).toBe('broken at line 4');
    expect(await page.textContent('.recording-info')).toContain('hash chain: broken at line 4');
    // The browser's own favicon request is answered 426 (plain HTTP off /viewer/), nothing the page asked for.
    expect(failed.filter((f) => !f.endsWith(' /favicon.ico'))).toEqual([]);
    const errors = log.filter((l) => /error|violat/i.test(l) && !/status of 426/.test(l));
    expect(errors).toEqual([]);
  }, 60_000);
});
