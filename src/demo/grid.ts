/**
 * The lockstep grid world, shaped like the spec's core-lockstep trace: embodiment `avatar_0` with `move`
 * (instant, one cell) and `walk_to` (extended, one cell per advance, x first), and the per-tick reliable channel
 * `grid_view` carrying `{"avatar":[x,y],"goal":[x,y]}`.
 */
import type { GridConfig } from './config.js';
import { fail } from './failure.js';
import type { ActionRecord } from './session.js';
import type { DemoSim } from './sim.js';
import type { JsonObject } from './types.js';

type Cell = [number, number];

const DIRECTIONS: Readonly<Record<string, Cell>> = {
  north: [0, 1],
  south: [0, -1],
  east: [1, 0],
  west: [-1, 0],
};

const CELL_SCHEMA = { type: 'array', items: { type: 'integer' }, minItems: 2, maxItems: 2 };

/** The optional per-tick camera: the grid seen from above (see renderGrid). */
function cameraChannel(c: GridConfig, px: number): JsonObject {
  return {
    id: 'camera',
    modality: 'image/raw',
    rate_hz: null,
    loss_class: 'latest-wins',
    schema: { width: c.width * px, height: c.height * px, encoding: 'mono8' },
  };
}

export function gridManifest(c: GridConfig): JsonObject {
  const camera = c.cameraCellPx !== undefined ? [cameraChannel(c, c.cameraCellPx)] : [];
  return {
    world: { name: 'gridworld', version: '0.1.0', vendor: 'awp-edge' },
    time_models: ['lockstep'],
    tick_policy: 'on_tick',
    tick_authority: 'any_session',
    // `seed` seeds randomness only (AWP-REP-001); this world has none, so any seed reproduces it.
    capabilities: { seed: true },
    initial_states: ['start'],
    embodiments: [
      {
        id: 'avatar_0',
        kind: 'avatar',
        action_types: ['move', 'walk_to'],
        channels: ['grid_view', ...camera.map((ch) => ch.id as string)],
        description: `a ${c.width}x${c.height} grid; cells outside it are refused`,
      },
    ],
    observation_channels: [
      {
        id: 'grid_view',
        modality: 'text/event+json',
        rate_hz: null,
        loss_class: 'reliable',
        schema: {
          type: 'object',
          properties: { avatar: CELL_SCHEMA, goal: CELL_SCHEMA },
          required: ['avatar', 'goal'],
        },
      },
      ...camera,
    ],
    action_schemas: [
      {
        type: 'move',
        params_schema: {
          type: 'object',
          properties: { direction: { type: 'string', enum: ['north', 'south', 'east', 'west'] } },
          required: ['direction'],
          additionalProperties: false,
        },
        duration: 'instant',
        preemption: 'replace',
        concurrency_group: 'locomotion',
      },
      {
        type: 'walk_to',
        params_schema: {
          type: 'object',
          properties: { cell: CELL_SCHEMA },
          required: ['cell'],
          additionalProperties: false,
        },
        duration: 'extended',
        preemption: ['replace', 'queue'],
        concurrency_group: 'locomotion',
        max_queue: c.maxQueue,
      },
    ],
    safety_policy: { envelopes: [] },
  };
}

function distance(a: Cell, b: Cell): number {
  return Math.abs(a[0] - b[0]) + Math.abs(a[1] - b[1]);
}

export class GridSim implements DemoSim {
  readonly kind = 'grid';
  readonly mode = 'lockstep';
  readonly manifest: JsonObject;
  readonly tickNs: number;
  readonly frameTree = { frames: [{ id: 'world', parent: null }] }; // cells are in `world`
  avatar: Cell;
  readonly goal: Cell;
  private target: Cell | null = null;
  private direction: Cell | null = null;
  private owner: ActionRecord | null = null;
  private startDistance = 0;
  private lastProgress = 0;
  private movedBy: ActionRecord | null = null;

  constructor(private readonly config: GridConfig) {
    this.manifest = gridManifest(config);
    this.tickNs = config.tickNs;
    this.avatar = [config.start[0], config.start[1]];
    this.goal = [config.goal[0], config.goal[1]];
  }

  envelopes(): JsonObject[] {
    return [];
  }

  checkSubmit(type: string, params: JsonObject): void {
    if (type !== 'walk_to') return;
    const [x, y] = params.cell as Cell;
    if (x < 0 || y < 0 || x >= this.config.width || y >= this.config.height) {
      throw fail(
        'AWP_PARAMS_INVALID',
        `cell [${x},${y}] is outside the ${this.config.width}x${this.config.height} grid`,
      );
    }
  }

  start(a: ActionRecord): void {
    this.owner = a;
    this.movedBy = null;
    if (a.type === 'move') {
      this.direction = DIRECTIONS[a.params.direction as string] ?? [0, 0];
      this.target = null;
    } else {
      const [x, y] = a.params.cell as Cell;
      this.target = [x, y];
      this.direction = null;
      this.startDistance = distance(this.avatar, this.target);
      this.lastProgress = this.startDistance === 0 ? 1 : 0;
    }
  }

  stop(): void {
    this.target = null;
    this.direction = null;
  }

  halt(): void {
    this.stop();
  }

  atRest(): boolean {
    return true; // a cell-to-cell avatar stops between advances
  }

  progress(): number {
    return this.lastProgress;
  }

  reached(a: ActionRecord): boolean {
    if (a !== this.owner) return false;
    if (a.type === 'move') return this.movedBy === a;
    const [x, y] = a.params.cell as Cell;
    return this.avatar[0] === x && this.avatar[1] === y;
  }

  step(): void {
    if (this.direction !== null) {
      const x = Math.min(this.config.width - 1, Math.max(0, this.avatar[0] + this.direction[0]));
      const y = Math.min(this.config.height - 1, Math.max(0, this.avatar[1] + this.direction[1]));
      this.avatar = [x, y];
      this.direction = null;
      this.movedBy = this.owner;
      return;
    }
    const t = this.target;
    if (t === null) return;
    if (this.avatar[0] !== t[0])
      this.avatar = [this.avatar[0] + Math.sign(t[0] - this.avatar[0]), this.avatar[1]];
    else if (this.avatar[1] !== t[1])
      this.avatar = [this.avatar[0], this.avatar[1] + Math.sign(t[1] - this.avatar[1])];
    this.lastProgress = this.startDistance === 0 ? 1 : 1 - distance(this.avatar, t) / this.startDistance;
  }

  reset(): void {
    this.stop();
    this.owner = null;
    this.movedBy = null;
    this.lastProgress = 0;
    this.avatar = [this.config.start[0], this.config.start[1]];
  }

  observe(channel?: string): JsonObject | Uint8Array {
    if (channel === 'camera' && this.config.cameraCellPx !== undefined)
      return renderGrid(this.config, this.config.cameraCellPx, this.avatar, this.goal);
    return { avatar: [...this.avatar], goal: [...this.goal] };
  }
}

/** The grid from above (mono8, y up): light cells with dark lines, the goal a grey square, the avatar a dark disc. */
export function renderGrid(c: GridConfig, px: number, avatar: Cell, goal: Cell): Uint8Array {
  const w = c.width * px;
  const h = c.height * px;
  const img = new Uint8Array(w * h).fill(225);
  for (let y = 0; y < h; y++)
    for (let x = 0; x < w; x++)
      if (x % px === 0 || y % px === 0 || x === w - 1 || y === h - 1) img[y * w + x] = 120;
  const cell = ([cx, cy]: Cell, inset: number, v: number, round: boolean) => {
    const x0 = cx * px;
    const y0 = (c.height - 1 - cy) * px;
    const r = px / 2 - inset;
    for (let y = y0 + inset; y < y0 + px - inset; y++)
      for (let x = x0 + inset; x < x0 + px - inset; x++) {
        if (round && (x - x0 - px / 2 + 0.5) ** 2 + (y - y0 - px / 2 + 0.5) ** 2 > r * r) continue;
        img[y * w + x] = v;
      }
  };
  cell(goal, Math.round(px / 6), 160, false);
  cell(avatar, Math.round(px / 5), 25, true);
  return img;
}
