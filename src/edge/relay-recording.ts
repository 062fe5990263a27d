/**
 * Records a relay connection (issue 14): what the agent sent (`agent`), what the world sent (`world`),
 * and what the edge sent each of them (`edge_to_world`, `edge_to_agent`), each as that side saw it, so
 * the edge's rewrites (tokens, stream endpoints, acknowledgements) show as the difference; frames once, as
 * their sender sent them; the edge's own decisions (messages not relayed, refusals, closes) as `edge`
 * records. Messages before the connection holds a session (initialize, a refused open) wait, bounded, and
 * open its file; a connection that never holds one is not recorded.
 */
import type { FrameHeader } from '../protocol/frame.js';
import type { RelayEffect } from '../relay/relay-effects.js';
import type { RelaySession } from '../relay/relay-session.js';
import { reconnectWindow } from '../relay/io/session-registry.js';
import type { Direction } from '../recorder/record.js';
import type { RouteRecorder } from '../recorder/io/route-recorder.js';
import type { SessionLog } from '../recorder/session-log.js';
import type { EdgeContext } from './context.js';
import type { RouteRuntime } from './route.js';

/** Messages held before the connection has a session (awp-sim holds 256 as well). */
const PREAMBLE_LIMIT = 256;

/** The recording of each relay session with a stream connection's frames to record (see recordFrame). */
const bySession = new WeakMap<RelaySession, SessionLog>();

/** A relay agent's stream connection frame, for the recording of its session (if it is recorded). */
export function recordRelayFrame(
  now: number,
  session: RelaySession,
  from: 'agent' | 'world',
  buf: Uint8Array,
  h: FrameHeader,
  binding: string,
): void {
  bySession.get(session)?.frame(from, from === 'agent' ? 'cmd.frame' : 'obs.frame', buf, h, binding, now);
}

/** What a connection said before it carried a session, by connection (an observer session takes it over). */
const byConnection = new WeakMap<object, RelayRecording>();

/**
 * The recording of a relay connection on `route`, if the route records relay sessions or observer
 * sessions (those start on the relay connection: its initialize and session.open come first).
 */
export function relayRecording(
  ctx: EdgeContext,
  route: RouteRuntime,
  conn: object,
): RelayRecording | undefined {
  const recorder = ctx.recorders.get(route.name);
  if (recorder === undefined || (!recorder.records('relay') && !recorder.records('observer')))
    return undefined;
  const r = new RelayRecording(recorder, ctx.now, recorder.records('relay'));
  byConnection.set(conn, r);
  return r;
}

/** What the connection's relay shell held before any session: for the observer session opened on it. */
export function preambleOf(conn: object): Preamble {
  return byConnection.get(conn)?.takePreamble() ?? [];
}

export type Preamble = readonly {
  readonly direction: Direction;
  readonly text: string;
  readonly at: number;
}[];

export class RelayRecording {
  private log: SessionLog | undefined;
  private session: RelaySession | undefined;
  private preamble: { direction: Direction; text: string; at: number }[] = [];
  private preambleDropped = 0;
  /** Why the session ended; its file stays open for what follows on the connection (the close's result). */
  private endedBecause: string | undefined;

  constructor(
    private readonly recorder: RouteRecorder,
    private readonly now: () => number,
    /** Whether relay sessions are recorded (else only the preamble is kept, for an observer session). */
    private readonly relay: boolean,
  ) {}

  /** The messages held before a session, handed over (to an observer session's recording). */
  takePreamble(): Preamble {
    const p = this.preamble;
    this.preamble = [];
    return p;
  }

  fromAgent(text: string): void {
    this.message('agent', text);
  }

  fromWorld(text: string): void {
    this.message('world', text);
  }

  /** An effect the relay shell carries out now (called in the order they are applied). */
  effect(e: RelayEffect): void {
    switch (e.kind) {
      case 'to-agent':
        if (e.frame === undefined) this.message('edge_to_agent', e.text); // frames: as the world sent them
        return;
      case 'to-upstream':
        if (e.frame === undefined) this.message('edge_to_world', e.text); // frames: as the agent sent them
        return;
      case 'session-created':
      case 'session-attached':
        return this.attach(e.session, e.kind === 'session-created' ? 'opened' : 'resumed');
      case 'session-detached':
        if (this.log !== undefined) {
          const s = e.session;
          this.recorder.detached(
            'relay',
            s.record.session_id,
            this.log,
            e.reason,
            reconnectWindow(s.record), // as long as the registry keeps the session
          );
        }
        return this.detach();
      case 'session-ended':
        this.event({ event: 'session_ended', reason: e.reason });
        this.endedBecause = e.reason;
        return;
      case 'dropped':
        return this.event({ event: 'not_relayed', from: e.from, reason: e.reason, detail: e.detail });
      case 'rejected':
        return this.event({ event: 'refused', reason: e.reason });
      case 'close-agent':
      case 'close-upstream': {
        const side = e.kind === 'close-agent' ? 'agent' : 'world';
        return this.event({ event: 'connection_closed_by_edge', side, code: e.code, reason: e.reason });
      }
      default:
        return;
    }
  }

  /** The agent's connection is gone (its effects have been applied): a session that ended there ends here. */
  agentLost(): void {
    this.finish();
    this.preamble = [];
  }

  private finish(): void {
    if (this.log !== undefined && this.endedBecause !== undefined)
      this.recorder.end(this.log, this.endedBecause);
    if (this.endedBecause !== undefined) this.detach();
    this.endedBecause = undefined;
  }

  private message(direction: Direction, text: string): void {
    if (this.log !== undefined) return this.log.text(direction, text, this.now());
    if (this.preamble.length < PREAMBLE_LIMIT) this.preamble.push({ direction, text, at: this.now() });
    else this.preambleDropped++;
  }

  private event(body: Record<string, unknown>): void {
    this.log?.event(body, this.now());
  }

  private attach(session: RelaySession, why: 'opened' | 'resumed'): void {
    this.finish(); // a session that ended on this connection before
    if (this.log !== undefined || !this.relay) return;
    const first = this.preamble[0]?.at;
    const log = this.recorder.session('relay', session.record.session_id, why, first);
    this.log = log;
    this.session = session;
    bySession.set(session, log);
    for (const p of this.preamble) log.text(p.direction, p.text, p.at);
    if (this.preambleDropped > 0)
      log.event(
        { event: 'not_recorded', reason: 'before the session', messages: this.preambleDropped },
        this.now(),
      );
    this.preamble = [];
    this.preambleDropped = 0;
  }

  private detach(): void {
    if (this.session !== undefined) bySession.delete(this.session);
    this.log = undefined;
    this.session = undefined;
  }
}
