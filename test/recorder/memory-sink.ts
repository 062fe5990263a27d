/** A LineSink that keeps files in memory with a queue bound the test sets (`room` answers from it). */
import type { LineSink } from '../../src/recorder/session-log.js';

export class MemorySink implements LineSink {
  readonly files = new Map<string, string[]>();
  readonly closed = new Map<string, { finalHash: string; records: number }>();
  droppedRecords = 0;
  /** Whether the next `room` calls answer yes (a test flips it to simulate a full queue). */
  open = true;

  room(): boolean {
    return this.open;
  }

  write(file: string, line: string): void {
    if (this.closed.has(file)) throw new Error(`write to closed file ${file}`);
    let lines = this.files.get(file);
    if (lines === undefined) this.files.set(file, (lines = []));
    lines.push(line);
  }

  close(file: string, finalHash: string, records: number): void {
    this.closed.set(file, { finalHash, records });
  }

  dropped(records: number): void {
    this.droppedRecords += records;
  }

  /** A file's text as it would be on disk. */
  text(file: string): string {
    return (this.files.get(file) ?? []).map((l) => `${l}\n`).join('');
  }

  /** Every file's text, in name order. */
  all(): { name: string; text: string }[] {
    return [...this.files.keys()].sort().map((name) => ({ name, text: this.text(name) }));
  }
}
