/**
 * The file operations the recording writer needs, on node:fs/promises. A deployment (or a test of a slow
 * disk) may give the writer another implementation with the same behaviour.
 */
import { mkdir, open, readdir, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { RECORDING_SUFFIX } from '../file-names.js';

export interface RecorderFile {
  write(text: string): Promise<void>;
  close(): Promise<void>;
}

export interface RecorderFs {
  /** `wx`: a new file (never another's); `a`: one this writer created, reopened. */
  open(path: string, flags: 'wx' | 'a'): Promise<RecorderFile>;
  mkdir(dir: string): Promise<void>;
  /** The recording files in `dir` whose names start with `prefix`. */
  list(dir: string, prefix: string): Promise<{ name: string; size: number; mtimeMs: number }[]>;
  unlink(path: string): Promise<void>;
}

export const nodeRecorderFs: RecorderFs = {
  async open(path, flags) {
    const handle = await open(path, flags, 0o640);
    return {
      async write(text) {
        await handle.write(text);
      },
      close: () => handle.close(),
    };
  },
  async mkdir(dir) {
    await mkdir(dir, { recursive: true, mode: 0o750 });
  },
  async list(dir, prefix) {
    const names = (await readdir(dir)).filter((n) => n.startsWith(prefix) && n.endsWith(RECORDING_SUFFIX));
    const out: { name: string; size: number; mtimeMs: number }[] = [];
    for (const name of names) {
      const s = await stat(join(dir, name)).catch(() => undefined);
      if (s?.isFile() === true) out.push({ name, size: s.size, mtimeMs: s.mtimeMs });
    }
    return out;
  },
  unlink: (path) => unlink(path),
};
