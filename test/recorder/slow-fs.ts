/**
 * A slow disk for the recorder: node:fs (nodeRecorderFs) whose file writes wait at a gate until the test
 * opens it, like a disk that stalls. Everything is written for real once the gate opens.
 */
import { nodeRecorderFs, type RecorderFs } from '../../src/recorder/io/recorder-fs.js';

export class GatedFs implements RecorderFs {
  private open_ = false;
  private readonly waiting: (() => void)[] = [];
  /** Writes that completed. */
  writes = 0;

  release(): void {
    this.open_ = true;
    for (const w of this.waiting.splice(0)) w();
  }

  private gate(): Promise<void> {
    return this.open_ ? Promise.resolve() : new Promise((resolve) => this.waiting.push(resolve));
  }

  async open(path: string, flags: 'wx' | 'a') {
    const file = await nodeRecorderFs.open(path, flags);
    return {
      write: async (text: string) => {
        await this.gate();
        await file.write(text);
        this.writes++;
      },
      close: () => file.close(),
    };
  }

  mkdir(dir: string) {
    return nodeRecorderFs.mkdir(dir);
  }

  list(dir: string, prefix: string) {
    return nodeRecorderFs.list(dir, prefix);
  }

  unlink(path: string) {
    return nodeRecorderFs.unlink(path);
  }
}
