/**
 * A relay agent for the chaos run: one AWP session over many connections. It counts every status_seq
 * it receives across all of them (so a seq seen twice, or never, shows up against the world's own
 * numbering), acknowledges in its own pings what it has processed, drops its connection abruptly
 * (ws terminate: no closing handshake) and resumes with the highest status_seq it has seen, retrying
 * the errors the edge documents as retryable.
 */
import { AwpClient, HttpRefusal, initializeParams, type Json } from '../support/awp-client.js';

const SEQUENCED = new Set(['action.status', 'world.event', 'session.state']);
/** Ids of the acting agent's submissions: their results carry status_seq (AWP-CTL-008). */
const SUBMIT_ID = 'chaos-submit-';

/** What one agent did and saw; summed per scenario. */
export interface AgentTally {
  drops: number;
  resumes: number;
  opens: number;
  /** Resumes sent and then dropped before (or while) they were answered. */
  abandoned: number;
  /** Retryable refusals by `code message`, e.g. `-32003 AWP_EDGE_STORE_UNAVAILABLE`. */
  readonly retryable: Map<string, number>;
  /** Connections that closed on the agent without its asking, by close code. */
  readonly closes: Map<number, number>;
  readonly errors: string[];
}

export function emptyTally(): AgentTally {
  return {
    drops: 0,
    resumes: 0,
    opens: 0,
    abandoned: 0,
    retryable: new Map(),
    closes: new Map(),
    errors: [],
  };
}

export type ResumeOutcome = 'resumed' | 'unknown';

export interface RetryPolicy {
  /** Give up resuming after this long (the run stays bounded). */
  readonly deadlineMs: number;
  readonly backoffMs: number;
  readonly maxBackoffMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { deadlineMs: 30_000, backoffMs: 100, maxBackoffMs: 1000 };

export class ChaosRelayAgent {
  /** status_seq -> how many times it arrived, over every connection of the current session. */
  seen = new Map<number, number>();
  /** Seqs that arrived at or below the previous one on the same connection. */
  reordered = 0;
  client: AwpClient | null = null;
  sessionId: string | null = null;
  token: string | null = null;
  /** Sessions this agent had before the current one (a world restart ends a session). */
  readonly past: { sessionId: string; seen: Map<number, number>; reordered: number }[] = [];
  readonly tally: AgentTally = emptyTally();
  private readonly folded = new WeakSet<AwpClient>();
  private pingTimer: NodeJS.Timeout | undefined;
  private pings = 0;
  /** Connections the agent itself dropped: their closes are not the edge's doing. */
  private readonly ownDrops = new WeakSet<AwpClient>();

  constructor(
    readonly label: string,
    readonly credential: string,
    /** Where to connect now (a scenario may move the agent to another replica). */
    public url: string,
    private readonly retry: RetryPolicy = DEFAULT_RETRY,
    /** Self-check only: resume this far from what was seen (-1 must show as duplicates). */
    private readonly resumeSkew = 0,
    /** An acting agent: binds this embodiment and keeps submitting short moves while connected. */
    private readonly embodiment?: string,
  ) {}

  private actTimer: NodeJS.Timeout | undefined;
  private submits = 0;
  /** Submissions sent, and answered with a status_seq (a transition first reported in a result). */
  readonly actions = { submitted: 0, admitted: 0, refused: 0, refusals: {} as Record<string, number> };

  /** The highest status_seq processed: every connection folded so far plus the live one. */
  lastSeq(): number {
    let max = 0;
    for (const s of this.seen.keys()) if (s > max) max = s;
    if (this.client !== null && !this.folded.has(this.client)) {
      for (const m of this.client.received) {
        const s = sequenced(m);
        if (s !== undefined && s > max) max = s;
      }
    }
    return max;
  }

  async open(): Promise<void> {
    const deadline = performance.now() + this.retry.deadlineMs;
    let backoff = this.retry.backoffMs;
    for (;;) {
      const client = await this.connect(deadline);
      const params =
        this.embodiment !== undefined
          ? { mode: 'streaming', embodiment: this.embodiment }
          : { mode: 'streaming' };
      const r = await client.call('session.open', params, 15_000).catch(transportFailure);
      if (r.error === undefined) {
        const result = r.result as Json;
        this.sessionId = result.session_id as string;
        this.token = result.session_token as string;
        this.tally.opens += 1;
        this.startPinging();
        return;
      }
      this.refusal('session.open', r.error as Json, deadline);
      await this.discard(client);
      await sleep(backoff);
      backoff = Math.min(this.retry.maxBackoffMs, backoff * 2);
    }
  }

  /**
   * Reconnects and resumes with the highest status_seq seen. Retryable refusals (and connections that
   * fail or close meanwhile) are retried with backoff until the deadline; AWP_SESSION_UNKNOWN (the
   * world no longer holds the session, AWP-SES-008) is returned for the caller to open anew.
   */
  async resume(): Promise<ResumeOutcome> {
    const deadline = performance.now() + this.retry.deadlineMs;
    let backoff = this.retry.backoffMs;
    for (;;) {
      const client = await this.connect(deadline);
      const last = Math.max(0, this.lastSeq() + this.resumeSkew);
      const r = await client
        .call('session.resume', { session_token: this.token, last_status_seq: last }, 15_000)
        .catch(transportFailure);
      if (r.error === undefined) {
        const result = r.result as Json;
        if (result.session_id !== this.sessionId)
          throw new Error(`${this.label}: resumed ${String(result.session_id)}, not ${this.sessionId}`);
        this.tally.resumes += 1;
        this.startPinging();
        return 'resumed';
      }
      const e = r.error as Json;
      if (e.code === 2005) {
        this.count(`${String(e.code)} ${String(e.message)}`);
        await this.discard(client);
        return 'unknown';
      }
      this.refusal('session.resume', e, deadline);
      await this.discard(client);
      await sleep(backoff);
      backoff = Math.min(this.retry.maxBackoffMs, backoff * 2);
    }
  }

  /**
   * Sends `session.resume` on a new connection and drops it `afterMs` later, whether or not the result
   * (or part of the replay) has arrived: the edge is mid-claim, mid-dial or mid-replay when the agent
   * vanishes again. Whatever did arrive is counted like any connection's.
   */
  async abandonResume(afterMs: number): Promise<void> {
    const client = await this.connect(performance.now() + this.retry.deadlineMs);
    client.send({
      jsonrpc: '2.0',
      id: 'chaos-abandoned-resume',
      method: 'session.resume',
      params: { session_token: this.token, last_status_seq: Math.max(0, this.lastSeq() + this.resumeSkew) },
    });
    await sleep(afterMs);
    this.tally.abandoned += 1;
    await this.discard(client);
  }

  /** The current session is gone (AWP_SESSION_UNKNOWN): keep its record and start a new one. */
  async reopen(): Promise<void> {
    if (this.sessionId !== null)
      this.past.push({ sessionId: this.sessionId, seen: this.seen, reordered: this.reordered });
    this.seen = new Map();
    this.reordered = 0;
    this.sessionId = null;
    this.token = null;
    await this.open();
  }

  /** Abrupt drop: the socket is destroyed without a closing handshake (a crash or a cut cable). */
  async drop(): Promise<void> {
    const client = this.client;
    if (client === null) return;
    this.stopPinging();
    this.ownDrops.add(client);
    client.drop();
    this.tally.drops += 1;
    await this.discard(client);
  }

  /** Waits for the live connection to close by itself (the edge or the world went away). */
  async lost(timeoutMs: number): Promise<{ code: number; reason: string }> {
    const client = this.client;
    if (client === null) throw new Error(`${this.label}: no connection`);
    const closed = await client.waitClosed(timeoutMs);
    this.stopPinging();
    this.fold(client);
    return closed;
  }

  /** Folds the live connection (after a final close) so every seq it carried is counted. */
  async finish(): Promise<void> {
    this.stopPinging();
    const client = this.client;
    if (client === null) return;
    await this.discard(client);
  }

  private async connect(deadline: number): Promise<AwpClient> {
    let backoff = this.retry.backoffMs;
    for (;;) {
      try {
        const client = await AwpClient.connect(this.url, { credential: this.credential }, 5000);
        client.ws.on('error', () => undefined);
        const init = await client.call('initialize', initializeParams(['proprio/json', 'text/event+json']));
        if (init.error === undefined) {
          this.adopt(client);
          return client;
        }
        this.refusal('initialize', init.error as Json, deadline);
        await this.discard(client);
      } catch (err) {
        if (err instanceof RefusedError) throw err;
        const what = err instanceof HttpRefusal ? `http ${err.status}` : errMessage(err);
        this.count(`connect: ${what.slice(0, 80)}`);
        if (performance.now() > deadline)
          throw new Error(`${this.label}: cannot connect: ${what}`, { cause: err });
      }
      await sleep(backoff);
      backoff = Math.min(this.retry.maxBackoffMs, backoff * 2);
    }
  }

  private adopt(client: AwpClient): void {
    this.client = client;
    client.ws.once('close', (code: number) => {
      if (!this.ownDrops.has(client)) this.tally.closes.set(code, (this.tally.closes.get(code) ?? 0) + 1);
    });
  }

  /** Records a refusal; throws unless the edge said it is retryable and the deadline allows. */
  private refusal(method: string, e: Json, deadline: number): void {
    const retryable = (e.data as Json | undefined)?.retryable === true;
    const key = `${String(e.code)} ${String(e.message).slice(0, 80)}`;
    if (!retryable) throw new RefusedError(`${this.label}: ${method} refused: ${JSON.stringify(e)}`);
    this.count(key);
    if (performance.now() > deadline)
      throw new RefusedError(
        `${this.label}: ${method} still refused at the deadline: ${key} (first refusals: ${this.history.join('; ')})`,
      );
  }

  private count(key: string): void {
    this.tally.retryable.set(key, (this.tally.retryable.get(key) ?? 0) + 1);
    // The first few refusals in order, for the report when the agent gives up.
    if (this.history.length < 6) this.history.push(key);
  }

  private readonly history: string[] = [];

  /** Closes `client` if needed and counts what it carried, once all its messages have been emitted. */
  private async discard(client: AwpClient): Promise<void> {
    if (client.closed === null) {
      this.ownDrops.add(client);
      client.drop();
      // ws emits every message it read before 'close'; bounded in case the socket is already gone.
      await client.waitClosed(3000).catch(() => undefined);
    }
    this.fold(client);
    if (this.client === client) this.client = null;
  }

  private fold(client: AwpClient): void {
    if (this.folded.has(client)) return;
    this.folded.add(client);
    let prev = 0;
    for (const m of client.received) {
      if (typeof m.id === 'string' && m.id.startsWith(SUBMIT_ID)) {
        if (m.error !== undefined) {
          this.actions.refused += 1;
          const key = String((m.error as Json).message);
          this.actions.refusals[key] = (this.actions.refusals[key] ?? 0) + 1;
        } else this.actions.admitted += 1;
      }
      const seq = sequenced(m);
      if (seq === undefined) continue;
      if (seq <= prev) this.reordered += 1;
      prev = Math.max(prev, seq);
      this.seen.set(seq, (this.seen.get(seq) ?? 0) + 1);
    }
  }

  private startPinging(): void {
    this.stopPinging();
    const client = this.client;
    if (client === null) return;
    if (this.embodiment !== undefined) this.startActing(client);
    // The agent acknowledges what it has processed, as AWP-CTL-010 lets it: the edge may then let
    // the world discard, and a later resume depends on the edge's journal.
    this.pingTimer = setInterval(
      () => {
        if (client.closed !== null || client.ws.readyState !== client.ws.OPEN) return;
        this.pings += 1;
        const last = this.lastSeq();
        client.send({
          jsonrpc: '2.0',
          id: `chaos-ping-${this.pings}`,
          method: 'ping',
          params: {
            origin_ns: Math.round(performance.now() * 1e6),
            ...(last > 0 && { last_status_seq: last }),
          },
        });
      },
      250 + Math.floor(Math.random() * 100),
    );
    this.pingTimer.unref();
  }

  private stopPinging(): void {
    clearInterval(this.pingTimer);
    this.pingTimer = undefined;
    clearInterval(this.actTimer);
    this.actTimer = undefined;
  }

  /**
   * Short moves back and forth, a little slower than the arm's max_action_rate_hz (10): admissions,
   * executions and terminal states keep coming (the e-stop traffic fails or refuses many of them).
   */
  private startActing(client: AwpClient): void {
    const submit = (): void => {
      if (client.closed !== null || client.ws.readyState !== client.ws.OPEN) return;
      this.submits += 1;
      this.actions.submitted += 1;
      const n = this.submits;
      client.send({
        jsonrpc: '2.0',
        id: `${SUBMIT_ID}${n}`,
        method: 'action.submit',
        params: {
          action_id: `${this.label}-a${n}`,
          type: 'move_to_pose',
          params: {
            pose: { frame: 'base', p_m: n % 2 === 0 ? [0, 0, 0.4] : [0.05, 0, 0.4], q: [0, 0, 0, 1] },
            max_velocity_mps: 0.4,
          },
        },
      });
    };
    submit();
    this.actTimer = setInterval(submit, 120);
    this.actTimer.unref();
  }
}

/** A refusal the agent must not retry: the run records it as an error. */
export class RefusedError extends Error {}

/** The status_seq of a sequenced notification, or of a result that reports a transition. */
function sequenced(m: Json): number | undefined {
  if (m.id === undefined && SEQUENCED.has(m.method as string)) {
    return (m.params as { status_seq: number }).status_seq;
  }
  if (typeof m.id === 'string' && m.id.startsWith(SUBMIT_ID) && m.result !== undefined) {
    const seq = (m.result as { status_seq?: unknown }).status_seq;
    return typeof seq === 'number' ? seq : undefined;
  }
  return undefined;
}

/** Lost and duplicated status_seq of one session against the world's numbering (1..issued). */
export function account(
  seen: ReadonlyMap<number, number>,
  issued: number,
): { lost: number[]; duplicated: number[]; phantom: number[] } {
  const lost: number[] = [];
  for (let s = 1; s <= issued; s++) if (!seen.has(s)) lost.push(s);
  const duplicated = [...seen].filter(([, n]) => n > 1).map(([s]) => s);
  const phantom = [...seen.keys()].filter((s) => s > issued || s < 1);
  return { lost, duplicated, phantom };
}

/** Gaps and duplicates when the world's count is not at hand: the seen seqs must be 1..max. */
export function contiguity(seen: ReadonlyMap<number, number>): { lost: number[]; duplicated: number[] } {
  let max = 0;
  for (const s of seen.keys()) if (s > max) max = s;
  const r = account(seen, max);
  return { lost: r.lost, duplicated: r.duplicated };
}

/** A request that got no answer (the connection failed or closed): retried like a retryable error. */
function transportFailure(err: unknown): Json {
  return { error: { code: 0, message: errMessage(err), data: { retryable: true } } };
}

export function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
