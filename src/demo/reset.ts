/**
 * `world.reset` (AWP-PRM-006, AWP-SIM-001): every session hears `world_resetting` naming the initiator, every
 * non-terminal action ends `cancelled(world_reset)` (executing ones through cancelling), the world returns to an
 * initial state, and in lockstep every session gets a fresh per-tick frame with the restored tick before the
 * initiator's result. Sessions, grants, tokens and subscriptions persist.
 */
import type { JsonRpcId } from '../protocol/jsonrpc.js';
import { fail } from './failure.js';
import { emitFrame, finish, statusParams } from './transitions.js';
import type { JsonObject } from './types.js';
import { isPreExecution } from './types.js';
import type { ConnState, WorldState } from './world-state.js';

export function worldReset(w: WorldState, c: ConnState, id: JsonRpcId, p: JsonObject): void {
  const s = c.session!;
  const reset = w.sim.reset?.bind(w.sim);
  if (reset === undefined || !s.admin.includes('reset')) {
    throw fail('AWP_FORBIDDEN', 'world.reset needs the reset admin grant');
  }
  const states = (w.manifest.initial_states as string[] | undefined) ?? [];
  const initial = (p.initial_state as string | undefined) ?? states[0];
  if (initial === undefined || !states.includes(initial)) {
    throw fail('AWP_PARAMS_INVALID', `unknown initial_state ${String(initial)}`);
  }
  if (p.seed !== undefined && (w.manifest.capabilities as JsonObject).seed !== true) {
    throw fail('AWP_PARAMS_INVALID', 'seed needs capabilities.seed');
  }
  for (const other of [...w.sessions.values()]) {
    w.event(other, 'world_resetting', { initiator: s.id, kind: 'reset', initial_state: initial });
    for (const a of [...other.actions.values()]) {
      if (a.state === 'executing') {
        a.state = 'cancelling';
        a.status = w.sequenced(other, 'action.status', statusParams(w, a, { reason: 'world_reset' }));
      }
      if (a.state === 'cancelling')
        finish(w, other, a, 'cancelled', { reason: 'world_reset', aborted: true });
      else if (isPreExecution(a.state)) finish(w, other, a, 'cancelled', { reason: 'world_reset' });
    }
  }
  w.sim.halt();
  reset(initial); // `seed` seeds randomness only (AWP-REP-001); these worlds have none
  if (w.lockstep) {
    w.tick = 0; // world state; the session clock keeps going forward (AWP-TIM-013)
    for (const other of w.sessions.values()) {
      for (const g of other.grants.values()) if (g.rate_hz === null) emitFrame(w, other, g);
    }
  }
  w.reply(c.id, id, w.lockstep ? { tick: w.tick } : {});
}
