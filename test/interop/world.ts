// Start the reference world, awp-sim, on a free loopback port and stop it again.
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import type { Peers } from './venv.js';
import { spawnLogged } from './proc.js';
import type { Spawned } from './proc.js';

export type TimeModel = 'lockstep' | 'streaming';

/** awp-sim's optional features (`awp-sim serve --features`). */
export type WorldFeature = 'task' | 'approval' | 'blend' | 'transfer' | 'sim' | 'servo' | 'gripper';

export interface WorldTimers {
  readonly watchdogMs: number;
  readonly heartbeatMs: number;
  readonly reconnectWindowMs: number;
}

/** Shortened timers so that the suite's liveness tests fit a CI budget (awp-sim defaults: 2000/5000/30000). */
export const CI_TIMERS: WorldTimers = { watchdogMs: 800, heartbeatMs: 500, reconnectWindowMs: 4000 };

export interface WorldOptions {
  readonly mode: TimeModel;
  readonly features?: readonly WorldFeature[];
  /** `ws` also offers frames on a stream connection at <url>/stream (AWP-TRN-003). */
  readonly streamBinding?: 'inline' | 'ws';
  readonly timers?: WorldTimers;
  /** The agents' bearer token; a fresh random one when omitted. */
  readonly token?: string;
  /** Bearer token of approver connections (with the `approval` feature). */
  readonly approverToken?: string;
  readonly approvalTimeoutMs?: number;
  /** Working directory: the world's cwd, holding `world.log`, the audit log and the wire traces. */
  readonly dir: string;
  /** Audit directory, relative to `dir` or absolute (the suite fixture's `audit_dir`). Default `awp-audit`. */
  readonly auditDirName?: string;
  /** Write per-session wire traces (`--record-dir`) under `dir`/wire. Default true. */
  readonly record?: boolean;
  readonly extraArgs?: readonly string[];
  readonly startTimeoutMs?: number;
}

export interface World {
  /** The control endpoint, e.g. ws://127.0.0.1:40123 (streams, if offered, at `${url}/stream`). */
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  readonly token: string;
  readonly approverToken: string | undefined;
  readonly dir: string;
  readonly auditDir: string;
  readonly recordDir: string | undefined;
  readonly logPath: string;
  readonly options: WorldOptions;
  /** The operator e-stop: SIGUSR1 engages, SIGUSR2 releases (what the fixture's hooks run). */
  engageEstop(): void;
  releaseEstop(): void;
  /** SIGTERM (the world closes its audit log), SIGKILL after a grace period. Idempotent. */
  stop(): Promise<void>;
}

export function worldArgs(
  o: WorldOptions,
  token: string,
  auditDir: string,
  recordDir: string | undefined,
): string[] {
  const t = o.timers ?? CI_TIMERS;
  const args = ['serve', '--host', '127.0.0.1', '--port', '0', '--mode', o.mode, `--token=${token}`];
  args.push('--watchdog-ms', String(t.watchdogMs), '--heartbeat-ms', String(t.heartbeatMs));
  args.push('--reconnect-window-ms', String(t.reconnectWindowMs), '--audit-dir', auditDir);
  if (o.features !== undefined && o.features.length > 0) args.push('--features', o.features.join(','));
  if (o.streamBinding !== undefined) args.push('--stream-binding', o.streamBinding);
  if (o.approverToken !== undefined) args.push(`--approver-token=${o.approverToken}`);
  if (o.approvalTimeoutMs !== undefined) args.push('--approval-timeout-ms', String(o.approvalTimeoutMs));
  if (recordDir !== undefined) args.push('--record-dir', recordDir);
  args.push(...(o.extraArgs ?? []));
  return args;
}

const LISTENING = /world listening on (wss?:\/\/[^\s]+)/;

export async function startWorld(peers: Peers, o: WorldOptions): Promise<World> {
  mkdirSync(o.dir, { recursive: true });
  const token = o.token ?? `awp-interop-${randomBytes(12).toString('hex')}`;
  const auditName = o.auditDirName ?? 'awp-audit';
  const auditDir = isAbsolute(auditName) ? auditName : join(o.dir, auditName);
  const recordDir = o.record === false ? undefined : join(o.dir, 'wire');
  const logPath = join(o.dir, 'world.log');
  let seen = '';
  let announce: ((url: string) => void) | undefined;
  const announced = new Promise<string>((resolve) => (announce = resolve));
  const proc: Spawned = spawnLogged(peers.awpSim, worldArgs(o, token, auditDir, recordDir), {
    cwd: o.dir,
    env: { ...process.env, PYTHONUNBUFFERED: '1' },
    stdoutPath: logPath,
    stderrPath: logPath,
    onOutput: (text) => {
      if (announce === undefined) return;
      seen = (seen + text).slice(-4096);
      const m = LISTENING.exec(seen);
      if (m !== null) {
        announce(m[1]!);
        announce = undefined;
      }
    },
  });
  const timeoutMs = o.startTimeoutMs ?? 15_000;
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    announced.then((url) => ({ url })),
    proc.exited.then((code) => ({ exited: code })),
    new Promise<{ timeout: true }>(
      (resolve) => (timer = setTimeout(() => resolve({ timeout: true }), timeoutMs)),
    ),
  ]);
  clearTimeout(timer);
  if (!('url' in outcome)) {
    await proc.stop(500);
    const why =
      'exited' in outcome ? `exited with ${outcome.exited}` : `did not listen within ${timeoutMs} ms`;
    throw new Error(`awp-sim ${why}; log ${logPath}:\n${tail(logPath)}`);
  }
  const url = outcome.url;
  const port = Number(new URL(url).port);
  let stopped: Promise<void> | undefined;
  return {
    url,
    port,
    pid: proc.pid,
    token,
    approverToken: o.approverToken,
    dir: o.dir,
    auditDir,
    recordDir,
    logPath,
    options: o,
    engageEstop: () => process.kill(proc.pid, 'SIGUSR1'),
    releaseEstop: () => process.kill(proc.pid, 'SIGUSR2'),
    stop: () => (stopped ??= proc.stop(3000)),
  };
}

function tail(path: string, lines = 30): string {
  try {
    return readFileSync(path, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Lines of the world's log at ERROR level, e.g. tracebacks of `world.advance failed`. */
export function worldErrors(world: Pick<World, 'logPath'>): string[] {
  return readFileSync(world.logPath, 'utf8')
    .split('\n')
    .filter((l) => / ERROR /.test(l));
}
