/**
 * Records an observer session (issue 14). The edge is the world for observers, so what is recorded is
 * what passed on the observer's connections: `agent` (what it sent), `edge_to_agent` (what the edge sent
 * it, frames included, each as delivered to it, with its binding). Its initialize and session.open (or
 * session.resume) came before, on the relay connection: they open the file. The hub's own upstream session
 * is not recorded here.
 *
 * A hub frame is recorded once, in the hub's log, the first time it is delivered to an observer the
 * route records; each observer's file refers to it by its number there (recorder/frame-refs.ts). What a
 * topic shard publishes to a recorded member is read from the shard's log of numbers when the session
 * next writes (FrameTap.follow), not told one frame at a time.
 */
import type { FrameTap, ObserverTap, SharedReader } from '../fanout/observer-tap.js';
import type { HubFrame } from '../fanout/keyframe-cache.js';
import { createFrameHeader, peekFrame } from '../protocol/frame.js';
import { binaryFrameBody, type FrameBody } from '../recorder/frame-body.js';
import type { RouteRecorder } from '../recorder/io/route-recorder.js';
import type { SessionLog, SharedFrame } from '../recorder/session-log.js';
import type { EdgeContext } from './context.js';
import { preambleOf } from './relay-recording.js';
import type { RouteRuntime } from './route.js';

/** The tap of an agent connection on `route`, if the route records observer sessions. */
export function observerRecording(
  ctx: EdgeContext,
  route: RouteRuntime,
  conn: object,
): ObserverTap | undefined {
  const recorder = ctx.recorders.get(route.name);
  return recorder?.records('observer') === true ? new ObserverRecording(recorder, ctx.now, conn) : undefined;
}

/** A hub frame as its hub log records it: numbered, its payload hashed once. */
class Numbered implements SharedFrame {
  readonly channel_id: number;
  readonly payloadBytes: number;

  constructor(
    private readonly frame: HubFrame,
    private readonly n: number,
  ) {
    this.channel_id = frame.channel_id;
    this.payloadBytes = peekFrame(frame.buf, header).payload_len;
  }

  body(keep: boolean): FrameBody {
    const h = peekFrame(this.frame.buf, header);
    return binaryFrameBody('obs.frame', this.frame.buf, h, undefined, keep, undefined, this.n);
  }
}

const header = createFrameHeader();

/** A hub's log and the numbers it gave the frames it holds. */
class HubFrames {
  private next = 0;
  private readonly numbers = new WeakMap<HubFrame, number>();

  /** What observers' files name it by: its first file (frames are numbered across its segments). */
  readonly file: string;

  constructor(readonly log: SessionLog) {
    this.file = log.firstFile;
  }

  /** The frame's number in the log, recorded there on its first delivery to a recorded observer. */
  number(frame: HubFrame, nowMs: number, channelName: string | undefined): number {
    let n = this.numbers.get(frame);
    if (n === undefined) {
      n = this.next++;
      this.numbers.set(frame, n);
      this.log.sharedFrame('world', new Numbered(frame, n), nowMs, channelName);
    }
    return n;
  }
}

const hubs = new WeakMap<SessionLog, HubFrames>();

/**
 * The frame being fanned out: the hub hands it to every observer in turn, so its number and time are
 * looked up once, not once per observer.
 */
let current: { frame: HubFrame; hub: HubFrames; n: number; at: number } | undefined;

function hubFrames(recorder: RouteRecorder, hub: string): HubFrames {
  const log = recorder.hubLog(hub);
  let h = hubs.get(log);
  if (h === undefined) hubs.set(log, (h = new HubFrames(log)));
  return h;
}

/** `"reconnect_window_ms":30000` in the session.ready the edge sent: how long a detached log waits. */
const WINDOW = /"reconnect_window_ms":(\d+)/;
const DEFAULT_WINDOW_MS = 60_000;

class ObserverRecording implements ObserverTap {
  private log: SessionLog | undefined;
  private hub = '';
  private session_id = '';
  private windowMs = DEFAULT_WINDOW_MS;
  /** Whether the session.ready was seen (then `sent` stops looking for its reconnect window). */
  private ready = false;
  /** The topic shards the session's channels are members of, by channel. */
  private readonly readers = new Map<number, SharedReader>();
  private reading = false;

  constructor(
    private readonly recorder: RouteRecorder,
    private readonly now: () => number,
    private readonly conn: object,
  ) {}

  attached(session_id: string, hub: string): FrameTap | undefined {
    const preamble = preambleOf(this.conn);
    const resumed = preamble.some((p) => p.direction === 'agent' && p.text.includes('"session.resume"'));
    const log = this.recorder.session(
      'observer',
      session_id,
      resumed ? 'resumed' : 'opened',
      preamble[0]?.at,
    );
    for (const p of preamble) log.text(p.direction, p.text, p.at);
    this.log = log;
    this.hub = hub;
    this.session_id = session_id;
    log.pendingFrames = () => this.readShared();
    return {
      delivered: (frame, onStream) => this.frame(frame, onStream),
      shared: (frame) => this.numbered(frame).n,
      follow: (channel_id, reader) => {
        if (reader !== undefined) return void this.readers.set(channel_id, reader);
        this.readShared();
        this.readers.delete(channel_id);
      },
    };
  }

  fromAgent(text: string): void {
    this.log?.message('agent', text, this.now());
  }

  sent(text: string, numbersOnly = false): void {
    const log = this.log;
    if (log === undefined) return;
    if (numbersOnly) return log.sentNumbers('edge_to_agent', text, this.now());
    const m = this.ready ? null : WINDOW.exec(text);
    if (m !== null) {
      this.windowMs = Number(m[1]);
      this.ready = true;
    }
    log.sent('edge_to_agent', text, this.now());
  }

  released(): void {
    if (this.log === undefined) return;
    this.recorder.detached('observer', this.session_id, this.log, 'connection released', this.windowMs);
  }

  ended(): void {
    if (this.log !== undefined) this.recorder.end(this.log, 'session ended');
    this.log = undefined;
  }

  private frame(frame: HubFrame, onStream: boolean): void {
    const log = this.log;
    if (log === undefined) return;
    this.readShared();
    const c = this.numbered(frame);
    log.frameRef('edge_to_agent', c.hub.file, onStream ? 'ws' : 'inline', c.n, c.at);
  }

  /** The frame's number in the hub log, and when it was first delivered. */
  private numbered(frame: HubFrame): NonNullable<typeof current> {
    let c = current;
    if (c?.frame !== frame) {
      const at = this.now();
      const hub = hubFrames(this.recorder, this.hub);
      c = current = { frame, hub, n: hub.number(frame, at, this.log?.channelName(frame.channel_id)), at };
    }
    return c;
  }

  /**
   * What the session's topic shards published to it since the last read, in order of delivery (by time,
   * then by number: a shard's publish is numbered when it is made). Called before every record and every
   * frame delivered one observer at a time, so it copies nothing: several shards are merged by reading
   * each up to the next entry of the others (allocation profile, 1,000 observers of two channels: the
   * merge's arrays were a fifth of what the recording edge allocated).
   */
  private readShared(): void {
    const log = this.log;
    if (log === undefined || this.reading || !this.waiting()) return;
    this.reading = true;
    try {
      let file: string | undefined;
      let read = 0;
      const ref = (n: number, at: number) => {
        read++;
        log.frameRef('edge_to_agent', (file ??= hubFrames(this.recorder, this.hub).file), 'ws', n, at);
      };
      let lost = 0;
      for (;;) {
        let best: SharedReader | undefined;
        let nextAt = Infinity;
        let nextN = Infinity;
        for (const r of this.readers.values()) {
          if (!r.waiting) continue;
          if (best === undefined || before(r, best.nextAt, best.nextN)) {
            if (best !== undefined) {
              nextAt = best.nextAt;
              nextN = best.nextN;
            }
            best = r;
          } else if (before(r, nextAt, nextN)) {
            nextAt = r.nextAt;
            nextN = r.nextN;
          }
        }
        if (best === undefined) break;
        const was = read;
        lost += best.read(ref, nextAt, nextN);
        if (read === was) break; // two shards holding one frame (never made): stop rather than spin
      }
      if (lost > 0) log.event({ event: 'frames_unrecorded', frames: lost }, this.now());
    } finally {
      this.reading = false;
    }
  }

  private waiting(): boolean {
    for (const r of this.readers.values()) if (r.waiting) return true;
    return false;
  }
}

/** Whether `r`'s next entry comes before (at, n). */
function before(r: SharedReader, at: number, n: number): boolean {
  return r.nextAt < at || (r.nextAt === at && r.nextN < n);
}
