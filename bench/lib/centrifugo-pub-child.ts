/**
 * The publisher of the Centrifugo baseline, in its own process as the world is for the edge: publishes
 * each channel at its rate through Centrifugo's server HTTP API (`POST /api/publish`, `b64data`: binary
 * data, delivered as is to protobuf subscribers), on keep-alive connections, from the moment it starts.
 * Each publication's first 8 bytes are its send time (process.hrtime.bigint(), little-endian), see
 * centrifugo-wire.ts. argv[2]: JSON { apiUrl, channels: [{ name, rate_hz, payload_bytes }] }.
 */
import { Agent, request } from 'node:http';
import { serve } from './ipc.js';

interface Channel {
  readonly name: string;
  readonly rate_hz: number;
  readonly payload_bytes: number;
}

const { apiUrl, channels } = JSON.parse(process.argv[2] ?? '{}') as {
  apiUrl: string;
  channels: Channel[];
};
const api = new URL('/api/publish', apiUrl);
const agent = new Agent({ keepAlive: true, maxSockets: 4 });
const stats = new Map(channels.map((c) => [c.name, { published: 0, failed: 0, skipped: 0 }]));
let lastError = '';

function publish(c: Channel, payload: Buffer): Promise<void> {
  const t = process.hrtime.bigint();
  payload.writeUInt32LE(Number(t & 0xffffffffn), 0);
  payload.writeUInt32LE(Number(t >> 32n), 4);
  const body = JSON.stringify({ channel: c.name, b64data: payload.toString('base64') });
  return new Promise((resolve) => {
    const req = request(
      api,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => {
          const s = stats.get(c.name)!;
          // The HTTP API answers 200 with {"error": ...} for a refused command.
          if (res.statusCode === 200 && !text.includes('"error"')) s.published++;
          else {
            s.failed++;
            lastError = `HTTP ${String(res.statusCode)} ${text.slice(0, 200)}`;
          }
          resolve();
        });
      },
    );
    req.on('error', (err) => {
      stats.get(c.name)!.failed++;
      lastError = err.message;
      resolve();
    });
    req.end(body);
  });
}

/**
 * Publishes `c` every 1/rate s on an absolute schedule; with 4 publications of the channel still in
 * flight (an overloaded server) a tick is skipped and counted.
 */
function run(c: Channel): void {
  const period = 1000 / c.rate_hz;
  const payload = Buffer.alloc(Math.max(8, c.payload_bytes), 0x61);
  let next = performance.now();
  let inFlight = 0;
  const tick = () => {
    next += period;
    const now = performance.now();
    if (next < now - period) next = now; // fell behind by more than a period: restart the schedule
    if (inFlight >= 4) stats.get(c.name)!.skipped++;
    else {
      inFlight++;
      void publish(c, payload).then(() => inFlight--);
    }
    setTimeout(tick, Math.max(0, next - performance.now()));
  };
  tick();
}

// One publication per channel first: a refused publish (config, API) fails the start, not the window.
for (const c of channels) {
  await publish(c, Buffer.alloc(Math.max(8, c.payload_bytes)));
  if (stats.get(c.name)!.published === 0) throw new Error(`publish to ${c.name} failed: ${lastError}`);
}
for (const c of channels) run(c);

serve(
  {
    stats: () => ({ channels: Object.fromEntries(stats), last_error: lastError }),
  },
  {},
);
