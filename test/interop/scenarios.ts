// Run an awp-python scenario agent (test/interop/agents/*.py) against a target URL.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AGENTS_DIR } from './paths.js';
import { runLogged } from './proc.js';
import type { Peers } from './venv.js';

export type ScenarioName = 'relay_episode' | 'observers';
export const SCENARIOS: readonly ScenarioName[] = ['relay_episode', 'observers'];

export interface ScenarioCheck {
  readonly check: string;
  readonly ok: boolean;
  readonly detail?: unknown;
}

/** The JSON line a scenario script prints last. */
export interface ScenarioResult {
  readonly scenario: string;
  readonly ok: boolean;
  readonly failed: readonly string[];
  readonly checks: readonly ScenarioCheck[];
  readonly duration_ms: number;
  readonly mode?: string;
  readonly [key: string]: unknown;
}

export interface ScenarioRun {
  readonly result: ScenarioResult;
  readonly exitCode: number | null;
  readonly durationMs: number;
  readonly outputPath: string;
  readonly logPath: string;
}

export interface ScenarioOptions {
  readonly url: string;
  readonly token: string;
  /** The world's pid, for scenarios that drive the operator e-stop ($AWP_SIM_PID). */
  readonly worldPid?: number;
  /** Where `<scenario>.json` (its stdout) and `<scenario>.log` (its stderr) are written. */
  readonly dir: string;
  readonly args?: readonly string[];
  readonly timeoutMs?: number;
}

export async function runScenario(
  peers: Peers,
  name: ScenarioName,
  o: ScenarioOptions,
): Promise<ScenarioRun> {
  const outputPath = join(o.dir, `${name}.json`);
  const logPath = join(o.dir, `${name}.log`);
  const timeoutMs = o.timeoutMs ?? 90_000;
  const boundS = String(Math.max(5, Math.floor(timeoutMs / 1000) - 10)); // the script's own bound, inside ours
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PYTHONUNBUFFERED: '1',
    AWP_URL: o.url,
    AWP_TOKEN: o.token,
  };
  if (o.worldPid !== undefined) env['AWP_SIM_PID'] = String(o.worldPid);
  const run = await runLogged(
    peers.python,
    [join(AGENTS_DIR, `${name}.py`), '--timeout-s', boundS, ...(o.args ?? [])],
    {
      cwd: AGENTS_DIR,
      env,
      stdoutPath: outputPath,
      stderrPath: logPath,
      timeoutMs,
    },
  );
  if (run.timedOut) throw new Error(`${name} did not finish within ${timeoutMs} ms; see ${logPath}`);
  const lines = readFileSync(outputPath, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '');
  const last = lines.at(-1);
  if (last === undefined) {
    throw new Error(
      `${name} exited ${run.code} without a result line; see ${logPath}:\n${readFileSync(logPath, 'utf8').slice(-2000)}`,
    );
  }
  const result = JSON.parse(last) as ScenarioResult;
  return { result, exitCode: run.code, durationMs: run.durationMs, outputPath, logPath };
}
