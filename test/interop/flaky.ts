// Telling a real difference from a timing race. Some suite checks are nondeterministic against the
// reference world itself (see /work/notes/interop.md): a verdict that does not repeat when its tests
// run again is reported as flaky, with every outcome seen, instead of failing the run.
import { runConformanceCase } from './cases.js';
import type { InteropConfig } from './configs.js';
import { capture } from './proc.js';
import type { Outcome, ReportComparison, RequirementRow } from './report.js';
import type { TargetFactory } from './targets.js';
import type { Peers } from './venv.js';

/** The suite's test registry: requirement id -> names of the tests that cover it. */
export async function suiteCoverage(peers: Peers): Promise<Map<string, string[]>> {
  const r = await capture(peers.awpConformance, ['tests'], { timeoutMs: 60_000 });
  if (r.code !== 0) throw new Error(`awp-conformance tests failed: ${r.stderr.trim()}`);
  const out = new Map<string, string[]>();
  for (const line of r.stdout.split('\n')) {
    const [side, , name, ...covers] = line.trim().split(/\s+/);
    if (side !== 'world' || name === undefined) continue;
    for (const id of covers) out.set(id, [...(out.get(id) ?? []), name]);
  }
  return out;
}

/**
 * Names of the tests behind a row: the `[mode/test]` tags of a failure, the `N check(s): mode/test,
 * ...` list of a pass, else the tests registered as covering the requirement.
 */
export function testsOf(row: RequirementRow, coverage: ReadonlyMap<string, readonly string[]>): string[] {
  const found = new Set<string>();
  for (const m of row.detail.matchAll(/\[(?:lockstep|streaming)\/([a-z0-9-]+)\]/g)) found.add(m[1]!);
  const checks = /check\(s\): (.*)$/.exec(row.detail);
  if (checks !== null) {
    for (const t of checks[1]!.split(', ')) {
      const m = /^(?:lockstep|streaming)\/([a-z0-9-]+)$/.exec(t.trim());
      if (m !== null) found.add(m[1]!);
    }
  }
  if (found.size === 0) for (const t of coverage.get(row.id) ?? []) found.add(t);
  return [...found].sort();
}

/**
 * INTEROP_RERUNS (default 4): reruns of the tests behind a doubtful verdict. Two were too few: on a busy
 * CI machine the reference world and suite alone (no edge) failed AWP-EVT-002's estop check three times
 * running, then passed twice in the comparison's reruns minutes later.
 */
export function rerunCount(): number {
  const n = Number(process.env['INTEROP_RERUNS'] ?? '4');
  return Number.isInteger(n) && n >= 0 ? n : 4;
}

/**
 * Rerun, on fresh worlds, only the tests behind `ids`, for each target `attempts` times, and collect
 * each requirement's outcome per target. `first` holds the full runs' outcomes.
 */
export async function rerunOutcomes(
  peers: Peers,
  runId: string,
  config: InteropConfig,
  targets: readonly TargetFactory[],
  ids: readonly string[],
  tests: readonly string[],
  first: ReadonlyMap<string, ReadonlyMap<string, Outcome | undefined>>,
  attempts = rerunCount(),
): Promise<Map<string, Record<string, (Outcome | undefined)[]>>> {
  const seen = new Map<string, Record<string, (Outcome | undefined)[]>>();
  for (const id of ids) {
    const row: Record<string, (Outcome | undefined)[]> = {};
    for (const t of targets) row[t.name] = [first.get(t.name)?.get(id)];
    seen.set(id, row);
  }
  for (let i = 1; i <= attempts; i++) {
    for (const t of targets) {
      const c = await runConformanceCase(peers, runId, config, t, `${config.name}--rerun${i}`, tests);
      const byId = new Map(c.suite.report.requirements.map((r) => [r.id, r.outcome]));
      for (const id of ids) seen.get(id)![t.name]!.push(byId.get(id));
    }
  }
  return seen;
}

export interface DoubtfulVerdict {
  readonly id: string;
  /** The suite's words in the full run (of the second target, for a difference). */
  readonly detail: string;
  /** Outcomes by target: the full run's first, then each rerun's. */
  readonly seen: Readonly<Record<string, readonly (Outcome | undefined)[]>>;
  /** The verdict did not repeat (see the two confirm functions). */
  readonly flaky: boolean;
}

function unique(xs: readonly string[]): string[] {
  return [...new Set(xs)].sort();
}

/**
 * Baseline rows outside `allowed` (fail, warn, untested): rerun their tests. A row is flaky when a
 * rerun reaches an allowed outcome, i.e. the world can pass it and the failure is a race.
 */
export async function confirmBaselineFailures(
  peers: Peers,
  runId: string,
  config: InteropConfig,
  target: TargetFactory,
  bad: readonly RequirementRow[],
  allowed: ReadonlySet<Outcome>,
): Promise<DoubtfulVerdict[]> {
  const coverage = await suiteCoverage(peers);
  const tests = unique(bad.flatMap((r) => testsOf(r, coverage)));
  const first = new Map([[target.name, new Map(bad.map((r) => [r.id, r.outcome] as const))]]);
  const seen = await rerunOutcomes(
    peers,
    runId,
    config,
    [target],
    bad.map((r) => r.id),
    tests,
    first,
  );
  return bad.map((r) => {
    const outcomes = seen.get(r.id)![target.name]!;
    const flaky = outcomes.slice(1).some((x) => x !== undefined && allowed.has(x));
    return { id: r.id, detail: r.detail, seen: { [target.name]: outcomes }, flaky };
  });
}

/**
 * Differences between two targets' reports: rerun the tests behind them on both targets. A
 * difference is flaky when, over the full run and the reruns, the two targets share an outcome for
 * it. `seen` keeps every outcome so that a lopsided rate stays visible.
 */
export async function confirmDifferences(
  peers: Peers,
  runId: string,
  config: InteropConfig,
  base: TargetFactory,
  other: TargetFactory,
  cmp: ReportComparison,
): Promise<DoubtfulVerdict[]> {
  if (cmp.differences.length === 0) return [];
  const coverage = await suiteCoverage(peers);
  const row = (id: string, outcome: Outcome | undefined, detail: string | undefined): RequirementRow => ({
    id,
    level: '',
    outcome: outcome ?? 'untested',
    detail: detail ?? '',
  });
  const tests = unique(
    cmp.differences.flatMap((d) => [
      ...testsOf(row(d.id, d.a, d.aDetail), coverage),
      ...testsOf(row(d.id, d.b, d.bDetail), coverage),
    ]),
  );
  const first = new Map([
    [base.name, new Map(cmp.differences.map((d) => [d.id, d.a] as const))],
    [other.name, new Map(cmp.differences.map((d) => [d.id, d.b] as const))],
  ]);
  const ids = cmp.differences.map((d) => d.id);
  const seen = await rerunOutcomes(peers, runId, config, [base, other], ids, tests, first);
  return cmp.differences.map((d) => {
    const s = seen.get(d.id)!;
    const mine = new Set(s[base.name]!.filter((x) => x !== undefined));
    const flaky = s[other.name]!.some((x) => x !== undefined && mine.has(x));
    return { id: d.id, detail: d.bDetail ?? '', seen: s, flaky };
  });
}
