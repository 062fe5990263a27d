/**
 * What a demo world adds to the shared session machinery: its manifest and the simulated body its actions
 * drive. One body per world (one embodiment), so "the running motion" is unambiguous.
 */
import type { ActionRecord } from './session.js';
import type { JsonObject, TimeModel } from './types.js';

export interface DemoSim {
  readonly kind: 'grid' | 'arm';
  readonly mode: TimeModel;
  /** The world manifest (without `protocol_version`, which the world adds). Stable for the process's life. */
  readonly manifest: JsonObject;
  readonly frameTree?: JsonObject;
  /** `safety_policy.safe_state.behavior` (streaming worlds). */
  readonly safeBehavior?: string;
  /** Simulated ns per advance (lockstep worlds). */
  readonly tickNs?: number;
  /** Envelopes granted to a session bound to `embodiment` (AWP-NEG-001). */
  envelopes(embodiment: string): JsonObject[];
  /** Envelope checks on a submission that passed its params schema; throws RpcFailure (AWP-ENV-002). */
  checkSubmit(type: string, params: JsonObject): void;
  /** The action starts executing: begin its motion (or its stop). */
  start(a: ActionRecord): void;
  /** Begin the safe abort: decelerate to rest. */
  stop(): void;
  /** Stop at once (e-stop). */
  halt(): void;
  atRest(): boolean;
  /** Progress of the current motion in [0, 1]. */
  progress(): number;
  /** Whether the motion `a` started has reached its goal. */
  reached(a: ActionRecord): boolean;
  /** Advance the simulation by `dtNs` (streaming: elapsed time; lockstep: one tick). */
  step(dtNs: number): void;
  /** The current observation on `channel`: a JSON document, or raw bytes for binary modalities. */
  observe(channel: string, clockNs: number): JsonObject | Uint8Array;
  /** Put the world in one of the manifest's `initial_states` (AWP-SIM-001); absent = no `world.reset`. */
  reset?(initialState: string): void;
}
