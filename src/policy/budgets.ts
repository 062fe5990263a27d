/**
 * Operator budgets per agent credential: connections, sessions, messages and bytes per second, and the
 * largest message. A budget an agent exceeds is answered in the protocol's terms (an HTTP 429 before the
 * upgrade, a retryable JSON-RPC error, or the close code that fits: 1008, 1009), counted, and logged once
 * per episode. Credentials are only ever held hashed here.
 */
export interface BudgetConfig {
  readonly max_connections: number;
  readonly max_sessions: number;
  readonly max_messages_per_second: number;
  readonly max_bytes_per_second: number;
  readonly max_message_bytes: number;
}

export type BudgetKind =
  'connections' | 'sessions' | 'messages_per_second' | 'bytes_per_second' | 'message_bytes';

/** A violation episode ends after this long without one; the next violation is logged again. */
const EPISODE_MS = 10_000;

/** A token bucket refilled at `rate` per second, holding at most one second's worth. */
class Bucket {
  private tokens: number;
  private at: number;

  constructor(
    private readonly rate: number,
    now: number,
  ) {
    this.tokens = rate;
    this.at = now;
  }

  take(n: number, now: number): boolean {
    this.tokens = Math.min(this.rate, this.tokens + ((now - this.at) / 1000) * this.rate);
    this.at = now;
    if (this.tokens < n) return false;
    this.tokens -= n;
    return true;
  }
}

export class AgentBudget {
  connections = 0;
  sessions = 0;
  private readonly messages: Bucket;
  private readonly bytes: Bucket;
  private readonly episodes = new Map<BudgetKind, number>();

  constructor(
    /** `[redacted:sha256:…]`-style identity for logs. */
    readonly id: string,
    private readonly config: BudgetConfig,
    private readonly now: () => number,
    private readonly violated: (kind: BudgetKind, budget: AgentBudget, firstInEpisode: boolean) => void,
  ) {
    this.messages = new Bucket(config.max_messages_per_second, now());
    this.bytes = new Bucket(config.max_bytes_per_second, now());
  }

  openConnection(): boolean {
    if (this.connections >= this.config.max_connections) return this.refuse('connections');
    this.connections++;
    return true;
  }

  closeConnection(): void {
    this.connections = Math.max(0, this.connections - 1);
  }

  /** Whether one more session fits (checked before a session.open or resume goes anywhere). */
  canOpenSession(): boolean {
    return this.sessions < this.config.max_sessions || this.refuse('sessions');
  }

  sessionStarted(): void {
    this.sessions++;
  }

  sessionEnded(): void {
    this.sessions = Math.max(0, this.sessions - 1);
  }

  /** One message from the agent: null if within budget, else the budget it exceeds. */
  message(bytes: number): BudgetKind | null {
    const now = this.now();
    const over: BudgetKind | null =
      bytes > this.config.max_message_bytes
        ? 'message_bytes'
        : !this.messages.take(1, now)
          ? 'messages_per_second'
          : !this.bytes.take(bytes, now)
            ? 'bytes_per_second'
            : null;
    if (over !== null) this.refuse(over);
    return over;
  }

  private refuse(kind: BudgetKind): false {
    const now = this.now();
    const last = this.episodes.get(kind);
    this.episodes.set(kind, now);
    this.violated(kind, this, last === undefined || now - last > EPISODE_MS);
    return false;
  }
}

/**
 * Budgets by credential, keyed by its SHA-256 digest in hex (the edge digests a presented credential once,
 * transport/auth.ts); agents without a credential share one.
 */
export class CredentialBudgets {
  private readonly byCredential = new Map<string, AgentBudget>();

  constructor(
    private readonly config: BudgetConfig,
    private readonly now: () => number,
    private readonly violated: (kind: BudgetKind, budget: AgentBudget, firstInEpisode: boolean) => void,
  ) {}

  /** Connections open now on the credential of `digest` (0 for one never seen); creates no budget. */
  connectionsOf(digest: string): number {
    return this.byCredential.get(digest)?.connections ?? 0;
  }

  /** The budget of the credential of `digest`, or the anonymous one. */
  for(digest: string | undefined): AgentBudget {
    const key = digest ?? 'anonymous';
    let b = this.byCredential.get(key);
    if (b === undefined) {
      const id = digest === undefined ? 'anonymous' : `[redacted:sha256:${digest.slice(0, 8)}]`;
      b = new AgentBudget(id, this.config, this.now, this.violated);
      this.byCredential.set(key, b);
    }
    return b;
  }
}

/** The close code for a budget a connection exceeded mid-stream. */
export function closeFor(kind: BudgetKind): { code: number; reason: string } {
  return kind === 'message_bytes'
    ? { code: 1009, reason: 'message larger than the budget allows' }
    : { code: 1008, reason: `${kind.replaceAll('_', ' ')} budget exceeded` };
}
