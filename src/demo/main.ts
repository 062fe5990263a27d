/**
 * Run one demo world standalone, for manual tests and as a child process:
 *   node --import tsx src/demo/main.ts --kind arm --port 8710 [--token T] [--camera-bytes 65536] ...
 * Prints one JSON line `{"url":...,"port":...,"kind":...,"pid":...}` once listening. SIGUSR1 engages the
 * operator e-stop, SIGUSR2 releases it; SIGINT/SIGTERM stop the world.
 */
import { parseArgs } from 'node:util';
import { startDemoWorld } from './server.js';
import type { DemoServerOptions } from './server.js';

const NUMERIC = {
  'heartbeat-interval-ms': 'heartbeatIntervalMs',
  'reconnect-window-ms': 'reconnectWindowMs',
  'watchdog-ms': 'watchdogMs',
  'proprio-hz': 'proprioHz',
  'camera-hz': 'cameraHz',
  'camera-bytes': 'cameraBytes',
  'camera-width': 'cameraWidth',
  'camera-height': 'cameraHeight',
  'state-hz': 'stateHz',
  'max-action-rate-hz': 'maxActionRateHz',
  'tick-ns': 'tickNs',
  width: 'width',
  height: 'height',
  'step-ms': 'stepMs',
} as const;

const USAGE = `usage: main.ts --kind grid|arm [--host 127.0.0.1] [--port 8710] [--token CREDENTIAL] [--no-stream]
  ${Object.keys(NUMERIC)
    .map((k) => `[--${k} N]`)
    .join(' ')}`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      kind: { type: 'string' },
      host: { type: 'string', default: '127.0.0.1' },
      port: { type: 'string', default: '8710' },
      token: { type: 'string' },
      'no-stream': { type: 'boolean', default: false },
      'allow-insecure': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
      ...Object.fromEntries(Object.keys(NUMERIC).map((k) => [k, { type: 'string' as const }])),
    },
  });
  if (values.help || (values.kind !== 'grid' && values.kind !== 'arm')) {
    console.error(USAGE);
    process.exitCode = values.help ? 0 : 2;
    return;
  }
  const numbers: Record<string, number> = {};
  for (const [flag, key] of Object.entries(NUMERIC)) {
    const raw = (values as Record<string, unknown>)[flag];
    if (typeof raw !== 'string') continue;
    const n = Number(raw);
    if (!Number.isFinite(n)) throw new Error(`--${flag} needs a number, got ${raw}`);
    numbers[key] = n;
  }
  const token = values.token ?? process.env.AWP_TOKEN;
  const opts: DemoServerOptions = {
    ...numbers,
    kind: values.kind,
    host: values.host,
    port: Number(values.port),
    streamBinding: !values['no-stream'],
    allowInsecure: values['allow-insecure'],
    ...(token !== undefined && token !== '' && { token }),
  };
  const handle = await startDemoWorld(opts);
  process.on('SIGUSR1', () => handle.engageEstop('operator'));
  process.on('SIGUSR2', () => handle.releaseEstop());
  const stop = (): void => {
    void handle.close().then(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  console.log(JSON.stringify({ url: handle.url, port: handle.port, kind: values.kind, pid: process.pid }));
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exit(1);
});
