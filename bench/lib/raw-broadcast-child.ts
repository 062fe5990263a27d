/**
 * The library's limit: a minimal uWebSockets.js server that accepts any upgrade offering `awp` and
 * broadcasts frames to every connection with one `app.publish` per frame (uWS's topic fan-out, in C++).
 * Frames are AWP frames shaped like the demo arm world's (same channel sizes and rates, stamped with
 * ts_send_ns at publish time on a session clock whose origin is in the hello, as world-child.ts does).
 * argv[2]: JSON { channels: [{channel_id, rate_hz, payload_bytes}], maxBackpressure?, stepMs? }.
 */
import { FLAG_KEYFRAME } from '../../src/protocol/frame.js';
import { encodeFrame } from '../../src/protocol/frame-encode.js';
import { loadUws } from '../../src/transport/uws-load.js';
import { memoryAfterGc, serve } from './ipc.js';

interface ChannelPlan {
  readonly channel_id: number;
  readonly rate_hz: number;
  readonly payload_bytes: number;
}

const opts = JSON.parse(process.argv[2] ?? '{}') as {
  channels?: ChannelPlan[];
  maxBackpressure?: number;
  stepMs?: number;
};
const uws = loadUws();
const origin = process.hrtime.bigint();
const clock = () => Number(process.hrtime.bigint() - origin);
const app = uws.App();
let connections = 0;

app.ws('/*', {
  compression: uws.DISABLED,
  maxPayloadLength: 1024 * 1024,
  // The edge's outboxes hold 256 KiB per socket before they start replacing latest-wins frames.
  maxBackpressure: opts.maxBackpressure ?? 256 * 1024,
  closeOnBackpressureLimit: false,
  idleTimeout: 0,
  upgrade: (res, req, context) => {
    // The same minimal checks an edge makes before accepting: a credential and the `awp` subprotocol.
    const auth = req.getHeader('authorization');
    const protocols = req.getHeader('sec-websocket-protocol');
    if (auth === '' || !protocols.split(',').some((p) => p.trim() === 'awp')) {
      res.writeStatus('401 Unauthorized').end('missing credential', true);
      return;
    }
    res.upgrade(
      {},
      req.getHeader('sec-websocket-key'),
      'awp',
      req.getHeader('sec-websocket-extensions'),
      context,
    );
  },
  open: (ws) => {
    connections++;
    ws.subscribe('frames');
  },
  close: () => {
    connections--;
  },
});

const port = await new Promise<number>((resolve, reject) => {
  app.listen('127.0.0.1', 0, (ls) => {
    if (ls === false) reject(new Error('uWS cannot listen'));
    else resolve(uws.us_socket_local_port(ls));
  });
});

const plans = (opts.channels ?? []).map((c) => ({
  ...c,
  period: 1e9 / c.rate_hz,
  due: 0,
  seq: 0,
  payload: Buffer.alloc(c.payload_bytes, 0x61),
}));
let published = 0;
const timer = setInterval(() => {
  const now = clock();
  for (const p of plans) {
    if (now < p.due) continue;
    p.due = Math.max(p.due + p.period, now - p.period); // as the world schedules: no burst after a stall
    p.seq += 1;
    const t = clock();
    const frame = encodeFrame({
      channel_id: p.channel_id,
      seq: p.seq,
      ts_mono_ns: t,
      ts_send_ns: t,
      flags: FLAG_KEYFRAME,
      vendor: [],
      payload: p.payload,
    });
    app.publish('frames', frame, true);
    published++;
  }
}, opts.stepMs ?? 2);

serve(
  {
    memory: memoryAfterGc,
    stats: () => ({ connections, published }),
    close: () => {
      clearInterval(timer);
      app.close();
      return {};
    },
  },
  { url: `ws://127.0.0.1:${port}/`, port, origin: origin.toString() },
);
