// One interop case: a fresh world for a config, a target in front of it (direct or edge), then the
// conformance suite or a scenario agent against the target. Everything lands under
// results/interop/<run-id>/<target>/<case>/ and every process is stopped before returning.
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { InteropConfig } from './configs.js';
import { worldOptionsFor } from './configs.js';
import { caseDir, RESULTS_ROOT } from './paths.js';
import { notPassing } from './report.js';
import type { ReportComparison } from './report.js';
import { runScenario } from './scenarios.js';
import type { ScenarioName, ScenarioRun } from './scenarios.js';
import { runSuite } from './suite.js';
import type { SuiteRun } from './suite.js';
import type { TargetFactory } from './targets.js';
import type { Peers } from './venv.js';
import { startWorld, worldErrors } from './world.js';
import type { World } from './world.js';

export interface CaseBase {
  readonly config: InteropConfig;
  readonly target: string;
  /** What the agents dialled. */
  readonly url: string;
  readonly worldUrl: string;
  readonly dir: string;
  /** Wall time of the case, world start to world stop. */
  readonly durationMs: number;
  /** ERROR lines in the world's log (awp-sim logs `world.advance failed` tracebacks there). */
  readonly worldErrors: readonly string[];
}

export interface ConformanceCase extends CaseBase {
  readonly suite: SuiteRun;
}

export interface ScenarioCase extends CaseBase {
  readonly scenario: ScenarioRun;
}

async function withWorldAndTarget<T>(
  peers: Peers,
  config: InteropConfig,
  factory: TargetFactory,
  dir: string,
  body: (world: World, url: string, token: string) => Promise<T>,
): Promise<{ value: T; world: World; url: string }> {
  const world = await startWorld(peers, worldOptionsFor(config, dir));
  try {
    const target = await factory.open(world, dir);
    try {
      const value = await body(world, target.url, target.token);
      return { value, world, url: target.url };
    } finally {
      await target.close();
    }
  } finally {
    await world.stop();
  }
}

function finish<T>(
  r: { value: T; world: World; url: string },
  started: number,
): { value: T; world: World; url: string; durationMs: number; errors: string[] } {
  return { ...r, durationMs: Math.round(performance.now() - started), errors: worldErrors(r.world) };
}

export async function runConformanceCase(
  peers: Peers,
  runId: string,
  config: InteropConfig,
  factory: TargetFactory,
  caseName = config.name,
  only?: readonly string[],
): Promise<ConformanceCase> {
  const dir = caseDir(runId, factory.name, caseName);
  const started = performance.now();
  const raw = await withWorldAndTarget(peers, config, factory, dir, (world, url, token) =>
    runSuite(peers, {
      url,
      token,
      fixture: config.fixture,
      cwd: world.dir,
      outDir: join(dir, 'suite'),
      worldPid: world.pid,
      profiles: config.profiles,
      ...(only !== undefined ? { only } : {}),
    }),
  );
  const r = finish(raw, started);
  const result: ConformanceCase = {
    config,
    target: factory.name,
    url: r.url,
    worldUrl: r.world.url,
    dir,
    durationMs: r.durationMs,
    worldErrors: r.errors,
    suite: r.value,
  };
  const report = result.suite.report;
  const summary = {
    kind: 'conformance',
    case: caseName,
    config: config.name,
    target: factory.name,
    only: only ?? null,
    url: result.url,
    world_url: result.worldUrl,
    duration_ms: result.durationMs,
    suite_duration_ms: result.suite.durationMs,
    exit_code: result.suite.exitCode,
    claim: report.claim,
    not_passing: notPassing(report).map((row) => ({ id: row.id, outcome: row.outcome, detail: row.detail })),
    skipped_tests: (report.tests ?? []).filter((t) => t.outcome !== 'ran'),
    world_error_lines: result.worldErrors.length,
  };
  writeFileSync(join(dir, 'summary.json'), JSON.stringify(summary, null, 2) + '\n');
  appendFileSync(
    join(RESULTS_ROOT, runId, 'cases.jsonl'),
    JSON.stringify({ ...summary, not_passing: undefined }) + '\n',
  );
  return result;
}

export async function runScenarioCase(
  peers: Peers,
  runId: string,
  scenario: ScenarioName,
  config: InteropConfig,
  factory: TargetFactory,
): Promise<ScenarioCase> {
  const dir = caseDir(runId, factory.name, `${scenario}--${config.name}`);
  const started = performance.now();
  const raw = await withWorldAndTarget(peers, config, factory, dir, (world, url, token) =>
    runScenario(peers, scenario, { url, token, worldPid: world.pid, dir }),
  );
  const r = finish(raw, started);
  const result: ScenarioCase = {
    config,
    target: factory.name,
    url: r.url,
    worldUrl: r.world.url,
    dir,
    durationMs: r.durationMs,
    worldErrors: r.errors,
    scenario: r.value,
  };
  const line = {
    kind: 'scenario',
    case: `${scenario}--${config.name}`,
    config: config.name,
    target: factory.name,
    duration_ms: result.durationMs,
    exit_code: r.value.exitCode,
    ok: r.value.result.ok,
    failed: r.value.result.failed,
    world_error_lines: result.worldErrors.length,
  };
  appendFileSync(join(RESULTS_ROOT, runId, 'cases.jsonl'), JSON.stringify(line) + '\n');
  return result;
}

/** results/interop/<run-id>/compare/<name>.json */
export function writeComparison(
  runId: string,
  name: string,
  comparison: ReportComparison,
  reruns?: unknown,
): string {
  const dir = join(RESULTS_ROOT, runId, 'compare');
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${name}.json`);
  writeFileSync(
    path,
    JSON.stringify(reruns === undefined ? comparison : { ...comparison, reruns }, null, 2) + '\n',
  );
  return path;
}
