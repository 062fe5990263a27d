/**
 * What the stream worker (src/transport/stream-worker.ts) adds to the engine contract, which
 * engine-behaviour.test.ts checks it against like the other engines: a batch handed to the worker is a
 * backlog until the worker has carried it out (the edge's sliced work waits on it), and a connection's
 * `bufferedAmount` counts what is in flight to the worker, beyond a burst where its socket keeps up and all
 * of it where the socket is behind; a peer whose messages arrive faster than the main thread handles them
 * is closed rather than queued without bound. Over real sockets, on a uWebSockets.js worker thread.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { openClient } from './clients.js';
import { ENGINES, sleep, startRecorder, waitFor, type Recorder } from './engines.js';

const worker = ENGINES.find((e) => e.name === 'uws-worker')!;
const KIB = 1024;

let recorder: Recorder | undefined;
afterEach(async () => {
  await recorder?.close();
  recorder = undefined;
});

describe.skipIf(worker.unavailable !== undefined)('stream worker engine', () => {
  it('two batches in flight are a backlog until the worker has carried them out, then it says so, and how long each took', async () => {
    recorder = await startRecorder(worker);
    const backlog = recorder.server.backlog!;
    const thread = recorder.server.thread!;
    await openClient(recorder.url);
    const side = await recorder.nextSide();
    await sleep(50);
    expect(backlog.behind()).toBe(false);
    let caughtUp = 0;
    backlog.onCaughtUp(() => caughtUp++);
    const batches: number[] = [];
    thread.onBatch((s) => batches.push(s));
    const busyBefore = thread.busyMs();
    const sentAt = performance.now();
    side.conn.send(Buffer.alloc(KIB), true);
    await Promise.resolve(); // the batch leaves at the end of this task
    expect(backlog.behind()).toBe(false); // the worker may have the next one meanwhile
    side.conn.send(Buffer.alloc(KIB), true);
    await Promise.resolve(); // no report of the worker's can arrive within this task
    expect(backlog.behind()).toBe(true);
    await waitFor(() => caughtUp === 1, 5000, 'the worker to catch up');
    await waitFor(() => batches.length === 2, 5000, 'both batches reported');
    const waited = (performance.now() - sentAt) / 1000;
    expect(backlog.behind()).toBe(false);
    // Each batch is reported once, with its time from hand-over: within what this test waited.
    for (const b of batches) {
      expect(b).toBeGreaterThan(0);
      expect(b).toBeLessThanOrEqual(waited);
    }
    expect(thread.busyMs()).toBeGreaterThan(busyBefore);
  });

  it('counts in-flight bytes beyond a 256 KiB burst for a socket that keeps up, all of them for one behind', async () => {
    recorder = await startRecorder(worker);
    const c = await openClient(recorder.url);
    const side = await recorder.nextSide();
    const chunk = Buffer.alloc(100 * KIB, 7);
    // Keeping up: two chunks in flight are within the burst; three go beyond it by 44 KiB.
    side.conn.send(chunk, true);
    side.conn.send(chunk, true);
    expect(side.conn.bufferedAmount).toBe(0);
    side.conn.send(chunk, true);
    expect(side.conn.bufferedAmount).toBe(300 * KIB - 256 * KIB);
    await waitFor(() => c.received.length === 3, 5000, 'the three chunks at the client');
    // Behind: the client stops reading until the engine holds bytes the worker reports.
    c.ws.pause();
    for (let i = 0; i < 200 && side.conn.bufferedAmount < 2048 * KIB; i++) {
      side.conn.send(chunk, true);
      await sleep(5);
    }
    await sleep(100); // the worker's reading of what it holds arrives
    const reported = side.conn.bufferedAmount;
    expect(reported).toBeGreaterThan(0);
    side.conn.send(chunk, true);
    expect(side.conn.bufferedAmount).toBe(reported + 100 * KIB);
    const sent = c.received.length;
    c.ws.resume();
    await waitFor(() => side.conn.bufferedAmount === 0, 10_000, 'the engine to drain');
    expect(side.drains).toBeGreaterThan(0);
    expect(c.received.length).toBeGreaterThan(sent);
  });

  it('closes a peer whose messages arrive faster than the main thread handles them (1008); the others go on', async () => {
    // 64 KiB messages: the main thread may hold 1 MiB of them (the floor) before the worker closes a sender.
    recorder = await startRecorder(worker, { maxMessageBytes: 64 * KIB });
    const quiet = await openClient(recorder.url);
    const quietSide = await recorder.nextSide();
    // The flooding peer is a process of its own: this thread stalls while it floods.
    const root = fileURLToPath(new URL('../../', import.meta.url));
    const flood = `
      const WebSocket = require('ws');
      const ws = new WebSocket(${JSON.stringify(recorder.url)}, ['awp']);
      ws.on('open', () => { for (let i = 0; i < 64; i++) ws.send(Buffer.alloc(60 * 1024, i)); });
      ws.on('close', (code) => { console.log('closed ' + code); process.exit(0); });
      ws.on('error', () => undefined);
      setTimeout(() => process.exit(1), 20000);`;
    const child = spawn(process.execPath, ['-e', flood], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const side = await recorder.nextSide(10_000);
    const end = performance.now() + 1000;
    while (performance.now() < end) {
      // this thread is busy: the worker keeps reading the flood
    }
    expect(await exited).toBe(0);
    expect(out).toContain('closed 1008');
    await waitFor(() => side.closes.length === 1, 5000, 'the close at the server side');
    expect(side.messages.length).toBeLessThan(64);
    // The quiet connection is untouched.
    quietSide.conn.send('still here', false);
    await waitFor(() => quiet.received.length === 1, 5000, 'a message on the other connection');
    expect(quietSide.closes).toEqual([]);
  });
});
