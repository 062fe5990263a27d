// The report comparison the through-edge acceptance rests on. Pure: runs with `npm test`, no Python.
import { describe, expect, it } from 'vitest';
import { compareReports, describeDifferences, notPassing, parseReport } from './report.js';
import type { ConformanceReport, RequirementRow } from './report.js';

function report(
  rows: readonly RequirementRow[],
  over: Partial<ConformanceReport['claim']> = {},
): ConformanceReport {
  const counts: Record<string, number> = {};
  for (const r of rows) counts[r.outcome] = (counts[r.outcome] ?? 0) + 1;
  return parseReport({
    suite: { name: 'awp-conformance', version: '0.1.0a10' },
    specification: '0.1-draft.12',
    target: 'ws://127.0.0.1:1',
    side: 'world',
    generated: '2026-11-30T00:00:00Z',
    claim: {
      status: 'conformant',
      wording: 'Core World (streaming): AWP-conformant against 0.1-draft.12 (awp-conformance 0.1.0a10)',
      classes: ['Core World'],
      modes: ['streaming'],
      failed: [],
      untested: [],
      manual_evidence_required: ['AWP-DAT-008'],
      counts,
      ...over,
    },
    requirements: rows,
    tests: [{ test: 'streaming/estop', outcome: 'ran' }],
  });
}

const ROWS: readonly RequirementRow[] = [
  { id: 'AWP-SES-004', level: 'MUST', outcome: 'pass', detail: '3 check(s): resume-replay' },
  { id: 'AWP-DAT-008', level: 'MUST', outcome: 'manual', detail: 'decode the frame vectors' },
  { id: 'AWP-SEC-001', level: 'MUST', outcome: 'n/a', detail: 'loopback endpoint' },
];

describe('compareReports', () => {
  it('pairs every requirement and finds no difference between equal outcomes with other details', () => {
    const a = report(ROWS);
    const b = report(ROWS.map((r) => ({ ...r, detail: `${r.detail} (other timing)` })));
    const c = compareReports(a, b);
    expect(c.pairs.map((p) => [p.id, p.a, p.b])).toEqual([
      ['AWP-SES-004', 'pass', 'pass'],
      ['AWP-DAT-008', 'manual', 'manual'],
      ['AWP-SEC-001', 'n/a', 'n/a'],
    ]);
    expect(c.differences).toEqual([]);
    expect(c.sameClaim).toBe(true);
    expect(describeDifferences(c)).toEqual([]);
  });

  it('reports a changed outcome with the second report words, and the claim fields it moves', () => {
    const a = report(ROWS);
    const failed = ROWS.map((r) =>
      r.id === 'AWP-SES-004' ? { ...r, outcome: 'fail' as const, detail: '[resume-replay] no suspended' } : r,
    );
    const b = report(failed, {
      status: 'fail',
      wording: 'Not conformant: 1 requirement(s) fail',
      failed: ['AWP-SES-004'],
    });
    const c = compareReports(a, b);
    expect(c.differences.map((d) => [d.id, d.a, d.b])).toEqual([['AWP-SES-004', 'pass', 'fail']]);
    expect(c.claimDifferences).toEqual(['status', 'wording', 'failed', 'counts']);
    expect(c.sameClaim).toBe(false);
    expect(describeDifferences(c)[0]).toBe('AWP-SES-004: pass -> fail ([resume-replay] no suspended)');
  });

  it('treats a requirement present in only one report as a difference', () => {
    const a = report(ROWS);
    const b = report([...ROWS, { id: 'AWP-DAT-010', level: 'MUST', outcome: 'pass', detail: '' }]);
    const c = compareReports(a, b);
    expect(c.differences.map((d) => [d.id, d.a, d.b])).toEqual([['AWP-DAT-010', undefined, 'pass']]);
    expect(c.claimDifferences).toEqual(['counts']);
  });

  it('notes tests whose outcome changed', () => {
    const a = report(ROWS);
    const b = { ...report(ROWS), tests: [{ test: 'streaming/estop', outcome: 'skipped: no hooks' }] };
    expect(compareReports(a, b).testDifferences).toEqual([
      { test: 'streaming/estop', a: 'ran', b: 'skipped: no hooks' },
    ]);
  });
});

describe('parseReport and notPassing', () => {
  it('rejects a report without a claim or with an unknown outcome', () => {
    expect(() => parseReport({ requirements: [] })).toThrow(/claim/);
    const bad = {
      ...report(ROWS),
      requirements: [{ id: 'AWP-X', level: 'MUST', outcome: 'maybe', detail: '' }],
    };
    expect(() => parseReport(bad)).toThrow(/malformed requirement/);
  });

  it('lists the rows that are not pass, with their details', () => {
    expect(notPassing(report(ROWS)).map((r) => `${r.id} ${r.outcome}`)).toEqual([
      'AWP-DAT-008 manual',
      'AWP-SEC-001 n/a',
    ]);
  });
});
