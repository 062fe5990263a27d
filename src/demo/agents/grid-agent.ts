/**
 * The demo's grid agent: walks `avatar_0` to one goal after another (`walk_to`), advancing the lockstep
 * world itself (`world.tick`, tick authority) a few times a second so the walk is visible.
 */
import { keepRunning, type DemoAgent, type DemoAgentOptions, type Reached } from './agent.js';
import { RpcError, framePayload, sleep, type AgentConnection, type Json } from './connection.js';

/** Cells of the demo's 5×5 grid: its declared goal first, then the corners. */
export const GRID_GOALS: readonly (readonly [number, number])[] = [
  [2, 0],
  [4, 4],
  [0, 4],
  [4, 1],
  [0, 0],
];

export interface GridAgentOptions extends DemoAgentOptions {
  /** Time between advances (ms). */
  readonly stepMs?: number;
}

export function startGridAgent(opts: GridAgentOptions): DemoAgent {
  const reached: Reached[] = [];
  let avatar: number[] = [];
  let viewId = -1;
  let actionId = '';
  // An object: set from the notification handler while the walk loop reads it.
  const walk: { outcome: string | undefined } = { outcome: undefined };
  const outcome = (): string | undefined => walk.outcome;
  const notification = (method: string, p: Json) => {
    if (method === 'obs.frame' && p.channel_id === viewId) {
      const v = framePayload(p) as { avatar?: number[] } | undefined;
      if (Array.isArray(v?.avatar)) avatar = v.avatar;
    } else if (method === 'action.status' && p.action_id === actionId) {
      const s = String(p.state);
      if (['completed', 'failed', 'canceled', 'preempted', 'rejected', 'expired'].includes(s))
        walk.outcome = s;
    }
  };
  const plan = {
    name: 'demo-grid-agent',
    modalities: ['text/event+json'],
    open: {
      embodiment: 'avatar_0',
      mode: 'lockstep',
      subscribe: [{ channel: 'grid_view' }],
      admin: ['tick'],
    },
  };
  const runner = keepRunning(opts, plan, notification, async (conn, ready, stopped) => {
    const granted = ((ready.granted as Json | undefined)?.channels ?? []) as Json[];
    viewId = Number(granted.find((g) => g.channel === 'grid_view')?.channel_id ?? -1);
    let tick = typeof ready.tick === 'number' ? ready.tick : 0;
    for (let i = 0; !stopped() && !conn.closed; i++) {
      const goal = GRID_GOALS[i % GRID_GOALS.length]!;
      actionId = `grid-walk-${Date.now()}-${i}`;
      walk.outcome = undefined;
      await conn.call('action.submit', { action_id: actionId, type: 'walk_to', params: { cell: [...goal] } });
      // One advance per step: each moves the avatar one cell; the status follows the advance's frame.
      for (let n = 0; outcome() === undefined && n < 50 && !stopped(); n++) {
        tick = await advance(conn, tick);
        await sleep(opts.stepMs ?? 300);
      }
      if (outcome() === 'completed') {
        reached.push({ goal, observed: [...avatar] });
        opts.log?.(`grid agent: reached [${goal.join(', ')}]`);
      }
    }
  });
  return { reached, stop: () => runner.stop() };
}

/** One `world.tick`; the world's tick afterwards (another session may have advanced it: AWP_TICK_MISMATCH says where). */
async function advance(conn: AgentConnection, tick: number): Promise<number> {
  try {
    const r = await conn.call('world.tick', { expected_tick: tick });
    return typeof r.tick === 'number' ? r.tick : tick + 1;
  } catch (err) {
    const now = err instanceof RpcError ? err.error.data?.tick : undefined;
    if (typeof now === 'number') return now;
    throw err;
  }
}
