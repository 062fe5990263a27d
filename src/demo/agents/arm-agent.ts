/**
 * The demo's arm agent: moves `arm_01` between reachable poses (inside the world's spatial envelope), one
 * `move_to_pose` after another, so the viewer shows motion from the start.
 */
import { keepRunning, type DemoAgent, type DemoAgentOptions, type Reached } from './agent.js';
import { RpcError, framePayload, sleep, type Json } from './connection.js';

/** Poses inside the demo arm's envelope ([-0.5, 0.5]² × [0, 0.8] m in `base`), a loop around the base. */
export const ARM_POSES: readonly (readonly [number, number, number])[] = [
  [0.3, 0.0, 0.3],
  [0.15, 0.3, 0.5],
  [-0.25, 0.2, 0.25],
  [-0.3, -0.2, 0.45],
  [0.1, -0.35, 0.2],
  [0.0, 0.0, 0.6],
];

export interface ArmAgentOptions extends DemoAgentOptions {
  /** Pause at each pose (ms). */
  readonly dwellMs?: number;
}

export function startArmAgent(opts: ArmAgentOptions): DemoAgent {
  const reached: Reached[] = [];
  let position: number[] = [];
  let proprioId = -1;
  let done: ((state: string) => void) | undefined;
  let actionId = '';
  const notification = (method: string, p: Json) => {
    if (method === 'obs.frame' && p.channel_id === proprioId) {
      const v = framePayload(p) as { p_m?: number[] } | undefined;
      if (Array.isArray(v?.p_m)) position = v.p_m;
    } else if (method === 'action.status' && p.action_id === actionId) {
      const s = String(p.state);
      if (['completed', 'failed', 'canceled', 'preempted', 'rejected', 'expired'].includes(s))
        done?.(typeof p.reason === 'string' ? `${s} (${p.reason})` : s);
    }
  };
  const plan = {
    name: 'demo-arm-agent',
    modalities: ['proprio/json'],
    open: { embodiment: 'arm_01', mode: 'streaming', subscribe: [{ channel: 'proprio', rate_hz: 20 }] },
  };
  const runner = keepRunning(opts, plan, notification, async (conn, ready, stopped) => {
    const granted = ((ready.granted as Json | undefined)?.channels ?? []) as Json[];
    proprioId = Number(granted.find((g) => g.channel === 'proprio')?.channel_id ?? -1);
    for (let i = 0; !stopped() && !conn.closed; i++) {
      const goal = ARM_POSES[i % ARM_POSES.length]!;
      actionId = `arm-move-${Date.now()}-${i}`;
      const finished = new Promise<string>((resolve) => (done = resolve));
      try {
        await conn.call('action.submit', {
          action_id: actionId,
          type: 'move_to_pose',
          params: { pose: { frame: 'base', p_m: [...goal], q: [0, 0, 0, 1] } },
        });
      } catch (err) {
        // Over the admission rate (retryable): wait as told, then the same goal again.
        if (err instanceof RpcError && err.retryAfterMs !== undefined) {
          await sleep(err.retryAfterMs);
          i--;
          continue;
        }
        throw err;
      }
      const outcome = await Promise.race([finished, conn.whenClosed().then(() => 'lost')]);
      if (outcome === 'completed') {
        await sleep(60); // the next proprio frame (20 Hz) shows the pose reached
        reached.push({ goal, observed: [...position] });
        opts.log?.(`arm agent: reached [${goal.join(', ')}]`);
      } else opts.log?.(`arm agent: move to [${goal.join(', ')}] ended ${outcome}`);
      await sleep(opts.dwellMs ?? 400);
    }
  });
  return { reached, stop: () => runner.stop() };
}
