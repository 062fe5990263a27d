/**
 * Shapes shared by the demo worlds' sans-IO core and the server that drives it. The core never touches a
 * socket: the server hands it events (with the current time in ns) and performs the outputs it returns.
 */
import type { ActionState as LifecycleState } from '../protocol/lifecycle.js';
import { isTerminalState, stateClass } from '../protocol/lifecycle.js';

/** A connection id, chosen by the server; control and stream connections share one id space. */
export type ConnId = number;

export type JsonObject = Record<string, unknown>;

/** One JSON-RPC message to send as one text message on a control connection. */
export interface TextOutput {
  readonly kind: 'text';
  readonly conn: ConnId;
  readonly msg: JsonObject;
}

/**
 * An observation frame. `binding: 'inline'` goes out as `obs.frame` on the control connection `conn`;
 * `'ws'` as one binary message on the stream connection `conn`. `latestWins` frames may be replaced by a
 * newer frame of the same channel while still pending (AWP-TRN-009); others never are. `ts_send_ns` is
 * stamped when the frame is handed to the transport: see `DemoWorld.encodeFrame`.
 */
export interface FrameOutput {
  readonly kind: 'frame';
  readonly conn: ConnId;
  readonly session: string;
  readonly binding: 'inline' | 'ws';
  readonly latestWins: boolean;
  readonly frame: DemoFrame;
}

/** Close a connection (after everything queued before it was sent). */
export interface CloseOutput {
  readonly kind: 'close';
  readonly conn: ConnId;
  readonly code: number;
  readonly reason: string;
}

export type Output = TextOutput | FrameOutput | CloseOutput;

/** A frame as the world builds it (field names as in the binary header and the inline form). */
export interface DemoFrame {
  readonly channel_id: number;
  readonly seq: number;
  readonly ts_mono_ns: number;
  readonly flags: number;
  readonly tick?: number;
  readonly ts_sim_ns?: number;
  readonly ts_send_ns?: number;
  readonly payload: Uint8Array;
}

export type TimeModel = 'lockstep' | 'streaming';

/** Action states on the wire (`submitted` never is). */
export type ActionState = Exclude<LifecycleState, 'submitted'>;

export function isTerminal(state: ActionState): boolean {
  return isTerminalState(state);
}

/** pending_approval, queued, accepted. */
export function isPreExecution(state: ActionState): boolean {
  return stateClass(state) === 'pre-execution';
}

export const MS = 1_000_000;
export const S = 1_000_000_000;
