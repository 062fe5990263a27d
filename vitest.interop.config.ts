// `npm run test:interop`: the AWP reference peers from PyPI (awp-sim, awp-conformance, awp-python)
// against this project. Long, sequential, and kept apart from `npm test` (files end in .itest.ts).
import { defineConfig } from 'vitest/config';
import { newRunId } from './test/interop/paths.js';

// One id for the whole run, shared with every worker: results/interop/<run-id>/.
const runId = process.env['INTEROP_RUN_ID'] ?? newRunId();

export default defineConfig({
  test: {
    include: ['test/interop/**/*.itest.ts'],
    globalSetup: ['test/interop/global-setup.ts'],
    env: { INTEROP_RUN_ID: runId },
    testTimeout: 10 * 60_000,
    hookTimeout: 15 * 60_000,
    pool: 'forks',
    fileParallelism: false,
    sequence: { concurrent: false },
  },
});
