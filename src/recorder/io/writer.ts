/**
 * The recording files of one route: a bounded write queue in front of the disk, and retention.
 *
 * Nothing on the relay path waits for the disk: session logs append lines to the queue (`write`) and ask
 * first whether it has room (`room`); the queue is written out in the background, all waiting lines of a
 * file in one write, a few files at a time: a file once FLUSH_BYTES wait for it, every file at least every
 * FLUSH_MS (a write per line would cost more than the recording itself: each is a thread-pool round trip). When the disk is slower than the records arrive the queue
 * fills, `room` answers no, and the session logs drop records (and say so in their files) rather than
 * hold anything up. A file whose write fails takes no more lines (they are counted as dropped) and is
 * reported once.
 *
 * Retention is per route (files named `<route>.`): after a file closes, the oldest closed files are
 * deleted while there are more than `retainFiles` files or more than `retainBytes` bytes of them (files
 * being written count, but are never deleted).
 */
import type { LineSink } from '../session-log.js';
import { nodeRecorderFs, type RecorderFile, type RecorderFs } from './recorder-fs.js';

export interface WriterLimits {
  readonly queueBytes: number;
  readonly retainFiles: number;
  readonly retainBytes: number;
}

/** What the writer reports (the edge turns it into metrics and log lines). */
export interface WriterEvents {
  written(bytes: number, lines: number): void;
  dropped(records: number, bytes: number): void;
  deleted(file: string, bytes: number): void;
  /** A file closed: its last line's hash anchors the chain's last record (see verify.ts). */
  closed(file: string, finalHash: string, records: number): void;
  error(file: string, err: unknown): void;
}

/** Files written at once (each write is one libuv thread-pool job). */
const CONCURRENCY = 2;
/** Open file handles kept; beyond this the least recently written idle one is closed (and reopened). */
const MAX_OPEN = 1024;
/**
 * A file's waiting lines are written once this many bytes wait, or FLUSH_MS after the first of them: at
 * 1,000 recorded observers a write per file per second was a third of the recorder's cost (profiled).
 */
const FLUSH_BYTES = 64 * 1024;
const FLUSH_MS = 5000;
/** Retention runs at most this often. */
const RETENTION_INTERVAL_MS = 1000;

interface FileState {
  readonly name: string;
  lines: string[];
  bytes: number;
  handle: RecorderFile | undefined;
  created: boolean;
  busy: boolean;
  failed: boolean;
  /** Set by close(): the file ends once its queued lines are written. */
  end: { finalHash: string; records: number } | undefined;
  written: number;
  /** Its lines are to be written now (enough of them, their time is up, the file closes, or a flush). */
  due: boolean;
  /** No line of it was queued yet (its first, the header, is written at once: see write). */
  fresh: boolean;
}

export class RecordingWriter implements LineSink {
  private queued = 0;
  private readonly files = new Map<string, FileState>();
  /** Files with lines or a close waiting, in order of arrival. */
  private readonly dirty = new Set<FileState>();
  private active = 0;
  private openHandles = 0;
  /** Closed files of this route, oldest first, with their sizes. */
  private readonly retained = new Map<string, number>();
  private retainedBytes = 0;
  private retention: NodeJS.Timeout | undefined;
  private idle: (() => void)[] = [];
  private flushTimer: NodeJS.Timeout | undefined;

  private constructor(
    readonly dir: string,
    private readonly prefix: string,
    private readonly limits: WriterLimits,
    private readonly events: WriterEvents,
    private readonly fs: RecorderFs,
  ) {}

  /** Creates the directory if needed and takes stock of the route's files already there (oldest first). */
  static async open(
    dir: string,
    prefix: string,
    limits: WriterLimits,
    events: WriterEvents,
    fs: RecorderFs = nodeRecorderFs,
  ): Promise<RecordingWriter> {
    const w = new RecordingWriter(dir, prefix, limits, events, fs);
    await fs.mkdir(dir);
    const found = await fs.list(dir, prefix);
    for (const f of found.sort((a, b) => a.mtimeMs - b.mtimeMs)) {
      w.retained.set(f.name, f.size);
      w.retainedBytes += f.size;
    }
    w.scheduleRetention();
    return w;
  }

  // ---------------------------------------------------------------- LineSink

  room(bytes: number): boolean {
    return this.queued + bytes <= this.limits.queueBytes;
  }

  write(file: string, line: string, bytes: number): void {
    const f = this.state(file);
    if (f.failed || f.end !== undefined) {
      this.events.dropped(1, bytes);
      return;
    }
    f.lines.push(line);
    f.bytes += bytes;
    this.queued += bytes;
    this.dirty.add(f);
    // A new file is created with its header, when its session starts, not FLUSH_MS later together with
    // every file opened since (profiled: creating 1,000 files in one burst was 2 % of a recording edge).
    if (f.bytes >= FLUSH_BYTES || f.fresh) {
      f.fresh = false;
      f.due = true;
      this.pump();
    } else this.flushLater();
  }

  close(file: string, finalHash: string, records: number): void {
    const f = this.state(file);
    f.end = { finalHash, records };
    f.due = true;
    this.dirty.add(f);
    this.pump();
  }

  dropped(records: number, bytes: number): void {
    this.events.dropped(records, bytes);
  }

  /** Bytes waiting to be written. */
  get queuedBytes(): number {
    return this.queued;
  }

  /** Resolves once everything queued so far is written (or has failed). */
  flushed(): Promise<void> {
    this.allDue();
    if (this.settled()) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  /** Writes what waits, closes every handle and stops retention. */
  async shutdown(): Promise<void> {
    await this.flushed();
    clearTimeout(this.retention);
    this.retention = undefined;
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    for (const f of this.files.values()) await this.release(f);
  }

  // ---------------------------------------------------------------- the queue

  private state(name: string): FileState {
    let f = this.files.get(name);
    if (f === undefined) {
      f = {
        name,
        lines: [],
        bytes: 0,
        handle: undefined,
        created: false,
        busy: false,
        failed: false,
        end: undefined,
        written: 0,
        due: false,
        fresh: true,
      };
      this.files.set(name, f);
    }
    return f;
  }

  /** Every file with lines waiting is due at most FLUSH_MS from now. */
  private flushLater(): void {
    if (this.flushTimer !== undefined) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = undefined;
      this.allDue();
    }, FLUSH_MS);
    this.flushTimer.unref();
  }

  /** Nothing is being written and nothing is due (lines that arrived since may wait for FLUSH_MS). */
  private settled(): boolean {
    if (this.active > 0) return false;
    for (const f of this.dirty) if (f.due) return false;
    return true;
  }

  private allDue(): void {
    for (const f of this.dirty) f.due = true;
    this.pump();
  }

  private pump(): void {
    for (const f of this.dirty) {
      if (this.active >= CONCURRENCY) return;
      if (f.busy || !f.due) continue;
      this.dirty.delete(f);
      f.due = false;
      f.busy = true;
      this.active++;
      void this.flush(f).finally(() => {
        f.busy = false;
        this.active--;
        if (f.lines.length > 0 || (f.end !== undefined && this.files.has(f.name))) {
          this.dirty.add(f);
          if (f.end !== undefined || f.bytes >= FLUSH_BYTES) f.due = true;
          else this.flushLater();
        }
        this.pump();
        if (this.settled()) for (const resolve of this.idle.splice(0)) resolve();
      });
    }
  }

  private async flush(f: FileState): Promise<void> {
    const lines = f.lines;
    const count = lines.length;
    const bytes = f.bytes;
    f.lines = [];
    f.bytes = 0;
    try {
      if (count > 0 && !f.failed) {
        const handle = await this.handleOf(f);
        lines.push(''); // the last line's newline, in the one string the join makes
        await handle.write(lines.join('\n'));
        f.written += bytes;
        this.events.written(bytes, count);
      } else if (f.failed && count > 0) this.events.dropped(count, bytes);
      if (f.end !== undefined && f.lines.length === 0) await this.finish(f);
    } catch (err) {
      if (!f.failed) this.events.error(f.name, err);
      f.failed = true;
      this.events.dropped(count, bytes);
      if (f.end !== undefined) {
        this.files.delete(f.name);
        await this.release(f);
      }
    } finally {
      this.queued -= bytes;
    }
  }

  private async handleOf(f: FileState): Promise<RecorderFile> {
    if (f.handle !== undefined) return f.handle;
    if (this.openHandles >= MAX_OPEN) await this.closeIdleHandle();
    f.handle = await this.fs.open(`${this.dir}/${f.name}`, f.created ? 'a' : 'wx');
    f.created = true;
    this.openHandles++;
    return f.handle;
  }

  private async closeIdleHandle(): Promise<void> {
    for (const g of this.files.values()) {
      if (g.handle !== undefined && !g.busy) return this.release(g);
    }
  }

  private async release(f: FileState): Promise<void> {
    const h = f.handle;
    if (h === undefined) return;
    f.handle = undefined;
    this.openHandles--;
    await h.close().catch(() => undefined);
  }

  private async finish(f: FileState): Promise<void> {
    const end = f.end!;
    this.files.delete(f.name);
    await this.release(f);
    if (f.failed || !f.created) return;
    this.events.closed(f.name, end.finalHash, end.records);
    this.retained.set(f.name, f.written);
    this.retainedBytes += f.written;
    this.scheduleRetention();
  }

  // ---------------------------------------------------------------- retention

  private scheduleRetention(): void {
    if (this.retention !== undefined) return;
    this.retention = setTimeout(() => {
      this.retention = undefined;
      void this.applyRetention();
    }, RETENTION_INTERVAL_MS);
    this.retention.unref();
  }

  private async applyRetention(): Promise<void> {
    let openBytes = 0;
    for (const f of this.files.values()) openBytes += f.written + f.bytes;
    const { retainFiles, retainBytes } = this.limits;
    for (const [name, size] of this.retained) {
      const files = this.retained.size + this.files.size;
      if (files <= retainFiles && this.retainedBytes + openBytes <= retainBytes) break;
      this.retained.delete(name);
      this.retainedBytes -= size;
      try {
        await this.fs.unlink(`${this.dir}/${name}`);
        this.events.deleted(name, size);
      } catch (err) {
        this.events.error(name, err);
      }
    }
  }
}
