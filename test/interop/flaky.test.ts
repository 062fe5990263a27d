// Which suite tests stand behind a requirement's verdict, read from the suite's own words.
import { describe, expect, it } from 'vitest';
import { testsOf } from './flaky.js';

const coverage = new Map([['AWP-EVT-002', ['estop']]]);

describe('testsOf', () => {
  it('reads the [mode/test] tags of a failure', () => {
    const detail =
      "[streaming/estop] queued action ended {'state': 'queued'}; [streaming/idempotency] pong after 752 ms";
    expect(testsOf({ id: 'AWP-EVT-002', level: 'MUST', outcome: 'fail', detail }, coverage)).toEqual([
      'estop',
      'idempotency',
    ]);
  });

  it('reads the test list of a pass', () => {
    const detail = '4 check(s): lockstep/heartbeat, lockstep/resume-replay';
    expect(testsOf({ id: 'AWP-SAF-001', level: 'MUST', outcome: 'pass', detail }, coverage)).toEqual([
      'heartbeat',
      'resume-replay',
    ]);
  });

  it('falls back to the tests registered as covering the requirement', () => {
    const row = { id: 'AWP-EVT-002', level: 'MUST', outcome: 'untested' as const, detail: 'not exercised' };
    expect(testsOf(row, coverage)).toEqual(['estop']);
    expect(testsOf({ ...row, id: 'AWP-X-000' }, coverage)).toEqual([]);
  });
});
