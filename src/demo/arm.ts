/**
 * The streaming arm world, shaped like the spec's core-streaming trace: embodiment `arm_01` with `move_to_pose`
 * (extended) and `stop` (instant); channels `proprio` (latest-wins, 100 Hz), `camera` (latest-wins `image/raw`
 * of configurable size and rate) and `state` (reliable, keyframes + deltas). The kinematics are deliberately
 * trivial — straight lines at bounded speed and acceleration — so that moves and aborts take real time.
 */
import type { ArmConfig } from './config.js';
import { fail } from './failure.js';
import type { ActionRecord } from './session.js';
import type { DemoSim } from './sim.js';
import type { JsonObject } from './types.js';
import { S } from './types.js';

type Vec3 = [number, number, number];

const HOME: Vec3 = [0, 0, 0.4];
const POSE_REF = 'https://agentworldprotocol.com/schemas/v0.1/common.schema.json#/$defs/pose';

export function armEnvelope(c: ArmConfig): JsonObject {
  return {
    embodiment: 'arm_01',
    spatial: { frame: 'base', aabb_m: [[...c.aabbM[0]], [...c.aabbM[1]]] },
    max_velocity_mps: c.maxVelocityMps,
    max_action_rate_hz: c.maxActionRateHz,
    enforcement: 'command_check',
    on_violation: 'reject',
  };
}

export function armManifest(c: ArmConfig): JsonObject {
  const safety: JsonObject = {
    envelopes: [armEnvelope(c)],
    safe_state: { behavior: 'safe_stop', watchdog_ms: c.watchdogMs },
  };
  if (c.maxBasisAgeMs !== undefined) safety.max_basis_age_ms = c.maxBasisAgeMs;
  return {
    world: { name: 'arm-demo', version: '0.1.0', vendor: 'awp-edge' },
    time_models: ['streaming'],
    capabilities: {},
    embodiments: [
      {
        id: 'arm_01',
        kind: 'manipulator',
        action_types: ['move_to_pose', 'stop'],
        channels: ['proprio', 'camera', 'state'],
      },
    ],
    observation_channels: [
      {
        id: 'proprio',
        modality: 'proprio/json',
        rate_hz: c.proprioHz,
        loss_class: 'latest-wins',
        stale_after_ms: Math.max(1, Math.round(5000 / c.proprioHz)),
        schema: { fields: ['p_m', 'v_mps'], frame: 'base' },
      },
      {
        id: 'camera',
        modality: 'image/raw',
        rate_hz: c.cameraHz,
        loss_class: 'latest-wins',
        stale_after_ms: Math.max(1, Math.round(3000 / c.cameraHz)),
        schema: { width: c.cameraWidth, height: c.cameraHeight, encoding: 'mono8' },
      },
      {
        id: 'state',
        modality: 'text/event+json',
        rate_hz: c.stateHz,
        loss_class: 'reliable',
        keyframe_interval: c.stateKeyframeInterval,
        stale_after_ms: c.stateStaleAfterMs,
        schema: {
          description: 'keyframes carry every member; deltas only the members that changed',
          type: 'object',
          properties: {
            phase: { enum: ['idle', 'moving', 'stopping'] },
            p_m: { type: 'array', items: { type: 'number' }, minItems: 3, maxItems: 3 },
            target_m: { type: ['array', 'null'] },
            action_id: { type: ['string', 'null'] },
          },
        },
      },
    ],
    action_schemas: [
      {
        type: 'move_to_pose',
        params_schema: { $ref: '#/$defs/move_to_pose_params' },
        duration: 'extended',
        preemption: ['replace', 'queue'],
        concurrency_group: 'arm_motion',
        max_queue: c.maxQueue,
        max_abort_ms: c.maxAbortMs,
        max_duration_ms: c.maxDurationMs,
      },
      {
        type: 'stop',
        params_schema: { type: 'object', additionalProperties: false },
        duration: 'instant',
        preemption: 'replace',
        concurrency_group: 'arm_motion',
      },
    ],
    safety_policy: safety,
    $defs: {
      move_to_pose_params: {
        type: 'object',
        properties: { pose: { $ref: POSE_REF }, max_velocity_mps: { type: 'number', exclusiveMinimum: 0 } },
        required: ['pose'],
        additionalProperties: false,
      },
    },
  };
}

const FRAME_TREE = {
  frames: [
    { id: 'world', parent: null },
    { id: 'base', parent: 'world', transform: { p_m: [0, 0, 0.75], q: [0, 0, 0, 1] } },
  ],
};

function round(v: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(v * f) / f;
}

export class ArmSim implements DemoSim {
  readonly kind = 'arm';
  readonly mode = 'streaming';
  readonly manifest: JsonObject;
  readonly frameTree = FRAME_TREE;
  readonly safeBehavior = 'safe_stop';
  position: Vec3 = [...HOME];
  speed = 0;
  phase: 'idle' | 'moving' | 'stopping' = 'idle';
  private from: Vec3 = [...HOME];
  private target: Vec3 | null = null;
  private length = 0;
  private travelled = 0;
  private vMax = 0;
  private owner: ActionRecord | null = null;
  private camera: { index: number; bytes: Uint8Array } | null = null;
  private readonly cameraPeriodNs: number;

  constructor(private readonly config: ArmConfig) {
    this.manifest = armManifest(config);
    this.cameraPeriodNs = Math.round(S / config.cameraHz);
  }

  envelopes(): JsonObject[] {
    return [armEnvelope(this.config)];
  }

  checkSubmit(type: string, params: JsonObject): void {
    if (type !== 'move_to_pose') return;
    const pose = params.pose as { frame: string; p_m: number[] };
    if (pose.frame !== 'base') throw fail('AWP_PARAMS_INVALID', 'pose.frame must be base');
    const [lo, hi] = this.config.aabbM;
    if (!pose.p_m.every((v, i) => v >= lo[i]! && v <= hi[i]!)) {
      throw fail('AWP_ENVELOPE_EXCEEDED', 'target outside the spatial envelope', { retryable: false });
    }
    const v = params.max_velocity_mps;
    if (typeof v === 'number' && v > this.config.maxVelocityMps) {
      throw fail('AWP_ENVELOPE_EXCEEDED', 'max_velocity_mps above the envelope', { retryable: false });
    }
  }

  start(a: ActionRecord): void {
    if (a.type === 'stop') {
      this.owner = null;
      this.stop();
      return;
    }
    const pose = a.params.pose as { p_m: [number, number, number] };
    this.owner = a;
    this.from = [...this.position];
    this.target = [...pose.p_m];
    this.length = Math.hypot(...this.target.map((t, i) => t - this.position[i]!));
    this.travelled = 0;
    this.vMax = (a.params.max_velocity_mps as number | undefined) ?? this.config.defaultVelocityMps;
    this.phase = this.length > 0 ? 'moving' : 'idle';
  }

  stop(): void {
    if (this.phase === 'moving' || this.speed > 0) this.phase = 'stopping';
  }

  halt(): void {
    this.speed = 0;
    this.phase = 'idle';
  }

  atRest(): boolean {
    return this.speed === 0 && this.phase !== 'moving';
  }

  progress(): number {
    if (this.length === 0) return this.target === null ? 0 : 1;
    return Math.min(1, this.travelled / this.length);
  }

  reached(a: ActionRecord): boolean {
    return a === this.owner && this.phase === 'idle' && this.length - this.travelled <= 1e-9;
  }

  step(dtNs: number): void {
    const dt = dtNs / S;
    if (dt <= 0 || this.target === null) return;
    const accel = this.config.accelMps2;
    const remaining = this.length - this.travelled;
    if (this.phase === 'moving') {
      const brake = Math.sqrt(2 * accel * Math.max(remaining, 0)); // decelerate into the goal
      this.speed = Math.min(this.speed + accel * dt, this.vMax, Math.max(brake, accel * dt));
      this.advance(Math.min(this.speed * dt, remaining));
      if (this.length - this.travelled <= 1e-9) {
        this.speed = 0;
        this.phase = 'idle';
      }
    } else if (this.phase === 'stopping') {
      const next = Math.max(0, this.speed - accel * dt);
      this.advance(Math.min(((this.speed + next) / 2) * dt, remaining));
      this.speed = this.length - this.travelled > 1e-9 ? next : 0;
      if (this.speed === 0) this.phase = 'idle';
    }
  }

  private advance(d: number): void {
    const t = this.target!;
    this.travelled += d;
    const f = this.length === 0 ? 0 : this.travelled / this.length;
    this.position = [0, 1, 2].map((i) => this.from[i]! + (t[i]! - this.from[i]!) * f) as Vec3;
  }

  velocity(): Vec3 {
    if (this.target === null || this.length === 0 || this.speed === 0) return [0, 0, 0];
    const t = this.target;
    return [0, 1, 2].map((i) => ((t[i]! - this.from[i]!) / this.length) * this.speed) as Vec3;
  }

  observe(channel: string, clockNs: number): JsonObject | Uint8Array {
    if (channel === 'proprio') {
      return { p_m: this.position.map((v) => round(v, 6)), v_mps: this.velocity().map((v) => round(v, 6)) };
    }
    if (channel === 'camera') return this.cameraFrame(clockNs);
    return {
      phase: this.phase,
      p_m: this.position.map((v) => round(v, 4)),
      target_m: this.phase === 'idle' || this.target === null ? null : [...this.target],
      action_id: this.phase === 'moving' && this.owner !== null ? this.owner.action_id : null,
    };
  }

  /** One capture per camera period, shared by every subscriber; a fresh buffer each time (frames in flight keep theirs). */
  private cameraFrame(clockNs: number): Uint8Array {
    const index = Math.floor(clockNs / this.cameraPeriodNs);
    if (this.camera?.index !== index) {
      const bytes = renderTopView(this.config, this.position, this.phase === 'idle' ? null : this.target);
      if (bytes.length >= 4) new DataView(bytes.buffer).setUint32(0, index >>> 0, true); // capture number
      this.camera = { index, bytes };
    }
    return this.camera.bytes;
  }
}

/**
 * The camera's picture: the workspace seen from above (mono8, y up), with a 0.1 m floor grid, the base, the
 * link to the end effector, the effector as a disc that grows with its height, and the target while moving.
 */
export function renderTopView(
  c: ArmConfig,
  p: readonly number[],
  target: readonly number[] | null,
): Uint8Array {
  const w = c.cameraWidth;
  const h = c.cameraHeight;
  const img = new Uint8Array(w * h).fill(60);
  const [lo, hi] = c.aabbM;
  const sx = w / (hi[0] - lo[0]);
  const sy = h / (hi[1] - lo[1]);
  const px = (x: number) => (x - lo[0]) * sx;
  const py = (y: number) => (hi[1] - y) * sy;
  for (let g = Math.ceil(lo[0] * 10); g <= hi[0] * 10; g++) {
    const x = Math.round(px(g / 10));
    if (x >= 0 && x < w) for (let y = 0; y < h; y++) img[y * w + x] = 85;
  }
  for (let g = Math.ceil(lo[1] * 10); g <= hi[1] * 10; g++) {
    const y = Math.round(py(g / 10));
    if (y >= 0 && y < h) img.fill(85, y * w, y * w + w);
  }
  const disc = (cx: number, cy: number, r: number, v: number) => {
    for (let y = Math.max(0, Math.floor(cy - r)); y <= Math.min(h - 1, Math.ceil(cy + r)); y++)
      for (let x = Math.max(0, Math.floor(cx - r)); x <= Math.min(w - 1, Math.ceil(cx + r)); x++)
        if ((x - cx) ** 2 + (y - cy) ** 2 <= r * r) img[y * w + x] = v;
  };
  const scale = Math.min(sx, sy);
  if (target !== null) {
    const [tx, ty] = [px(target[0]!), py(target[1]!)];
    for (let d = -6; d <= 6; d++) {
      disc(tx + d, ty + d, 1, 235);
      disc(tx + d, ty - d, 1, 235);
    }
  }
  const [bx, by] = [px(0), py(0)];
  const [ex, ey] = [px(p[0]!), py(p[1]!)];
  disc(bx, by, 0.07 * scale, 150);
  const steps = Math.max(1, Math.ceil(Math.hypot(ex - bx, ey - by)));
  for (let i = 0; i <= steps; i++)
    disc(bx + ((ex - bx) * i) / steps, by + ((ey - by) * i) / steps, 0.015 * scale, 190);
  const z = Math.min(1, Math.max(0, (p[2]! - lo[2]) / (hi[2] - lo[2])));
  disc(ex, ey, (0.03 + 0.05 * z) * scale, 255);
  return img;
}
