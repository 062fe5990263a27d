// What the suite and the scenario agents talk to: the world itself (the baseline) or, later, the
// edge in front of it. A through-edge variant is one more TargetFactory: it starts the edge on
// 127.0.0.1 with the world as its upstream and returns the edge's URL and agent-facing token.
import type { World } from './world.js';

export interface Target {
  readonly name: string;
  /** The URL agents dial, e.g. ws://127.0.0.1:PORT. */
  readonly url: string;
  /** The bearer token agents present at `url`. */
  readonly token: string;
  /** Stop whatever `open` started (nothing for `direct`). Idempotent. */
  close(): Promise<void>;
}

export interface TargetFactory {
  /** `direct`, `edge`, ...: also the results sub-folder. */
  readonly name: string;
  /**
   * Put the target in front of a running world. `dir` is this case's results folder, for the
   * target's own logs. The world's audit log, e-stop pid and approver token stay the world's:
   * the suite still reads `world.auditDir` and signals `world.pid`.
   */
  open(world: World, dir: string): Promise<Target>;
}

/** The baseline: agents dial the world directly. */
export const direct: TargetFactory = {
  name: 'direct',
  open: (world) =>
    Promise.resolve({ name: 'direct', url: world.url, token: world.token, close: () => Promise.resolve() }),
};
