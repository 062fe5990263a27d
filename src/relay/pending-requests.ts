/**
 * The requests in flight on one relay connection, both ways (sans-IO): the agent's, by id, which the
 * world's responses are matched to (so each is rewritten as it must be, once), and the world's own (its
 * pings), which only the agent may answer.
 */
import type { JsonRpcId } from '../protocol/jsonrpc.js';
import type { RelaySession } from './relay-session.js';

/** What a session.resume sent upstream owes the agent when its result comes back. */
export interface ResumeInFlight {
  /** The agent's last_status_seq. */
  readonly agentLast: number;
  /** What the edge asked the world to replay after. */
  readonly upstreamAfter: number;
  readonly session: RelaySession;
  /** What the edge replays itself, taken when the resume went upstream: acknowledgements the agent
   *  sends before the result (e.g. in a ping) must not trim what this resume still owes it. */
  readonly replay: readonly string[];
}

export interface Pending {
  readonly method: string;
  readonly sent_at: number;
  /** For initialize: the agent's params (JSON), the key its result is cached under. */
  readonly initializeKey?: string;
  readonly resume?: ResumeInFlight;
}

/** The world's requests awaiting the agent's answer, at most (a world that never hears back is not our memory). */
const MAX_WORLD_REQUESTS = 1024;
/**
 * The agent's requests awaiting the world's answer, at most: a world that never answers must not make
 * an agent's pipelined requests the edge's memory. Far above what an agent keeps in flight.
 */
export const MAX_AGENT_REQUESTS = 4096;

export class PendingRequests {
  /**
   * The agent's requests by id, numbers and strings apart (7 and "7" are different ids), so a lookup
   * builds no key string: this runs twice per relayed request.
   */
  private readonly byNumber = new Map<number, Pending>();
  private readonly byString = new Map<string, Pending>();
  /** Ids of the world's requests the agent has not answered yet, oldest first. */
  private readonly world = new Set<string>();

  /** The agent's requests in flight. */
  get size(): number {
    return this.byNumber.size + this.byString.size;
  }

  has(id: JsonRpcId): boolean {
    return typeof id === 'number' ? this.byNumber.has(id) : this.byString.has(id);
  }

  get(id: JsonRpcId): Pending | undefined {
    return typeof id === 'number' ? this.byNumber.get(id) : this.byString.get(id);
  }

  track(id: JsonRpcId, pending: Pending): void {
    if (typeof id === 'number') this.byNumber.set(id, pending);
    else this.byString.set(id, pending);
  }

  /** The request a response answers, no longer pending. */
  take(id: JsonRpcId): Pending | undefined {
    if (typeof id === 'number') {
      const p = this.byNumber.get(id);
      if (p !== undefined) this.byNumber.delete(id);
      return p;
    }
    const p = this.byString.get(id);
    if (p !== undefined) this.byString.delete(id);
    return p;
  }

  clear(): void {
    this.byNumber.clear();
    this.byString.clear();
  }

  /** A request of the world's, on its way to the agent. */
  fromWorld(id: JsonRpcId): void {
    const k = key(id);
    this.world.delete(k);
    this.world.add(k);
    if (this.world.size > MAX_WORLD_REQUESTS) this.world.delete(this.world.values().next().value!);
  }

  /** Whether the agent's response answers a request of the world's (which it then no longer awaits). */
  answersWorld(id: JsonRpcId): boolean {
    return this.world.size > 0 && this.world.delete(key(id));
  }
}

/** A map key per id: 7 and "7" are different ids. */
export function key(id: JsonRpcId): string {
  return typeof id === 'string' ? `s:${id}` : `n:${id}`;
}
