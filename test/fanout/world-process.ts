/**
 * The streaming demo world in a child process, for measurements that must not count the world's own
 * allocations (the zero-copy test). `startWorldProcess(options)` forks this file; the child starts
 * `startDemoWorld` on 127.0.0.1 and reports its URL; it exits when the parent disconnects.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { DemoServerOptions } from '../../src/demo/index.js';

export interface WorldProcess {
  readonly url: string;
  close(): Promise<void>;
}

export function startWorldProcess(options: Partial<DemoServerOptions>): Promise<WorldProcess> {
  const child = fork(fileURLToPath(import.meta.url), [JSON.stringify(options)], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error('the world process did not start within 20 s'));
    }, 20_000);
    child.once('error', reject);
    child.once('message', (m: { url?: string }) => {
      clearTimeout(timer);
      if (typeof m.url !== 'string') return reject(new Error(`unexpected message ${JSON.stringify(m)}`));
      resolve({
        url: m.url,
        close: async () => {
          if (child.exitCode !== null) return;
          const exited = new Promise<void>((done) => child.once('exit', () => done()));
          child.disconnect();
          const kill = setTimeout(() => child.kill('SIGKILL'), 5000);
          await exited;
          clearTimeout(kill);
        },
      });
    });
  });
}

async function main(): Promise<void> {
  const { startDemoWorld } = await import('../../src/demo/index.js');
  const options = JSON.parse(process.argv[2] ?? '{}') as Partial<DemoServerOptions>;
  const world = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0, ...options });
  process.on('disconnect', () => {
    void world.close().then(() => process.exit(0));
  });
  process.send?.({ url: world.url });
}

// Forked as a child (with an IPC channel): run the world.
if (process.send !== undefined && process.argv[1] === fileURLToPath(import.meta.url)) void main();
