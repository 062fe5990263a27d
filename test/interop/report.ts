// The awp-conformance report (report.json, as written by `awp-conformance world --out DIR`) and the
// requirement-by-requirement comparison of two reports. No I/O here.

/** A requirement's verdict, as awp_conformance.results.Outcome spells it. */
export type Outcome = 'pass' | 'fail' | 'warn' | 'n/a' | 'untested' | 'manual' | 'untestable';

export interface RequirementRow {
  readonly id: string;
  readonly level: string;
  readonly outcome: Outcome;
  readonly detail: string;
}

/** The report's top-level `claim`: what the verdicts support. */
export interface Claim {
  /** `conformant`, `self-assessed` (something untested) or `fail`. */
  readonly status: string;
  readonly wording: string;
  readonly classes: readonly string[];
  readonly modes: readonly string[];
  readonly failed: readonly string[];
  readonly untested: readonly string[];
  readonly manual_evidence_required: readonly string[];
  readonly counts: Readonly<Record<string, number>>;
}

export interface ConformanceReport {
  readonly suite: { readonly name: string; readonly version: string };
  readonly specification: string;
  readonly target: string;
  readonly side: string;
  readonly generated: string;
  readonly claim: Claim;
  readonly requirements: readonly RequirementRow[];
  readonly world?: { readonly name: string; readonly version: string; readonly vendor?: string } | null;
  /** Each test the suite ran, e.g. `{test: 'streaming/estop', outcome: 'ran'}` or `skipped: <why>`. */
  readonly tests?: readonly { readonly test: string; readonly outcome: string }[];
}

const OUTCOMES: ReadonlySet<string> = new Set([
  'pass',
  'fail',
  'warn',
  'n/a',
  'untested',
  'manual',
  'untestable',
]);

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Check the parts of a report this harness relies on; throws with what is missing. */
export function parseReport(raw: unknown): ConformanceReport {
  if (!isRecord(raw)) throw new Error('report is not a JSON object');
  const claim = raw['claim'];
  if (!isRecord(claim) || typeof claim['status'] !== 'string' || typeof claim['wording'] !== 'string') {
    throw new Error('report has no claim.status / claim.wording');
  }
  const rows = raw['requirements'];
  if (!Array.isArray(rows)) throw new Error('report has no requirements list');
  for (const row of rows as unknown[]) {
    if (!isRecord(row) || typeof row['id'] !== 'string' || !OUTCOMES.has(String(row['outcome']))) {
      throw new Error(`report has a malformed requirement row: ${JSON.stringify(row).slice(0, 200)}`);
    }
  }
  return raw as unknown as ConformanceReport;
}

export interface OutcomePair {
  readonly id: string;
  readonly level: string;
  /** undefined: the requirement is missing from that report. */
  readonly a: Outcome | undefined;
  readonly b: Outcome | undefined;
  readonly aDetail: string | undefined;
  readonly bDetail: string | undefined;
}

export interface TestPair {
  readonly test: string;
  readonly a: string | undefined;
  readonly b: string | undefined;
}

export interface ReportComparison {
  /** Every requirement in either report, in the first report's order, then any only in the second. */
  readonly pairs: readonly OutcomePair[];
  /** The pairs whose outcomes differ. Details are not compared: they quote timings and ids. */
  readonly differences: readonly OutcomePair[];
  readonly claimA: Claim;
  readonly claimB: Claim;
  /** Claim fields that differ (status, wording, classes, modes, failed, untested, manual_evidence_required, counts). */
  readonly claimDifferences: readonly string[];
  readonly sameClaim: boolean;
  /** Tests whose outcome (`ran`, `skipped: ...`, `timed out`, `error: ...`) differs; diagnostic only. */
  readonly testDifferences: readonly TestPair[];
}

function sameJson(x: unknown, y: unknown): boolean {
  return JSON.stringify(x) === JSON.stringify(y);
}

function sortedCounts(c: Readonly<Record<string, number>>): [string, number][] {
  return Object.entries(c).sort(([p], [q]) => p.localeCompare(q));
}

export function compareClaims(a: Claim, b: Claim): string[] {
  const out: string[] = [];
  const fields = [
    'status',
    'wording',
    'classes',
    'modes',
    'failed',
    'untested',
    'manual_evidence_required',
  ] as const;
  for (const f of fields) if (!sameJson(a[f], b[f])) out.push(f);
  if (!sameJson(sortedCounts(a.counts), sortedCounts(b.counts))) out.push('counts');
  return out;
}

export function compareReports(a: ConformanceReport, b: ConformanceReport): ReportComparison {
  const byId = new Map(b.requirements.map((r) => [r.id, r]));
  const pairs: OutcomePair[] = [];
  for (const ra of a.requirements) {
    const rb = byId.get(ra.id);
    byId.delete(ra.id);
    pairs.push({
      id: ra.id,
      level: ra.level,
      a: ra.outcome,
      b: rb?.outcome,
      aDetail: ra.detail,
      bDetail: rb?.detail,
    });
  }
  for (const rb of byId.values()) {
    pairs.push({
      id: rb.id,
      level: rb.level,
      a: undefined,
      b: rb.outcome,
      aDetail: undefined,
      bDetail: rb.detail,
    });
  }
  const claimDifferences = compareClaims(a.claim, b.claim);
  const testsB = new Map((b.tests ?? []).map((t) => [t.test, t.outcome]));
  const testDifferences: TestPair[] = [];
  for (const t of a.tests ?? []) {
    const other = testsB.get(t.test);
    testsB.delete(t.test);
    if (other !== t.outcome) testDifferences.push({ test: t.test, a: t.outcome, b: other });
  }
  for (const [test, outcome] of testsB) testDifferences.push({ test, a: undefined, b: outcome });
  return {
    pairs,
    differences: pairs.filter((p) => p.a !== p.b),
    claimA: a.claim,
    claimB: b.claim,
    claimDifferences,
    sameClaim: claimDifferences.length === 0,
    testDifferences,
  };
}

/** Requirements whose outcome is not `pass`, with the suite's words for them. */
export function notPassing(report: ConformanceReport): RequirementRow[] {
  return report.requirements.filter((r) => r.outcome !== 'pass');
}

/** One line per difference, for assertion messages and logs. */
export function describeDifferences(c: ReportComparison): string[] {
  const lines = c.differences.map(
    (d) =>
      `${d.id}: ${d.a ?? 'missing'} -> ${d.b ?? 'missing'}${d.b !== 'pass' && d.bDetail ? ` (${d.bDetail.slice(0, 240)})` : ''}`,
  );
  for (const f of c.claimDifferences) {
    const a = c.claimA[f as keyof Claim];
    const b = c.claimB[f as keyof Claim];
    lines.push(`claim.${f}: ${JSON.stringify(a)} -> ${JSON.stringify(b)}`);
  }
  return lines;
}
