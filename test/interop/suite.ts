// Run the conformance suite, `awp-conformance world`, against a target URL and read its report.
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import type { Peers } from './venv.js';
import { runLogged } from './proc.js';
import { parseReport } from './report.js';
import type { ConformanceReport } from './report.js';
import type { TimeModel } from './world.js';

export interface SuiteOptions {
  /** The endpoint under test: the world itself, or later the edge in front of it. */
  readonly url: string;
  /** Bearer token the suite presents to `url` (`--token`). */
  readonly token: string;
  readonly fixture: string;
  /**
   * The suite's working directory. The fixture's relative `audit_dir` resolves against it, so it
   * must be the world's working directory (World.dir), wherever `url` points.
   */
  readonly cwd: string;
  /** `--out`: report.json and traces/ land here; stdout and progress logs beside them. */
  readonly outDir: string;
  /** The world process the fixture's e-stop hooks signal (`kill -USR1 $AWP_SIM_PID`). */
  readonly worldPid: number;
  readonly profiles?: readonly string[];
  readonly modes?: readonly TimeModel[];
  readonly only?: readonly string[];
  readonly timeoutMs?: number;
}

export interface SuiteRun {
  readonly report: ConformanceReport;
  /** 0: conformant or self-assessed; 1: a requirement fails. */
  readonly exitCode: number | null;
  readonly durationMs: number;
  readonly reportPath: string;
  readonly tracesDir: string;
  readonly textPath: string;
  readonly progressPath: string;
}

export function suiteArgs(o: SuiteOptions): string[] {
  // `--token=<value>`: a token may begin with '-' (base64url), which argparse would take for an option.
  const args = ['world', o.url, '--fixture', o.fixture, '--out', o.outDir, `--token=${o.token}`];
  for (const p of o.profiles ?? []) args.push('--profile', p);
  for (const m of o.modes ?? []) args.push('--mode', m);
  for (const t of o.only ?? []) args.push('--only', t);
  return args;
}

/** The audit directory the suite will read for this fixture when run from `cwd`. */
export function fixtureAuditDir(fixture: string, cwd: string): string | undefined {
  const raw = JSON.parse(readFileSync(fixture, 'utf8')) as { audit_dir?: unknown };
  if (typeof raw.audit_dir !== 'string') return undefined;
  return isAbsolute(raw.audit_dir) ? raw.audit_dir : resolve(cwd, raw.audit_dir);
}

export async function runSuite(peers: Peers, o: SuiteOptions): Promise<SuiteRun> {
  mkdirSync(o.outDir, { recursive: true });
  const audit = fixtureAuditDir(o.fixture, o.cwd);
  if (audit !== undefined && !existsSync(audit)) {
    throw new Error(
      `the fixture's audit_dir resolves to ${audit}, which does not exist: run the suite from the world's directory`,
    );
  }
  const textPath = join(o.outDir, 'suite.txt');
  const progressPath = join(o.outDir, 'suite.progress.log');
  const timeoutMs = o.timeoutMs ?? 8 * 60_000;
  const run = await runLogged(peers.awpConformance, suiteArgs(o), {
    cwd: o.cwd,
    env: { ...process.env, AWP_SIM_PID: String(o.worldPid), PYTHONUNBUFFERED: '1' },
    stdoutPath: textPath,
    stderrPath: progressPath,
    timeoutMs,
  });
  const reportPath = join(o.outDir, 'report.json');
  if (run.timedOut)
    throw new Error(`awp-conformance did not finish within ${timeoutMs} ms; see ${progressPath}`);
  if (!existsSync(reportPath)) {
    const text = existsSync(progressPath) ? readFileSync(progressPath, 'utf8').slice(-2000) : '';
    throw new Error(`awp-conformance exited ${run.code} without a report (2: world unreachable):\n${text}`);
  }
  const report = parseReport(JSON.parse(readFileSync(reportPath, 'utf8')));
  return {
    report,
    exitCode: run.code,
    durationMs: run.durationMs,
    reportPath,
    tracesDir: join(o.outDir, 'traces'),
    textPath,
    progressPath,
  };
}

/**
 * Suite trace files (traces/*.jsonl) that mention `needle`. Through the edge, the world's own
 * host:port must appear nowhere: a `stream_endpoints` URL passed on unrewritten would let the suite
 * dial the world directly and pass without exercising the edge.
 */
export function tracesMentioning(tracesDir: string, needle: string): string[] {
  if (!existsSync(tracesDir)) return [];
  return readdirSync(tracesDir)
    .filter((f) => f.endsWith('.jsonl'))
    .filter((f) => readFileSync(join(tracesDir, f), 'utf8').includes(needle));
}
