/**
 * WebTransport peers (over HTTP/2) that close their sessions with code 0 while the edge is writing
 * them frames. The library resets the session's CONNECT stream with the close code, and Node 20's HTTP/2
 * could spin on an RST_STREAM(NO_ERROR) of a stream with frames queued: the event loop stopped and memory
 * grew until the process aborted (std::bad_alloc), for every session on the edge. This drove it here in
 * about one round in seven; the edge now resets with CANCEL (src/transport/webtransport.ts).
 *
 * The edge runs in its own process, so that a spin fails this test (the edge stops answering) instead of
 * stopping the test runner; the observers run in another (fleet.ts), with the library's own client.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startDemoWorld } from '../../src/demo/index.js';
import { Fleet, type FleetPlan } from '../fanout/fleet.js';
import { webtransportSection } from '../support/dev-certificate.js';
import { EDGE_AGENT_TOKEN, startEdgeProcess } from '../support/edge-process.js';
import { useCleanups } from '../scale/rig.js';
import { sleep } from './support.js';

const ROUNDS = 6;
const OBSERVERS = 40;
/** Full-rate 64 KiB camera frames keep data queued on most sessions' streams when they close. */
const SUBSCRIBE = [{ channel: 'camera' }, { channel: 'proprio' }, { channel: 'state' }];

describe('webtransport peers closing while frames are queued', () => {
  const cleanup = useCleanups();

  it('sessions closed with code 0 mid-stream, round after round: the edge keeps answering', async () => {
    const origin = process.hrtime.bigint();
    const world = await startDemoWorld({
      kind: 'arm',
      host: '127.0.0.1',
      port: 0,
      cameraBytes: 64 * 1024,
      proprioHz: 50,
    });
    cleanup(() => world.close());
    const dir = mkdtempSync(join(tmpdir(), 'awp-wt-close-'));
    cleanup(() => rmSync(dir, { recursive: true, force: true }));
    const { cert, section } = webtransportSection(dir);
    const edge = await startEdgeProcess({
      routes: [{ name: 'arm', path: '/arm', upstream: world.url, observers: 'fanout' }],
      extra: { webtransport: section },
    });
    cleanup(() => edge.stop());

    const plans: FleetPlan[] = Array.from({ length: OBSERVERS }, (_, index) => ({
      index,
      kind: 'webtransport',
      subscribe: SUBSCRIBE,
      stalls: false,
    }));
    for (let round = 0; round < ROUNDS; round++) {
      const fleet = await Fleet.start();
      cleanup(() => fleet.close());
      const opened = await fleet.request(
        {
          type: 'open',
          url: edge.url('/arm'),
          credential: EDGE_AGENT_TOKEN,
          origin: origin.toString(),
          plans,
          batch: 20,
          certHash: cert.hash.toString('base64'),
        },
        'opened',
        60_000,
      );
      expect(opened.sessions).toHaveLength(OBSERVERS);
      await sleep(1000);
      // Each observer closes its WebTransport session (code 0) and its control connection, mid-stream.
      await fleet.close();
      await sleep(300);
      expect(edge.running, `round ${round}: the edge process runs`).toBe(true);
      // A busy edge answers late; a spinning one never does (and grows by gigabytes meanwhile).
      const deadline = performance.now() + 10_000;
      let status = await edge.readyz();
      while (status !== 200 && performance.now() < deadline) status = await edge.readyz();
      expect(status, `round ${round}: the edge answers /readyz`).toBe(200);
    }
  }, 180_000);
});
