/** After close(), an engine holds nothing that keeps the process alive: it exits by itself. */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runToExit } from '../support/run-child.js';
import { ENGINES } from './engines.js';

const child = fileURLToPath(new URL('./fixtures/serve-and-close.ts', import.meta.url));

/** Runs the fixture for an engine; resolves with its exit code and output. */
function run(engine: string, mode = ''): Promise<{ code: number | null; out: string }> {
  return runToExit(child, [engine, mode], 15_000);
}

for (const engine of ENGINES) {
  describe.skipIf(engine.unavailable !== undefined)(`engine ${engine.name}`, () => {
    it('lets the process exit once closed', async () => {
      const { code, out } = await run(engine.name);
      expect(out).toContain(`closed ${engine.name}`);
      expect(code).toBe(0);
    });

    // A worker thread's sockets left open when the process exits would abort it (uv_loop_close).
    it('keeps the exit code of a process that exits with a connection open', async () => {
      const { code, out } = await run(engine.name, 'exit-open');
      expect(out).not.toContain('Assertion failed');
      expect(code).toBe(3);
    });
  });
}
