/**
 * The action ids a session's world admitted, so that identical resubmissions are never rate-limited
 * (AWP-ACT-001), held in bounded memory: a session that submits for days must not grow the edge.
 *
 * An id is kept while its action lives and for the world's retention after it ends (AWP-ACT-006: the
 * world keeps a terminal action_id at least `reconnect_window_ms`), then forgotten, as the world may
 * forget it. At most MAX_ADMITTED_ACTIONS are kept; past that the one that ended first goes (the oldest
 * live one when none has ended). Until an id dropped that way would have expired, the edge cannot tell
 * a new id from a forgotten one, and `uncertain` tells the limiter not to refuse on its own: the edge
 * refuses only what the world certainly would, and the world keeps its own limit.
 */

/** More than rate x window of any envelope a world grants in practice (100 Hz x 30 s is 3,000). */
export const MAX_ADMITTED_ACTIONS = 4096;
/** The schema's longest action_id (common.schema.json); a longer one is never remembered. */
const MAX_ACTION_ID_LENGTH = 128;

export class AdmittedActions {
  /** Ids of live actions, in the order they were admitted. */
  private readonly live = new Set<string>();
  /** Ids of ended actions with when each ended (edge ms), in that order: the order they expire in. */
  private readonly ended = new Map<string, number>();
  /** Until when (edge ms) an id dropped before its expiry may still be one the world holds. */
  private uncertainUntil = -Infinity;

  constructor(
    /** How long after its end the world keeps an id (its reconnect_window_ms). */
    private readonly retentionMs: number,
    private readonly capacity = MAX_ADMITTED_ACTIONS,
  ) {}

  get size(): number {
    return this.live.size + this.ended.size;
  }

  /** Whether the id is one the world admitted and still holds, as far as the edge knows. */
  has(actionId: string, nowMs: number): boolean {
    for (const [id, at] of this.ended) {
      if (at + this.retentionMs > nowMs) break;
      this.ended.delete(id);
    }
    return this.live.has(actionId) || this.ended.has(actionId);
  }

  /** Whether an id the edge does not hold may still be one the world admitted. */
  uncertain(nowMs: number): boolean {
    return nowMs < this.uncertainUntil;
  }

  /** The world admitted the action. */
  add(actionId: string, nowMs: number): void {
    if (actionId.length > MAX_ACTION_ID_LENGTH || this.has(actionId, nowMs)) return;
    this.live.add(actionId);
    if (this.size > this.capacity) this.dropOne();
  }

  /** The world reported the action in a terminal state. */
  end(actionId: string, nowMs: number): void {
    if (this.live.delete(actionId)) this.ended.set(actionId, nowMs);
  }

  /** The id that ended first goes, or else the oldest live one: the world holds that for the session's life. */
  private dropOne(): void {
    for (const [id, at] of this.ended) {
      this.ended.delete(id);
      this.uncertainUntil = Math.max(this.uncertainUntil, at + this.retentionMs);
      return;
    }
    for (const id of this.live) {
      this.live.delete(id);
      this.uncertainUntil = Infinity;
      return;
    }
  }
}
