/**
 * What the demo agents share: a relay session through the edge that is kept up (reconnect after a loss,
 * a new session each time: a demo agent's moves need no continuity), and a record of the goals reached.
 */
import { AgentConnection, sleep, type Json } from './connection.js';

/** Well inside the demo arm's 2 s watchdog. */
const KEEPALIVE_MS = 500;

export interface DemoAgentOptions {
  /** The route's URL at the edge, e.g. ws://127.0.0.1:8720/worlds/arm. */
  readonly url: string;
  readonly token: string;
  /** Reports what the agent does (the demo logs it; tests collect it). */
  readonly log?: (line: string) => void;
}

/** A goal the agent reached, and where the world said the body was when it completed. */
export interface Reached {
  readonly goal: readonly number[];
  readonly observed: readonly number[];
}

export interface DemoAgent {
  readonly reached: readonly Reached[];
  /** Ends the session (`session.close`) and stops. */
  stop(): Promise<void>;
}

/** How an agent opens its session: its `initialize` and `session.open` parameters. */
export interface SessionPlan {
  readonly name: string;
  readonly modalities: readonly string[];
  readonly open: Json;
}

/** One session's work on `conn`, given the session's ready result: act until the connection closes or `stopped()`. */
export type SessionWork = (conn: AgentConnection, ready: Json, stopped: () => boolean) => Promise<void>;

/**
 * Keeps a session up: after a lost connection, reconnect and `session.resume` with the session token and the
 * last `status_seq` seen (the world still holds the embodiment for its reconnect window, so a new
 * `session.open` would be refused); a session that cannot be resumed is opened anew.
 */
export function keepRunning(
  opts: DemoAgentOptions,
  plan: SessionPlan,
  notifications: (method: string, params: Json) => void,
  work: SessionWork,
): { stop(): Promise<void> } {
  // An object, not a `let`: it is changed from stop(), which the loop's narrowing cannot see.
  const run = {
    stopped: false,
    current: undefined as AgentConnection | undefined,
    session: undefined as { token: string; lastSeq: number } | undefined,
  };
  const stopped = (): boolean => run.stopped;
  const heard = (method: string, params: Json) => {
    if (typeof params.status_seq === 'number' && run.session !== undefined)
      run.session.lastSeq = Math.max(run.session.lastSeq, params.status_seq);
    notifications(method, params);
  };
  const establish = async (conn: AgentConnection): Promise<Json> => {
    await initialize(conn, plan.name, [...plan.modalities]);
    const s = run.session;
    if (s !== undefined) {
      try {
        const ready = await conn.call('session.resume', {
          session_token: s.token,
          last_status_seq: s.lastSeq,
        });
        opts.log?.(`${plan.name}: resumed ${String(ready.session_id)}`);
        return ready;
      } catch (err) {
        opts.log?.(`${plan.name}: ${(err as Error).message}; opening a new session`);
        run.session = undefined;
      }
    }
    const ready = await conn.call('session.open', plan.open);
    run.session = { token: String(ready.session_token), lastSeq: 0 };
    opts.log?.(`${plan.name}: session ${String(ready.session_id)}`);
    return ready;
  };
  const loop = (async () => {
    while (!stopped()) {
      try {
        run.current = await AgentConnection.open(opts.url, opts.token, heard);
        run.current.keepAlive(KEEPALIVE_MS);
        await work(run.current, await establish(run.current), stopped);
      } catch (err) {
        if (!stopped()) opts.log?.(`${(err as Error).message}; reconnecting`);
      }
      run.current?.close();
      if (!stopped()) await sleep(1000);
    }
  })();
  return {
    async stop() {
      run.stopped = true;
      const c = run.current;
      if (c !== undefined && !c.closed) {
        await c.call('session.close', {}, 2000).catch(() => undefined);
        c.close();
      }
      await loop;
    },
  };
}

async function initialize(conn: AgentConnection, name: string, modalities: string[]): Promise<Json> {
  return conn.call('initialize', {
    protocol_versions: ['0.1'],
    agent: { name, version: '0.1.0', vendor: 'awp-edge' },
    consumes_modalities: modalities,
  });
}
