/** Configuration of the demo worlds: timers, channel sizes and rates, kinematics. Every field has a default. */

export interface CommonConfig {
  /** `session.ready.heartbeat_interval_ms`: the world pings this often; 3 silent intervals = lost (AWP-SAF-001/002). */
  readonly heartbeatIntervalMs: number;
  /** How long a suspended session is retained (AWP-SAF-007). */
  readonly reconnectWindowMs: number;
  /** A connection without a session that stays silent this long is closed (AWP-SES-012: SHOULD be >= 15 s). */
  readonly sessionlessIdleMs: number;
  /** RFC 3339 wall time of session-clock 0 (AWP-CLK-002); the server sets it when it starts the world. */
  readonly clockAnchor: string;
  /** Offer the `ws` stream binding at this URL (set by the server); inline only when absent. */
  readonly streamUrl?: string;
  /** Largest frame the `ws` endpoint carries (AWP-TRN-011); omitted from `stream_endpoints` when undefined. */
  readonly maxFrameBytes?: number;
  /** Streaming: progress statuses while executing (AWP-LIF-003 asks for >= 1 Hz). */
  readonly progressIntervalMs: number;
  /** Streaming: `session.telemetry` period (AWP-TIM-006: at least 1/s). */
  readonly telemetryIntervalMs: number;
}

export interface ArmConfig extends CommonConfig {
  readonly watchdogMs: number;
  readonly proprioHz: number;
  readonly cameraHz: number;
  /** Camera frames are `image/raw` mono8: payload = width × height bytes. */
  readonly cameraWidth: number;
  readonly cameraHeight: number;
  readonly stateHz: number;
  /** Keyframe every this many `state` frames; deltas between (AWP-OBS-004). */
  readonly stateKeyframeInterval: number;
  readonly stateStaleAfterMs: number;
  readonly maxActionRateHz: number;
  /** Envelope velocity limit; submissions asking for more are refused. */
  readonly maxVelocityMps: number;
  /** Speed of a move that does not name `max_velocity_mps`. */
  readonly defaultVelocityMps: number;
  readonly accelMps2: number;
  readonly maxAbortMs: number;
  readonly maxDurationMs: number;
  readonly maxQueue: number;
  readonly aabbM: readonly [readonly [number, number, number], readonly [number, number, number]];
  /** Declare and enforce `safety_policy.max_basis_age_ms` (AWP-SAF-013); not declared when undefined. */
  readonly maxBasisAgeMs?: number;
}

export interface GridConfig extends CommonConfig {
  readonly width: number;
  readonly height: number;
  readonly start: readonly [number, number];
  readonly goal: readonly [number, number];
  /** Simulated ns per advance: the lockstep session clock (AWP-TIM-013). */
  readonly tickNs: number;
  readonly maxQueue: number;
  /** A per-tick `camera` channel (image/raw mono8, the grid from above) at this many pixels per cell; none when undefined. */
  readonly cameraCellPx?: number;
}

const COMMON: CommonConfig = {
  heartbeatIntervalMs: 5000,
  reconnectWindowMs: 30000,
  sessionlessIdleMs: 15000,
  clockAnchor: '2026-09-21T09:00:00Z',
  progressIntervalMs: 250,
  telemetryIntervalMs: 1000,
};

export const ARM_DEFAULTS: ArmConfig = {
  ...COMMON,
  watchdogMs: 2000,
  proprioHz: 100,
  cameraHz: 30,
  cameraWidth: 256,
  cameraHeight: 256,
  stateHz: 10,
  stateKeyframeInterval: 10,
  stateStaleAfterMs: 500,
  maxActionRateHz: 10,
  maxVelocityMps: 0.5,
  defaultVelocityMps: 0.25,
  accelMps2: 1,
  maxAbortMs: 1500,
  maxDurationMs: 10000,
  maxQueue: 4,
  aabbM: [
    [-0.5, -0.5, 0],
    [0.5, 0.5, 0.8],
  ],
};

export const GRID_DEFAULTS: GridConfig = {
  ...COMMON,
  width: 5,
  height: 5,
  start: [0, 0],
  goal: [2, 0],
  tickNs: 1_000_000,
  maxQueue: 2,
};

/** Arm options; `cameraBytes` is a shorthand for a 256-pixel-wide mono8 image of at least that many bytes. */
export type ArmOptions = Partial<ArmConfig> & { readonly cameraBytes?: number };
export type GridOptions = Partial<GridConfig>;

export function armConfig(opts: ArmOptions = {}): ArmConfig {
  const { cameraBytes, ...rest } = opts;
  const camera =
    cameraBytes !== undefined
      ? {
          cameraWidth: Math.min(256, Math.max(1, cameraBytes)),
          cameraHeight: Math.max(1, Math.ceil(cameraBytes / 256)),
        }
      : {};
  const c: ArmConfig = { ...ARM_DEFAULTS, ...camera, ...defined(rest) };
  check(c);
  if (c.watchdogMs > c.reconnectWindowMs)
    throw new Error('watchdogMs must be <= reconnectWindowMs (AWP-SAF-003)');
  for (const [k, v] of Object.entries({ proprioHz: c.proprioHz, cameraHz: c.cameraHz, stateHz: c.stateHz })) {
    if (!(v > 0)) throw new Error(`${k} must be > 0`);
  }
  if (c.cameraWidth * c.cameraHeight > 16 * 1024 * 1024 - 64) throw new Error('camera frames above 16 MiB');
  return c;
}

export function gridConfig(opts: GridOptions = {}): GridConfig {
  const c: GridConfig = { ...GRID_DEFAULTS, ...defined(opts) };
  check(c);
  if (!Number.isSafeInteger(c.tickNs) || c.tickNs <= 0) throw new Error('tickNs must be a positive integer');
  return c;
}

function check(c: CommonConfig): void {
  if (!(c.heartbeatIntervalMs >= 100)) throw new Error('heartbeatIntervalMs must be >= 100');
  if (!(c.reconnectWindowMs >= 0)) throw new Error('reconnectWindowMs must be >= 0');
}

/** Drop `undefined` members so that they do not override defaults. */
function defined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
