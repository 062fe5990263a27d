/**
 * The benchmark's processes run compiled JavaScript, as production runs `dist/`: the product (src/) and
 * the process entry points (bench/lib/, bench/frame-peek.ts) are compiled by tsc (incrementally) into a
 * directory under the system's temp dir, with the vendored spec data copied next to the code that reads
 * it and `node_modules` linked so that packages resolve. Outside the repository, so that neither ESLint
 * nor Prettier nor git sees the output. Running through tsx instead would measure tsx: its transform
 * keeps function names with a helper that gives every closure its own property store (~6 KB of heap per
 * idle observer session) and costs time on every closure created.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ROOT } from './child.js';

/** One build directory per checkout. */
export const BUILD_DIR = join(
  tmpdir(),
  `awp-edge-bench-${createHash('sha256').update(ROOT).digest('hex').slice(0, 8)}`,
);

export function buildForBench(): string {
  mkdirSync(BUILD_DIR, { recursive: true });
  const config = {
    extends: resolve(ROOT, 'tsconfig.json'),
    compilerOptions: {
      rootDir: ROOT,
      outDir: BUILD_DIR,
      noEmit: false,
      sourceMap: false,
      declaration: false,
      incremental: true,
      tsBuildInfoFile: join(BUILD_DIR, '.tsbuildinfo'),
    },
    include: [resolve(ROOT, 'src'), resolve(ROOT, 'bench/lib'), resolve(ROOT, 'bench/frame-peek.ts')],
  };
  const tsconfig = join(BUILD_DIR, 'tsconfig.json');
  writeFileSync(tsconfig, `${JSON.stringify(config, null, 2)}\n`);
  writeFileSync(join(BUILD_DIR, 'package.json'), `${JSON.stringify({ type: 'module', private: true })}\n`);
  if (!existsSync(join(BUILD_DIR, 'node_modules')))
    symlinkSync(resolve(ROOT, 'node_modules'), join(BUILD_DIR, 'node_modules'), 'dir');
  const r = spawnSync(process.execPath, [resolve(ROOT, 'node_modules/typescript/bin/tsc'), '-p', tsconfig], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`tsc failed for the bench build:\n${r.stdout}${r.stderr}`);
  const spec = join(BUILD_DIR, 'src/protocol/spec');
  rmSync(spec, { recursive: true, force: true });
  cpSync(resolve(ROOT, 'src/protocol/spec'), spec, { recursive: true });
  return BUILD_DIR;
}
