/**
 * A route's flight recorder: its write queue and files (RecordingWriter), and the session logs of the
 * sessions it records. A session that leaves this edge for a while (a relay agent's connection lost, an
 * observer suspended) keeps its log open for its reconnect window, so a resume on this edge continues the
 * same file; after that, or when the session ends, the log ends.
 */
import { timerDelay } from '../../protocol/timer-delay.js';
import { routePrefix } from '../file-names.js';
import { SessionLog, type SessionLogOptions } from '../session-log.js';
import type { RecorderFs } from './recorder-fs.js';
import { RecordingWriter, type WriterEvents, type WriterLimits } from './writer.js';

/** How a route records (the loaded `routes[].record`). */
export interface RecordSettings extends WriterLimits {
  readonly dir: string;
  readonly frames: 'hashes' | 'payloads';
  readonly channels?: readonly string[] | undefined;
  readonly maxPayloadBytes?: number | undefined;
  readonly rotateBytes: number;
  readonly rotateMs: number;
  readonly redactPaths: readonly string[];
  readonly relay: boolean;
  readonly observer: boolean;
}

/** What a recorder needs of the edge. */
export interface RecorderHost {
  /** Monotonic and wall-clock milliseconds. */
  readonly now: () => number;
  readonly wallNow: () => number;
  readonly isCredential: (value: string) => boolean;
  readonly credentials: () => Iterable<string>;
  readonly maxJsonDepth: number;
  /** Header fields every file carries (the edge's version, the spec revision). */
  readonly header: Readonly<Record<string, unknown>>;
  /**
   * Runs `each` over items in slices of the process's budget per event-loop turn (the edge's
   * transport/sliced-pass.ts), so the tick over a thousand sessions does not hold one turn.
   */
  readonly sliced: <T>(each: (item: T, now: number) => void) => ItemPass<T>;
}

/** A pass over items that may take several turns (see RecorderHost.sliced). */
export interface ItemPass<T> {
  /** Starts one over `items`, unless one is under way. */
  start(items: Iterable<T>): void;
  clear(): void;
}

export type SessionKind = 'relay' | 'observer';

const TICK_MS = 250;

interface Lingering {
  readonly log: SessionLog;
  readonly timer: NodeJS.Timeout;
}

export class RouteRecorder {
  /** Logs of sessions that left this edge, kept open for their reconnect window, by session. */
  private readonly lingering = new Map<string, Lingering>();
  /** The key each lingering log is held under: ending a log finds it without a scan of them all. */
  private readonly lingerKeys = new Map<SessionLog, string>();
  private readonly live = new Set<SessionLog>();
  /** The hub logs (frames delivered to recorded observers, once each), by hub. */
  private readonly hubs = new Map<string, SessionLog>();
  /** Writes the observer sessions' batches of frames when frames stop arriving (SessionLog.tick). */
  private readonly ticker: NodeJS.Timeout | undefined;
  private readonly ticks: ItemPass<SessionLog> | undefined;

  private constructor(
    readonly route: string,
    readonly settings: RecordSettings,
    private readonly host: RecorderHost,
    private readonly writer: RecordingWriter,
  ) {
    if (settings.observer) {
      // A log may end between the pass's start and its turn.
      const tick = (log: SessionLog, now: number) => {
        if (!log.closed) log.tick(now);
      };
      const ticks = (this.ticks = host.sliced(tick));
      this.ticker = setInterval(() => ticks.start(this.live), TICK_MS);
      this.ticker.unref();
    }
  }

  static async open(
    route: string,
    settings: RecordSettings,
    host: RecorderHost,
    events: WriterEvents,
    fs?: RecorderFs,
  ): Promise<RouteRecorder> {
    const writer = await RecordingWriter.open(settings.dir, routePrefix(route), settings, events, fs);
    return new RouteRecorder(route, settings, host, writer);
  }

  records(kind: SessionKind): boolean {
    return kind === 'relay' ? this.settings.relay : this.settings.observer;
  }

  /**
   * The log of a session starting (or resuming) on this edge: the one still open for it, if the session
   * left this edge less than its reconnect window ago, else a new one whose ts_mono_ns 0 is `startedMs`
   * (when the connection's first message arrived; default now).
   */
  session(kind: SessionKind, session_id: string, why: 'opened' | 'resumed', startedMs?: number): SessionLog {
    const key = `${kind}\u0000${session_id}`;
    const held = this.release(key);
    if (held !== undefined) {
      held.log.event({ event: 'session_resumed' }, this.host.now());
      return held.log;
    }
    return this.newLog(
      kind,
      session_id,
      why === 'opened' ? 'session opened' : 'session resumed on this edge',
      startedMs,
    );
  }

  /**
   * The log of the frames `hub` delivered to the observer sessions this route records, each once: their
   * files refer to it (frame-refs.ts). Open while the edge runs.
   */
  hubLog(hub: string): SessionLog {
    let log = this.hubs.get(hub);
    if (log === undefined || log.closed) {
      log = this.newLog('hub', hub, 'frames delivered to recorded observer sessions');
      this.hubs.set(hub, log);
    }
    return log;
  }

  private newLog(
    kind: SessionKind | 'hub',
    session_id: string,
    starts: string,
    startedMs?: number,
  ): SessionLog {
    const s = this.settings;
    const h = this.host;
    const now = h.now();
    const start = Math.min(startedMs ?? now, now);
    const options: SessionLogOptions = {
      route: this.route,
      kind,
      session_id,
      startedWallMs: h.wallNow() - (now - start),
      startedMs: start,
      frames: s.frames,
      channels: s.channels,
      maxPayloadBytes: s.maxPayloadBytes,
      rotateBytes: s.rotateBytes,
      rotateMs: s.rotateMs,
      isCredential: h.isCredential,
      credentials: h.credentials,
      redactPaths: s.redactPaths,
      maxJsonDepth: h.maxJsonDepth,
      header: { ...h.header, starts },
    };
    const log = new SessionLog(options, this.writer);
    this.live.add(log);
    return log;
  }

  /** The session left this edge (`reason`); its log ends unless it resumes here within `lingerMs`. */
  detached(kind: SessionKind, session_id: string, log: SessionLog, reason: string, lingerMs: number): void {
    if (log.closed) return;
    // The world's window, as long as a timer can wait (a longer or negative one would fire at once).
    const keepMs = timerDelay(lingerMs);
    log.event({ event: 'session_detached', reason, kept_open_ms: keepMs }, this.host.now());
    const key = `${kind}\u0000${session_id}`;
    const before = this.release(key);
    if (before !== undefined) this.end(before.log, 'superseded by a newer recording of the session');
    const timer = setTimeout(() => {
      this.release(key);
      this.end(log, 'the session did not resume on this edge within its reconnect window');
    }, keepMs);
    timer.unref();
    this.lingering.set(key, { log, timer });
    this.lingerKeys.set(log, key);
  }

  /** Lets go of the log lingering under `key`, if any (its timer too). */
  private release(key: string): Lingering | undefined {
    const held = this.lingering.get(key);
    if (held === undefined) return undefined;
    clearTimeout(held.timer);
    this.lingering.delete(key);
    this.lingerKeys.delete(held.log);
    return held;
  }

  end(log: SessionLog, reason: string): void {
    const key = this.lingerKeys.get(log);
    if (key !== undefined) this.release(key);
    log.end(reason, this.host.now());
    this.live.delete(log);
  }

  /** Ends every log (`reason`) and writes out what is queued. */
  async close(reason: string): Promise<void> {
    clearInterval(this.ticker);
    this.ticks?.clear();
    for (const key of [...this.lingering.keys()]) this.release(key);
    for (const log of [...this.live]) this.end(log, reason);
    await this.writer.shutdown();
  }

  /** Bytes waiting to be written. */
  get queuedBytes(): number {
    return this.writer.queuedBytes;
  }

  flushed(): Promise<void> {
    return this.writer.flushed();
  }
}
