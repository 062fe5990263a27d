/**
 * The agent-facing engines behave alike: every case runs on `ws` and, where uWebSockets.js loads, on
 * `uws`. With AWP_EDGE_ENGINE=uws a uWS that cannot load fails the run instead of being skipped.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { closeClients, openClient } from './clients.js';
import { ENGINES, sleep, startRecorder, waitFor, withTimeout, type Recorder } from './engines.js';
import { plainGet, rawUpgrade, readToEnd, startUpgrade } from './raw-client.js';

let recorder: Recorder | undefined;

afterEach(async () => {
  closeClients();
  await recorder?.close();
  recorder = undefined;
});

it('AWP_EDGE_ENGINE=uws requires uWebSockets.js to load', () => {
  const uws = ENGINES.find((e) => e.name === 'uws')!;
  if (process.env.AWP_EDGE_ENGINE === 'uws') expect(uws.unavailable).toBeUndefined();
  else expect(ENGINES.find((e) => e.name === 'ws')!.unavailable).toBeUndefined();
});

for (const engine of ENGINES) {
  describe.skipIf(engine.unavailable !== undefined)(`engine ${engine.name}`, () => {
    it('accepts an upgrade with subprotocol awp and hands the edge the request as sent', async () => {
      recorder = await startRecorder(engine);
      const c = await openClient(`${recorder.url}/world/a%20b?x=1&y=two`, ['awp']);
      expect(c.ws.protocol).toBe('awp');
      const req = recorder.requests[0]!;
      expect(req.path).toBe('/world/a%20b');
      expect(req.query).toBe('x=1&y=two');
      expect(req.protocols).toEqual(['awp']);
      expect(req.header('Host')).toBe(`127.0.0.1:${recorder.server.port}`);
      expect(req.header('x-missing')).toBeUndefined();
      expect(req.remoteAddress).toBe('127.0.0.1');
      const side = await recorder.nextSide();
      expect(side.conn.remoteAddress).toBe('127.0.0.1');
      expect(recorder.server.engine).toBe(engine.name === 'uws-worker' ? 'uws' : engine.name);
    });

    it('AWP-SEC-005 selects awp and never echoes an awp.bearer.* credential', async () => {
      recorder = await startRecorder(engine);
      const up = await rawUpgrade(recorder.server.port, '/', {
        'Sec-WebSocket-Protocol': 'awp.bearer.s3cret-token, awp',
        Authorization: 'Bearer other',
      });
      up.socket.destroy();
      expect(up.status).toBe(101);
      expect(up.headers.get('sec-websocket-protocol')).toEqual(['awp']);
      expect(up.head).not.toContain('s3cret');
      expect(recorder.requests[0]!.protocols).toEqual(['awp.bearer.s3cret-token', 'awp']);
      expect(recorder.requests[0]!.header('authorization')).toBe('Bearer other');
      expect(recorder.requests[0]!.path).toBe('/');
      expect(recorder.requests[0]!.query).toBe('');
    });

    it('joins repeated headers as Node does: first wins for Authorization, others comma-joined', async () => {
      recorder = await startRecorder(engine);
      const up = await rawUpgrade(recorder.server.port, '/', [
        ['Sec-WebSocket-Protocol', 'awp'],
        ['Authorization', 'Bearer first'],
        ['Authorization', 'Bearer second'],
        ['X-Trace', 'a'],
        ['x-trace', 'b'],
      ]);
      up.socket.destroy();
      const req = recorder.requests[0]!;
      expect(req.header('authorization')).toBe('Bearer first');
      expect(req.header('X-Trace')).toBe('a, b');
    });

    it('survives a client that leaves, and a server that closes, while an upgrade is being decided', async () => {
      let release: () => void = () => undefined;
      const decided = new Promise<void>((resolve) => (release = resolve));
      recorder = await startRecorder(engine, {
        decide: async () => {
          await decided;
          return 'accept' as const;
        },
      });
      const leaving = startUpgrade(recorder.server.port, '/', { 'Sec-WebSocket-Protocol': 'awp' });
      leaving.response.catch(() => undefined);
      const waiting = startUpgrade(recorder.server.port, '/', { 'Sec-WebSocket-Protocol': 'awp' });
      const waited = waiting.response.then(
        (r) => r.status,
        () => 'closed without an answer',
      );
      await waitFor(() => recorder!.requests.length === 2, 5000, 'both upgrade requests');
      leaving.socket.destroy();
      await sleep(20);
      release(); // the first decision lands after its client left
      await waitFor(() => recorder!.sides.length === 1, 5000, 'the waiting client to open');
      expect(await waited).toBe(101);
      expect(recorder.sides).toHaveLength(1);

      // A decision still pending when the server closes is dropped with the connection.
      let releaseLate: () => void = () => undefined;
      const late = new Promise<void>((resolve) => (releaseLate = resolve));
      const r2 = await startRecorder(engine, { decide: () => late.then(() => 'accept' as const) });
      const stranded = startUpgrade(r2.server.port, '/', { 'Sec-WebSocket-Protocol': 'awp' });
      const strandedOutcome = stranded.response.then(
        (r) => r.status,
        () => 'closed without an answer',
      );
      await waitFor(() => r2.requests.length === 1, 5000, 'the upgrade request');
      const closing = r2.close();
      releaseLate();
      await closing;
      await sleep(50);
      expect(r2.sides).toHaveLength(0);
      stranded.socket.destroy();
      // `ws` answers 503 (its server is closed), uWS closes the connection: neither opens it.
      expect([503, 'closed without an answer']).toContain(await strandedOutcome);
    });

    it('answers an asynchronous refusal with its HTTP status and body', async () => {
      recorder = await startRecorder(engine, {
        decide: async () => {
          await sleep(30);
          return { accept: false, status: 401, body: 'missing bearer credential\n' };
        },
      });
      const up = await rawUpgrade(recorder.server.port, '/', { 'Sec-WebSocket-Protocol': 'awp' });
      expect(up.status).toBe(401);
      expect(up.head.split('\r\n')[0]).toBe('HTTP/1.1 401 Unauthorized');
      expect(up.headers.get('content-type')).toEqual(['text/plain']);
      expect(up.headers.has('sec-websocket-accept')).toBe(false);
      expect(await readToEnd(up)).toBe('missing bearer credential\n');
      expect(recorder.sides).toHaveLength(0);
    });

    it('answers 500 when the upgrade decision throws', async () => {
      recorder = await startRecorder(engine, {
        decide: () => Promise.reject(new Error('boom')),
      });
      const up = await rawUpgrade(recorder.server.port, '/', { 'Sec-WebSocket-Protocol': 'awp' });
      expect(up.status).toBe(500);
      expect(await readToEnd(up)).toBe('internal error\n');
    });

    it('refuses an unsupported WebSocket version with 400 after the decision', async () => {
      recorder = await startRecorder(engine);
      const up = await rawUpgrade(recorder.server.port, '/', [
        ['Sec-WebSocket-Protocol', 'awp'],
        ['Sec-WebSocket-Version', '7'],
      ]);
      expect(up.status).toBe(400);
      expect(await readToEnd(up)).toContain('Sec-WebSocket-Version');
      expect(recorder.sides).toHaveLength(0);
    });

    it('answers a plain HTTP request with 426 and the same text on every engine', async () => {
      recorder = await startRecorder(engine);
      const res = await plainGet(recorder.server.port, '/anything');
      expect(res.status).toBe(426);
      expect(res.headers['content-type']).toBe('text/plain');
      expect(res.body).toBe('this is an AWP WebSocket endpoint: connect with subprotocol "awp"\n');
      expect(recorder.requests).toHaveLength(0);
    });

    it('carries text and binary both ways; a kept binary buffer outlives the handler', async () => {
      const big = randomBytes(1024 * 1024);
      recorder = await startRecorder(engine);
      const c = await openClient(recorder.url);
      const side = await recorder.nextSide();
      c.ws.send('héllo wörld ✓');
      c.ws.send(big);
      // Later messages of the same size would reuse freed engine memory under a kept buffer.
      for (let i = 0; i < 4; i++) c.ws.send(Buffer.alloc(big.length, i + 1));
      await waitFor(() => side.messages.length === 6, 5000, 'six messages');
      expect(side.messages[0]).toEqual({ data: 'héllo wörld ✓', binary: false });
      const kept = side.messages[1]!;
      expect(kept.binary).toBe(true);
      expect(typeof kept.data).not.toBe('string');
      expect(Buffer.from(kept.data as Uint8Array).equals(big)).toBe(true);
      expect(Buffer.from(side.messages[5]!.data as Uint8Array).equals(Buffer.alloc(big.length, 4))).toBe(
        true,
      );

      side.conn.send('from the edge ✓', false);
      side.conn.send(big, true);
      side.conn.send(new Uint8Array(0), true);
      await waitFor(() => c.received.length === 3, 5000, 'three messages at the client');
      expect(c.received[0]!.binary).toBe(false);
      expect(c.received[0]!.data.toString('utf8')).toBe('from the edge ✓');
      expect(c.received[1]!.binary).toBe(true);
      expect(c.received[1]!.data.equals(big)).toBe(true);
      expect(c.received[2]).toMatchObject({ binary: true });
      expect(c.received[2]!.data.length).toBe(0);
    });

    it('reports backpressure from a client that stops reading, and drains when it resumes', async () => {
      recorder = await startRecorder(engine);
      const c = await openClient(recorder.url);
      const side = await recorder.nextSide();
      c.ws.pause();
      const chunk = randomBytes(256 * 1024);
      let sent = 0;
      // Loopback socket buffers absorb a few MiB before the engine has to hold anything.
      while (side.conn.bufferedAmount < 1024 * 1024 && sent < 256) {
        side.conn.send(chunk, true);
        sent++;
        if (sent % 16 === 0) await sleep(5);
      }
      const held = side.conn.bufferedAmount;
      expect(held).toBeGreaterThanOrEqual(1024 * 1024);
      expect(side.drains).toBe(0);
      c.ws.resume();
      await waitFor(() => side.drains > 0, 5000, 'a drain event');
      await waitFor(() => c.received.length === sent, 10_000, 'every message at the client');
      expect(side.conn.bufferedAmount).toBeLessThan(held);
      expect(c.received.every((m) => m.data.equals(chunk))).toBe(true);
    });

    it('closes with 1009 on a message over maxMessageBytes', async () => {
      recorder = await startRecorder(engine, { maxMessageBytes: 64 * 1024 });
      const c = await openClient(recorder.url);
      const side = await recorder.nextSide();
      c.ws.send(Buffer.alloc(64 * 1024)); // at the limit: accepted
      await waitFor(() => side.messages.length === 1, 5000, 'the message at the limit');
      c.ws.send('x'.repeat(64 * 1024 + 1));
      expect(await withTimeout(c.closed, 5000, 'the client to be closed')).toEqual({
        code: 1009,
        reason: '',
      });
      await waitFor(() => side.closes.length === 1, 5000, 'the server close handler');
      await sleep(50);
      expect(side.messages).toHaveLength(1);
      expect(side.closes).toHaveLength(1);
      // The edge's own close code differs: `ws` reports 1006 (it stops reading before the peer's
      // close frame), uWS 1009. The edge does not act on it.
      expect([1006, 1009]).toContain(side.closes[0]!.code);
    });

    it('closes on a message more than 1 MiB over maxMessageBytes (uWS: without a close frame)', async () => {
      recorder = await startRecorder(engine, { maxMessageBytes: 64 * 1024 });
      const c = await openClient(recorder.url);
      const side = await recorder.nextSide();
      c.ws.send(Buffer.alloc(64 * 1024 + 1024 * 1024 + 1));
      const closed = await withTimeout(c.closed, 5000, 'the client to be closed');
      // uWS rejects such a frame from its header and drops the TCP connection (no hook to send 1009).
      expect(closed.code).toBe(engine.name === 'ws' ? 1009 : 1006);
      await waitFor(() => side.closes.length === 1, 5000, 'the server close handler');
      await sleep(50);
      expect(side.messages).toHaveLength(0);
      expect(side.closes).toHaveLength(1);
    });

    it('closes a connection that sends invalid UTF-8 as text', async () => {
      recorder = await startRecorder(engine);
      const up = await rawUpgrade(recorder.server.port, '/', { 'Sec-WebSocket-Protocol': 'awp' });
      const side = await recorder.nextSide();
      const payload = Buffer.from([0x68, 0xc3, 0x28]); // 'h' then a broken two-byte sequence
      const mask = Buffer.from([1, 2, 3, 4]);
      const masked = payload.map((b, i) => b ^ mask[i % 4]!);
      up.socket.write(Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, masked]));
      await waitFor(() => side.closes.length === 1, 5000, 'the server close handler');
      up.socket.destroy();
      expect(side.messages).toHaveLength(0);
    });
  });
}
