/** Runs a TypeScript file in a child Node process until it exits by itself (tests of a clean shutdown). */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));

/**
 * `node --import tsx file ...args` from the repository root; resolves with its exit code and everything it
 * printed (stdout and stderr), or rejects if it has not exited within `timeoutMs` (then it is killed).
 */
export async function runToExit(
  file: string,
  args: readonly string[],
  timeoutMs: number,
): Promise<{ code: number | null; out: string }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', file, ...args], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr.on('data', (c: Buffer) => (out += c.toString()));
  let timer: NodeJS.Timeout | undefined;
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      proc.once('exit', (c) => resolve(c));
      timer = setTimeout(
        () => reject(new Error(`timed out after ${timeoutMs} ms waiting for the child to exit by itself`)),
        timeoutMs,
      );
    });
    return { code, out };
  } finally {
    clearTimeout(timer);
    proc.kill('SIGKILL');
  }
}
