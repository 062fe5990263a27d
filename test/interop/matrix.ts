// Registers the interop tests for a list of targets. With [direct] alone they are the baseline; add
// an edge TargetFactory and each config also asserts that the edge's report equals the direct one
// requirement by requirement, and that the scenarios pass through the edge.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { runConformanceCase, runScenarioCase, writeComparison } from './cases.js';
import type { ConformanceCase } from './cases.js';
import { CONFIGS } from './configs.js';
import { confirmBaselineFailures, confirmDifferences } from './flaky.js';
import type { DoubtfulVerdict } from './flaky.js';
import type { InteropConfig } from './configs.js';
import { currentRunId } from './paths.js';
import { compareReports, describeDifferences, notPassing } from './report.js';
import type { Outcome } from './report.js';
import { SCENARIOS } from './scenarios.js';
import { tracesMentioning } from './suite.js';
import type { ScenarioName } from './scenarios.js';
import type { TargetFactory } from './targets.js';
import { ensurePeers } from './venv.js';
import type { Peers } from './venv.js';

/** INTEROP_CONFIGS=streaming-core,lockstep-core narrows a local run; unset runs every config. */
export function selectedConfigs(all: readonly InteropConfig[] = CONFIGS): readonly InteropConfig[] {
  const wanted = process.env['INTEROP_CONFIGS'];
  if (wanted === undefined || wanted.trim() === '') return all;
  const names = new Set(wanted.split(',').map((s) => s.trim()));
  return all.filter((c) => names.has(c.name));
}

/** INTEROP_REPEAT=3 runs each case three times and asserts that the outcomes repeat. */
export function repeatCount(): number {
  const n = Number(process.env['INTEROP_REPEAT'] ?? '1');
  return Number.isInteger(n) && n >= 1 ? n : 1;
}

/** Outcomes a baseline (direct) run may report: nothing failing, warned about, or left untested. */
export const BASELINE_OUTCOMES: ReadonlySet<Outcome> = new Set(['pass', 'n/a', 'manual', 'untestable']);

const CASE_TIMEOUT_MS = 10 * 60_000;

function describeVerdict(v: DoubtfulVerdict): string {
  const seen = Object.entries(v.seen)
    .map(([t, xs]) => `${t} ${xs.map((x) => x ?? 'missing').join('/')}`)
    .join('; ');
  return `${v.id} [${seen}]: ${v.detail.slice(0, 300)}`;
}

function warnFlaky(where: string, verdicts: readonly DoubtfulVerdict[]): void {
  for (const v of verdicts.filter((x) => x.flaky)) console.warn(`FLAKY ${where}: ${describeVerdict(v)}`);
}

function writeJson(path: string, value: unknown): void {
  writeFileSync(path, JSON.stringify(value, null, 2) + '\n');
}

function summary(c: ConformanceCase): string {
  const claim = c.suite.report.claim;
  const counts = Object.entries(claim.counts)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  return `${c.target}/${c.config.name}: ${claim.status} (${counts}) in ${(c.durationMs / 1000).toFixed(1)} s`;
}

export interface MatrixOptions {
  readonly targets: readonly TargetFactory[];
  /** The target every other one is compared with. Default: the first. */
  readonly baseline?: string;
  readonly configs?: readonly InteropConfig[];
}

export function defineConformanceMatrix(o: MatrixOptions): void {
  const baseline = o.baseline ?? o.targets[0]?.name ?? 'direct';
  const runId = currentRunId();
  let peers: Peers;
  beforeAll(async () => {
    peers = await ensurePeers();
  }, 15 * 60_000);

  for (const config of o.configs ?? selectedConfigs()) {
    describe(`conformance: ${config.name}`, { concurrent: false }, () => {
      const cases = new Map<string, ConformanceCase[]>();
      for (const target of o.targets) {
        for (let i = 1; i <= repeatCount(); i++) {
          const label = repeatCount() > 1 ? ` (run ${i})` : '';
          const caseName = repeatCount() > 1 ? `${config.name}--run${i}` : config.name;
          it(
            `${target.name}${label}: awp-conformance world ${target.name === baseline ? 'finds nothing failing or untested' : 'completes'}`,
            async () => {
              const c = await runConformanceCase(peers, runId, config, target, caseName);
              cases.set(target.name, [...(cases.get(target.name) ?? []), c]);
              console.log(summary(c));
              const report = c.suite.report;
              expect(report.claim.modes).toEqual([config.mode]);
              if (target.name !== baseline) {
                const worldHost = new URL(c.worldUrl).host;
                expect(
                  tracesMentioning(c.suite.tracesDir, worldHost),
                  `suite traces name the world ${worldHost}`,
                ).toEqual([]);
              }
              if (target.name === baseline) {
                const bad = notPassing(report).filter((r) => !BASELINE_OUTCOMES.has(r.outcome));
                if (bad.length === 0) {
                  expect(report.claim.status).toBe('conformant');
                  expect(c.suite.exitCode).toBe(0);
                } else {
                  // A verdict that does not repeat is the suite racing the world, not the world.
                  const verdicts = await confirmBaselineFailures(
                    peers,
                    runId,
                    config,
                    target,
                    bad,
                    BASELINE_OUTCOMES,
                  );
                  writeJson(join(c.dir, 'doubtful.json'), verdicts);
                  warnFlaky(`${target.name}/${caseName}`, verdicts);
                  expect(verdicts.filter((v) => !v.flaky).map(describeVerdict)).toEqual([]);
                }
              }
              if (i > 1) {
                const first = cases.get(target.name)![0]!;
                const cmp = compareReports(first.suite.report, report);
                writeComparison(runId, `${config.name}--${target.name}-run1-vs-run${i}`, cmp);
                expect(describeDifferences(cmp)).toEqual([]);
              }
            },
            CASE_TIMEOUT_MS,
          );
        }
      }
      for (const target of o.targets) {
        if (target.name === baseline) continue;
        it(
          `${target.name} equals ${baseline} requirement by requirement, with the same claim`,
          async () => {
            const base = cases.get(baseline)?.[0];
            const other = cases.get(target.name)?.[0];
            expect(base, `the ${baseline} run of ${config.name} did not complete`).toBeDefined();
            expect(other, `the ${target.name} run of ${config.name} did not complete`).toBeDefined();
            const cmp = compareReports(base!.suite.report, other!.suite.report);
            const name = `${config.name}--${baseline}-vs-${target.name}`;
            writeComparison(runId, name, cmp);
            if (cmp.differences.length === 0) {
              expect(describeDifferences(cmp)).toEqual([]); // the claim follows from the rows
              return;
            }
            const baseTarget = o.targets.find((t) => t.name === baseline)!;
            const verdicts = await confirmDifferences(peers, runId, config, baseTarget, target, cmp);
            writeComparison(runId, name, cmp, verdicts);
            warnFlaky(name, verdicts);
            expect(verdicts.filter((v) => !v.flaky).map(describeVerdict)).toEqual([]);
          },
          CASE_TIMEOUT_MS,
        );
      }
    });
  }
}

export function defineScenarioMatrix(
  o: MatrixOptions & { readonly scenarios?: readonly ScenarioName[] },
): void {
  const baseline = o.baseline ?? o.targets[0]?.name ?? 'direct';
  const runId = currentRunId();
  let peers: Peers;
  beforeAll(async () => {
    peers = await ensurePeers();
  }, 15 * 60_000);

  for (const config of o.configs ?? selectedConfigs()) {
    describe(`scenarios: ${config.name}`, { concurrent: false }, () => {
      for (const scenario of o.scenarios ?? SCENARIOS) {
        for (const target of o.targets) {
          it(
            `${target.name}: ${scenario} succeeds`,
            async () => {
              const c = await runScenarioCase(peers, runId, scenario, config, target);
              const r = c.scenario.result;
              console.log(
                `${target.name}/${scenario}--${config.name}: ${r.ok ? 'ok' : `FAILED ${r.failed.join('; ')}`} in ${r.duration_ms} ms`,
              );
              expect(r.failed).toEqual([]);
              if (target.name !== baseline) {
                // The agents must reach the world only through the target.
                const worldHost = new URL(c.worldUrl).host;
                const urls = Array.isArray(r['stream_urls'])
                  ? (r['stream_urls'] as unknown[]).map(String)
                  : [];
                expect(
                  urls.filter((u) => u.includes(worldHost)),
                  `stream endpoints name the world ${worldHost}: agents would bypass ${target.name}`,
                ).toEqual([]);
              }
              expect(r.ok).toBe(true);
              expect(r.mode).toBe(config.mode);
              expect(c.scenario.exitCode).toBe(0);
            },
            3 * 60_000,
          );
        }
      }
    });
  }
}
