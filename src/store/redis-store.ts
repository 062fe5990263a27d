/**
 * The distributed session store: relay and observer sessions in Redis (6+), so any replica can resume them.
 *
 * Keys (all under `keyPrefix`, default `awp-edge:`; the braces are a Redis Cluster hash tag keeping a
 * session's two keys in one slot):
 *   {TOKEN}:rec  hash: static record (msgpack), agent_ack, suspended_at_ms, fence, suspended TTL,
 *                an observer session's subscriptions and positions
 *   {TOKEN}:jnl  sorted set: journal entries (msgpack [status_seq, text]) scored by status_seq
 *   epoch        the 6-byte token epoch shared by every replica
 * A suspended session's keys expire after its reconnect window plus a margin; attached, they have no
 * TTL. The edge deletes sessions explicitly as well.
 *
 * Failure behaviour: nothing is queued while Redis is unreachable. `healthy()` is false, and every
 * operation rejects at once with StoreUnavailableError (or after `commandTimeoutMs` if Redis stops
 * answering mid-command); it never hangs. A command that times out drops the connection: ioredis keeps
 * a timed-out command (and its arguments, up to a journal step) queued until a reply that may never
 * come, so the store reconnects to reject them all, and stays unhealthy until the new connection is
 * ready. The client keeps reconnecting in the background.
 *
 * The Redis URL may carry a password: it is never logged and never part of an error message.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import type { JournalEntry } from '../session/journal.js';
import {
  checkJournal,
  decodeEntry,
  decodeObserver,
  decodeRecord,
  encodeEntry,
  encodeObserver,
  encodeStatic,
} from './codec.js';
import * as lua from './redis-scripts.js';
import {
  CorruptRecordError,
  FencedError,
  JournalGapError,
  type ObserverRecord,
  type RelaySessionRecord,
  type SessionStore,
  type StoredSession,
} from '../session/session-store.js';

export interface RedisStoreOptions {
  /** redis://[user:password@]host:port[/db] or rediss:// (TLS). */
  readonly url: string;
  readonly keyPrefix?: string | undefined;
  /** Bound on establishing a connection (default 2000). */
  readonly connectTimeoutMs?: number | undefined;
  /** Bound on one command's reply (default 2000). */
  readonly commandTimeoutMs?: number | undefined;
  /** Added to a suspended session's reconnect window to form its keys' TTL (default 30000). */
  readonly suspendedTtlMarginMs?: number | undefined;
}

/** The store cannot be reached or refused an operation; the message never carries credentials. */
export class StoreUnavailableError extends Error {
  readonly code = 'AWP_EDGE_STORE_UNAVAILABLE';
}

export const DEFAULT_KEY_PREFIX = 'awp-edge:';
/** Journal entries decoded per event-loop turn (a few ms): see decodeJournal. */
const DECODE_SLICE = 4096;
const EPOCH_BYTES = 6;
/** ioredis's rejection when `commandTimeout` lapses (the command itself stays queued). */
const COMMAND_TIMED_OUT = 'Command timed out';

/** The scripts registered with defineCommand; ioredis adds them as methods (and `*Buffer` variants). */
interface Scripted {
  awpCreate(rec: string, jnl: string, ...args: (string | Buffer)[]): Promise<number>;
  /** Fields are null where the hash lacks them (only a corrupted record does). */
  awpGetBuffer(
    rec: string,
    jnl: string,
  ): Promise<[Buffer, Buffer | null, Buffer | null, Buffer | null, Buffer[], Buffer] | null>;
  awpClaim(rec: string, jnl: string): Promise<number | null>;
  /** 1, -1 (fenced), -3 (agent_ack corrupt), or [-2, highest seq held] (a gap). */
  awpAppend(rec: string, jnl: string, ...args: (string | Buffer)[]): Promise<number | [number, string]>;
  awpAcknowledge(rec: string, jnl: string, ...args: string[]): Promise<number>;
  awpSetSuspended(rec: string, jnl: string, ...args: string[]): Promise<number>;
  awpSetObserver(rec: string, jnl: string, fence: string, observer: Buffer): Promise<number>;
  awpDelete(rec: string, jnl: string, fence: string): Promise<number>;
  awpEpochBuffer(key: string, epoch: Buffer): Promise<Buffer | null>;
}

export class RedisSessionStore implements SessionStore {
  readonly kind = 'redis';
  /** Where the store points, without credentials (for logs and error messages). */
  readonly target: string;
  private readonly redis: Redis;
  private readonly scripted: Scripted;
  private readonly prefix: string;
  private readonly marginMs: number;
  private readonly password: string;
  private readonly commandTimeoutMs: number;
  private lastError = '';
  private closed = false;
  /** A command timed out: the connection was dropped and is not trusted until it is ready again. */
  private stalled = false;

  constructor(options: RedisStoreOptions) {
    const url = parseUrl(options.url);
    if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
      throw new StoreUnavailableError(
        `session store URL must be redis:// or rediss://, got ${url.protocol}//`,
      );
    }
    this.password = decodeURIComponent(url.password);
    this.target = `${url.protocol}//${url.host}${url.pathname === '/' ? '' : url.pathname}`;
    this.prefix = options.keyPrefix ?? DEFAULT_KEY_PREFIX;
    this.marginMs = options.suspendedTtlMarginMs ?? 30_000;
    const connectTimeout = options.connectTimeoutMs ?? 2_000;
    this.commandTimeoutMs = options.commandTimeoutMs ?? 2_000;
    this.redis = new Redis(options.url, {
      connectTimeout,
      commandTimeout: this.commandTimeoutMs,
      // Fail fast instead of queueing: the edge refuses new sessions rather than waiting on Redis.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), connectTimeout),
      connectionName: 'awp-edge',
      disableClientInfo: true,
      scripts: {
        awpCreate: { lua: lua.CREATE, numberOfKeys: 2 },
        awpGet: { lua: lua.GET, numberOfKeys: 2, readOnly: true },
        awpClaim: { lua: lua.CLAIM, numberOfKeys: 2 },
        awpAppend: { lua: lua.APPEND, numberOfKeys: 2 },
        awpAcknowledge: { lua: lua.ACKNOWLEDGE, numberOfKeys: 2 },
        awpSetSuspended: { lua: lua.SET_SUSPENDED, numberOfKeys: 2 },
        awpSetObserver: { lua: lua.SET_OBSERVER, numberOfKeys: 2 },
        awpDelete: { lua: lua.DELETE, numberOfKeys: 2 },
        awpEpoch: { lua: lua.EPOCH, numberOfKeys: 1 },
      },
    });
    // Without a listener ioredis prints connection errors itself; keep the last one for our messages.
    this.redis.on('error', (err: Error) => {
      this.lastError = this.redact(err.message);
    });
    this.redis.on('ready', () => {
      this.lastError = '';
      this.stalled = false;
    });
    // defineCommand adds methods ioredis's types cannot know; Scripted lists them.
    this.scripted = this.redis as unknown as Scripted;
  }

  /**
   * Whether Redis is connected and ready now (false while connecting, reconnecting or closed, and from a
   * command timing out until the connection is ready again).
   */
  healthy(): boolean {
    return !this.closed && !this.stalled && this.redis.status === 'ready';
  }

  /** Resolves true once ready, or false after `timeoutMs` (for startup: the edge reports, not waits). */
  async whenReady(timeoutMs: number): Promise<boolean> {
    if (this.healthy()) return true;
    if (this.closed) return false;
    return new Promise<boolean>((resolve) => {
      const done = (ok: boolean): void => {
        clearTimeout(timer);
        this.redis.off('ready', onReady);
        resolve(ok);
      };
      const onReady = (): void => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      this.redis.on('ready', onReady);
    });
  }

  async create(record: RelaySessionRecord): Promise<number> {
    const [rec, jnl] = this.keys(record.edge_token);
    await this.run('create', () =>
      this.scripted.awpCreate(
        rec,
        jnl,
        encodeStatic(record),
        String(record.agent_ack),
        record.suspended_at_ms === null ? '' : String(record.suspended_at_ms),
        String(record.reconnect_window_ms + this.marginMs),
        record.observer === undefined ? '' : encodeObserver(record.observer),
      ),
    );
    return 1;
  }

  async get(edge_token: string): Promise<StoredSession | null> {
    const [rec, jnl] = this.keys(edge_token);
    const reply = await this.run('get', () => this.scripted.awpGetBuffer(rec, jnl));
    if (reply === null) return null;
    const [encoded, ack, suspended, fence, members, observer] = reply;
    if (ack === null || suspended === null || fence === null)
      throw new CorruptRecordError('the session record lacks a field');
    const record = decodeRecord(
      edge_token,
      encoded,
      ack.toString(),
      suspended.toString(),
      observer.length === 0 ? undefined : decodeObserver(observer),
    );
    const journal = checkJournal(record.agent_ack, await decodeJournal(members));
    const f = Number(fence.toString());
    if (!Number.isSafeInteger(f) || f < 1)
      throw new CorruptRecordError('the fence is not a positive integer');
    return { record, journal, fence: f };
  }

  async claim(edge_token: string): Promise<number | null> {
    const [rec, jnl] = this.keys(edge_token);
    return this.run('claim', () => this.scripted.awpClaim(rec, jnl));
  }

  async append(edge_token: string, fence: number, entries: readonly JournalEntry[]): Promise<void> {
    if (entries.length === 0) return;
    // Writers pass a bounded step of a journal (ReplayJournal.notDurable), so the spread below stays
    // far from the engine's argument limit (it throws past about 100,000).
    const [rec, jnl] = this.keys(edge_token);
    const args: (string | Buffer)[] = [String(fence)];
    for (const e of entries) args.push(String(e.status_seq), encodeEntry(e));
    const result = await this.run('append', () => this.scripted.awpAppend(rec, jnl, ...args));
    if (Array.isArray(result)) {
      const held = Number(result[1]);
      throw new JournalGapError(held, entries.find((e) => e.status_seq > held)?.status_seq ?? held + 1);
    }
    if (result === -3)
      throw new CorruptRecordError('session record: agent_ack is not an integer from 0 to 2^53 - 1');
    this.fenced(result);
  }

  async acknowledge(edge_token: string, fence: number, status_seq: number): Promise<void> {
    const [rec, jnl] = this.keys(edge_token);
    this.fenced(
      await this.run('acknowledge', () =>
        this.scripted.awpAcknowledge(rec, jnl, String(fence), String(status_seq)),
      ),
    );
  }

  async setSuspended(edge_token: string, fence: number, suspended_at_ms: number | null): Promise<void> {
    const [rec, jnl] = this.keys(edge_token);
    const at = suspended_at_ms === null ? '' : String(suspended_at_ms);
    this.fenced(
      await this.run('setSuspended', () => this.scripted.awpSetSuspended(rec, jnl, String(fence), at)),
    );
  }

  async setObserver(edge_token: string, fence: number, observer: ObserverRecord): Promise<void> {
    const [rec, jnl] = this.keys(edge_token);
    const encoded = encodeObserver(observer);
    this.fenced(
      await this.run('setObserver', () => this.scripted.awpSetObserver(rec, jnl, String(fence), encoded)),
    );
  }

  /**
   * Deletes the session's keys. With a fence, atomically only if no replica claimed it since; a
   * session kept that way is not an error (the caller is letting go of it either way).
   */
  async delete(edge_token: string, fence?: number): Promise<void> {
    const [rec, jnl] = this.keys(edge_token);
    await this.run('delete', () =>
      this.scripted.awpDelete(rec, jnl, fence === undefined ? '' : String(fence)),
    );
  }

  /**
   * The token epoch every replica shares (see TokenMint): set once (first writer wins) and read back.
   * If Redis loses its data the key is re-created with a new epoch, so old tokens stop matching.
   */
  async epoch(): Promise<Buffer> {
    const value = await this.run('epoch', () =>
      this.scripted.awpEpochBuffer(`${this.prefix}epoch`, randomBytes(EPOCH_BYTES)),
    );
    if (value?.length !== EPOCH_BYTES) {
      throw new StoreUnavailableError(
        `session store (${this.target}): ${this.prefix}epoch does not hold a 6-byte epoch`,
      );
    }
    return value;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.redis.status === 'ready' && !this.stalled) {
      try {
        await this.redis.quit();
        return;
      } catch {
        // fall through: the connection is going away anyway
      }
    }
    this.redis.disconnect();
  }

  private keys(edge_token: string): [string, string] {
    const tag = `${this.prefix}{${edge_token}}`;
    return [`${tag}:rec`, `${tag}:jnl`];
  }

  private fenced(result: number): void {
    if (result === -1) throw new FencedError();
  }

  /** Runs one command; every failure becomes a StoreUnavailableError naming the store, not its credentials. */
  private async run<T>(op: string, command: () => Promise<T>): Promise<T> {
    if (this.closed) throw new StoreUnavailableError(`session store (${this.target}) is closed`);
    if (this.stalled || this.redis.status !== 'ready') {
      const status = this.stalled ? 'stalled' : this.redis.status;
      const why = this.lastError === '' ? status : `${status}: ${this.lastError}`;
      throw new StoreUnavailableError(
        `session store (${this.target}) is unreachable (${why}); ${op} refused`,
      );
    }
    try {
      return await command();
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (message === COMMAND_TIMED_OUT) this.stall();
      throw new StoreUnavailableError(
        `session store (${this.target}): ${op} failed: ${this.redact(message)}`,
      );
    }
  }

  /**
   * Drops the connection of a command that timed out: ioredis then rejects every command still queued
   * on it (releasing their arguments) and reconnects; until it is ready again, operations are refused.
   */
  private stall(): void {
    if (this.stalled || this.closed) return;
    this.stalled = true;
    this.lastError = `a command got no reply within ${this.commandTimeoutMs} ms`;
    this.redis.disconnect(true);
  }

  private redact(message: string): string {
    return this.password === '' ? message : message.split(this.password).join('***');
  }
}

/** `new URL` puts its input on the error it throws; this one must not carry the URL (it may hold a password). */
function parseUrl(text: string): URL {
  try {
    return new URL(text);
  } catch {
    throw new StoreUnavailableError('session store URL is not a valid URL (expected redis://host:port)');
  }
}

/**
 * A journal's entries, decoded a slice per event-loop turn: a session whose agent never acknowledges has
 * a journal without bound (AWP-CTL-010), and decoding a million entries at once held the loop 1.5 s.
 */
async function decodeJournal(members: readonly Buffer[]): Promise<JournalEntry[]> {
  const entries: JournalEntry[] = [];
  for (let i = 0; i < members.length; i++) {
    entries.push(decodeEntry(members[i]!));
    if (i % DECODE_SLICE === DECODE_SLICE - 1) await new Promise((resolve) => setImmediate(resolve));
  }
  return entries;
}
