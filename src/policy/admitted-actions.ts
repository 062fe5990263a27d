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
  /** Admitted ids, oldest first: when each ended (edge ms), or null while its action lives. */
  private readonly ids = new Map<string, number | null>();
  /** Ids in the order they ended, so in order of expiry; entries for ids since dropped are skipped. */
  private ended: string[] = [];
  private head = 0;
  /** Until when (edge ms) an id dropped before its expiry may still be one the world holds. */
  private uncertainUntil = -Infinity;

  constructor(
    /** How long after its end the world keeps an id (its reconnect_window_ms). */
    private readonly retentionMs: number,
    private readonly capacity = MAX_ADMITTED_ACTIONS,
  ) {}

  get size(): number {
    return this.ids.size;
  }

  /** Whether the id is one the world admitted and still holds, as far as the edge knows. */
  has(actionId: string, nowMs: number): boolean {
    this.expire(nowMs);
    return this.ids.has(actionId);
  }

  /** Whether an id the edge does not hold may still be one the world admitted. */
  uncertain(nowMs: number): boolean {
    return nowMs < this.uncertainUntil;
  }

  /** The world admitted the action. */
  add(actionId: string, nowMs: number): void {
    if (actionId.length > MAX_ACTION_ID_LENGTH || this.has(actionId, nowMs)) return;
    this.ids.set(actionId, null);
    if (this.ids.size > this.capacity) this.dropOne();
  }

  /** The world reported the action in a terminal state. */
  end(actionId: string, nowMs: number): void {
    if (this.ids.get(actionId) !== null) return; // unknown, or already ended
    this.ids.set(actionId, nowMs); // an existing key keeps its place in the Map's order
    this.ended.push(actionId);
  }

  private expire(nowMs: number): void {
    while (this.head < this.ended.length) {
      const id = this.ended[this.head]!;
      const at = this.ids.get(id);
      if (typeof at === 'number') {
        if (at + this.retentionMs > nowMs) break;
        this.ids.delete(id);
      }
      this.head++;
    }
    this.compact();
  }

  private dropOne(): void {
    while (this.head < this.ended.length) {
      const id = this.ended[this.head++]!;
      const at = this.ids.get(id);
      if (typeof at !== 'number') continue;
      this.ids.delete(id);
      this.forgotUntil(at + this.retentionMs);
      this.compact();
      return;
    }
    const oldest = this.ids.keys().next().value!;
    this.ids.delete(oldest);
    this.forgotUntil(Infinity); // a live action's id: the world holds it for the session's life
  }

  private forgotUntil(until: number): void {
    this.uncertainUntil = Math.max(this.uncertainUntil, until);
  }

  private compact(): void {
    if (this.head === this.ended.length) {
      this.ended = [];
      this.head = 0;
    } else if (this.head > 1024) {
      this.ended = this.ended.slice(this.head);
      this.head = 0;
    }
  }
}
