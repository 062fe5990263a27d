/** After close(), an engine holds nothing that keeps the process alive: it exits by itself. */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ENGINES, withTimeout } from './engines.js';

const child = fileURLToPath(new URL('./fixtures/serve-and-close.ts', import.meta.url));
const root = fileURLToPath(new URL('../../', import.meta.url));

/** Runs the fixture; resolves with its exit code and output. */
async function run(engine: string, mode = ''): Promise<{ code: number | null; out: string }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', child, engine, mode], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const exit = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  try {
    return { code: await withTimeout(exit, 15_000, 'the child to exit by itself'), out };
  } finally {
    proc.kill('SIGKILL');
  }
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
