/** After close(), an engine holds nothing that keeps the process alive: it exits by itself. */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ENGINES, withTimeout } from './engines.js';

const child = fileURLToPath(new URL('./fixtures/serve-and-close.ts', import.meta.url));
const root = fileURLToPath(new URL('../../', import.meta.url));

for (const engine of ENGINES) {
  describe.skipIf(engine.unavailable !== undefined)(`engine ${engine.name}`, () => {
    it('lets the process exit once closed', async () => {
      const proc = spawn(process.execPath, ['--import', 'tsx', child, engine.name], {
        cwd: root,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      proc.stdout.on('data', (c: Buffer) => (out += c.toString()));
      proc.stderr.on('data', (c: Buffer) => (out += c.toString()));
      const exit = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
      try {
        const code = await withTimeout(exit, 15_000, 'the child to exit by itself');
        expect(out).toContain(`closed ${engine.name}`);
        expect(code).toBe(0);
      } finally {
        proc.kill('SIGKILL');
      }
    });
  });
}
