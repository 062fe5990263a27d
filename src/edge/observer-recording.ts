/**
 * Records an observer session (issue 14). The edge is the world for observers, so what is recorded is
 * what passed on the observer's connections: `agent` (what it sent), `edge_to_agent` (what the edge sent
 * it, frames included, each as delivered to it, with its binding). Its initialize and session.open (or
 * session.resume) came before, on the relay connection: they open the file. The hub's own upstream session
 * is not recorded here.
 *
 * A frame's record bodies are built once per hub frame, for every observer that records it (the hub's
 * buffers are shared): the payload is hashed once, not once per observer.
 */
import type { FrameTap, ObserverTap } from '../fanout/observer-tap.js';
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

/** A hub frame's record bodies for one binding, built on first use, with the time it was first recorded. */
class Bodies implements SharedFrame {
  readonly payloadBytes: number;
  private hashOnly: FrameBody | undefined;
  private withPayload: FrameBody | undefined;
  /** When the first observer recorded it (the fan-out of one frame is one pass). */
  at = -1;

  constructor(
    private readonly frame: HubFrame,
    readonly channel_id: number,
    private readonly stream: boolean,
  ) {
    this.payloadBytes = peekFrame(frame.buf, header).payload_len;
  }

  body(keep: boolean): FrameBody {
    if (keep) return (this.withPayload ??= this.build(true));
    return (this.hashOnly ??= this.build(false));
  }

  private build(keep: boolean): FrameBody {
    const h = peekFrame(this.frame.buf, header);
    const binding = this.stream ? 'ws' : 'inline';
    const known = this.hashOnly?.payloadSha256 ?? this.withPayload?.payloadSha256;
    return binaryFrameBody('obs.frame', this.frame.buf, h, binding, keep, known);
  }
}

const header = createFrameHeader();
/** Record bodies per hub frame and binding (inline, stream), built on first use. */
const shared = new WeakMap<HubFrame, { inline?: Bodies; stream?: Bodies }>();

function bodiesOf(frame: HubFrame, stream: boolean): Bodies {
  let entry = shared.get(frame);
  if (entry === undefined) shared.set(frame, (entry = {}));
  return stream
    ? (entry.stream ??= new Bodies(frame, frame.channel_id, true))
    : (entry.inline ??= new Bodies(frame, frame.channel_id, false));
}

/** `"reconnect_window_ms":30000` in the session.ready the edge sent: how long a detached log waits. */
const WINDOW = /"reconnect_window_ms":(\d+)/;
const DEFAULT_WINDOW_MS = 60_000;

class ObserverRecording implements ObserverTap {
  private log: SessionLog | undefined;
  private session_id = '';
  private windowMs = DEFAULT_WINDOW_MS;

  constructor(
    private readonly recorder: RouteRecorder,
    private readonly now: () => number,
    private readonly conn: object,
  ) {}

  attached(session_id: string): FrameTap | undefined {
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
    this.session_id = session_id;
    return (frame, onStream) => this.frame(frame, onStream);
  }

  fromAgent(text: string): void {
    this.log?.message('agent', text, this.now());
  }

  sent(text: string): void {
    const m = this.windowMs === DEFAULT_WINDOW_MS ? WINDOW.exec(text) : null;
    if (m !== null) this.windowMs = Number(m[1]);
    this.log?.sent('edge_to_agent', text, this.now());
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
    const b = bodiesOf(frame, onStream);
    if (b.at < 0) b.at = this.now();
    log.sharedFrame('edge_to_agent', b, b.at);
  }
}
