// Where the interop harness reads its inputs and writes its results.
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
export const PROJECT_ROOT = resolve(HERE, '..', '..');
export const FIXTURES_DIR = join(HERE, 'fixtures');
export const AGENTS_DIR = join(HERE, 'agents');
/** Git-ignored (`results/` in .gitignore). */
export const RESULTS_ROOT = join(PROJECT_ROOT, 'results', 'interop');

/** A sortable id for one harness run: UTC time plus the process id, e.g. `20261130T141548Z-4242`. */
export function newRunId(now = new Date()): string {
  const stamp = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  return `${stamp}-${process.pid}`;
}

/**
 * The run id shared by every test file of one `vitest run`: vitest.interop.config.ts sets
 * INTEROP_RUN_ID once in the main process and hands it to each worker through `test.env`.
 */
export function currentRunId(): string {
  return process.env['INTEROP_RUN_ID'] ?? newRunId();
}

/** results/interop/<run-id>/<target>/<case>/, created. */
export function caseDir(runId: string, target: string, caseName: string): string {
  const dir = join(RESULTS_ROOT, runId, target, caseName);
  mkdirSync(dir, { recursive: true });
  return dir;
}
