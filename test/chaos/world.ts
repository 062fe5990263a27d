/**
 * Worlds for the chaos run and the load they generate.
 * - `spawnArmWorld`: the demo arm world CLI (`src/demo/main.ts`, as test/scale/rig.ts runs it) in its
 *   own process on a given port, so it can be SIGKILLed and restarted where the edge's route points.
 * - `estopTraffic`: status_seq traffic for every session the world holds: the operator e-stop toggled
 *   at a steady rate (each toggle is one `world.event` per session, numbered by the world itself).
 */
import { spawn } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export interface ArmWorldProcessOptions {
  /** 0 picks a free port (the first start); a restart passes the port the edge points at. */
  readonly port: number;
  readonly reconnectWindowMs?: number;
  readonly heartbeatIntervalMs?: number;
  readonly cameraBytes?: number;
  readonly cameraHz?: number;
}

export interface ArmWorldProcess {
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  readonly exited: Promise<void>;
  /** SIGUSR1 engages the operator e-stop, SIGUSR2 releases it (src/demo/main.ts). */
  estop(engaged: boolean): void;
  kill(signal: 'SIGKILL' | 'SIGTERM'): void;
  /** SIGKILLs the process if it runs and waits for it. */
  stop(): Promise<void>;
}

const live = new Set<() => void>();
process.on('exit', () => {
  for (const k of live) k();
});

export async function spawnArmWorld(o: ArmWorldProcessOptions): Promise<ArmWorldProcess> {
  const args = ['--import', 'tsx', 'src/demo/main.ts', '--kind', 'arm', '--port', String(o.port)];
  args.push('--heartbeat-interval-ms', String(o.heartbeatIntervalMs ?? 1000));
  args.push('--reconnect-window-ms', String(o.reconnectWindowMs ?? 30_000));
  if (o.cameraBytes !== undefined) args.push('--camera-bytes', String(o.cameraBytes));
  if (o.cameraHz !== undefined) args.push('--camera-hz', String(o.cameraHz));
  const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const killer = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  live.add(killer);
  const exited = new Promise<void>((done) =>
    child.once('exit', () => {
      live.delete(killer);
      done();
    }),
  );
  let out = '';
  let err = '';
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  const info = await new Promise<{ url: string; port: number; pid: number }>((done, fail) => {
    const timer = setTimeout(() => {
      killer();
      fail(new Error(`the arm world did not start within 20 s:\n${err}`));
    }, 20_000);
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      const line = out.split('\n').find((l) => l.startsWith('{"url"'));
      if (line === undefined) return;
      clearTimeout(timer);
      done(JSON.parse(line) as { url: string; port: number; pid: number });
    });
    void exited.then(() => {
      clearTimeout(timer);
      fail(new Error(`the arm world exited on start:\n${err}`));
    });
  });
  return {
    ...info,
    exited,
    estop: (engaged) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(engaged ? 'SIGUSR1' : 'SIGUSR2');
    },
    kill: (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
    stop: async () => {
      killer();
      await exited;
    },
  };
}

/** Toggles the e-stop every `periodMs` until stopped; returns the stopper (it releases the e-stop). */
export function estopTraffic(estop: (engaged: boolean) => void, periodMs: number): () => void {
  let engaged = false;
  const timer = setInterval(() => {
    engaged = !engaged;
    estop(engaged);
  }, periodMs);
  return () => {
    clearInterval(timer);
    if (engaged) estop(false);
  };
}
