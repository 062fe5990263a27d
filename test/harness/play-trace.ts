/**
 * Plays a script over real WebSockets. The agent and the world each run their side of the script strictly
 * in trace order, concurrently:
 * - agent: sends its steps; for each delivered world step, the next message it receives must equal it;
 * - world: for each agent step, the next message it receives (on any connection) must equal it; it sends its
 *   steps on the connection the latest agent message arrived on.
 * A side sends a step only after it has received every message the trace puts before it, so with nothing in
 * between this is the trace's exact interleaving; with a proxy in between, the proxy may open upstream
 * connections and forward at its own pace. Connection drops ("control connection drops" markers and
 * `delivered: false` lines) are barriers: the agent abandons its connection first, then the world continues
 * (and sends an undelivered message into the void). A session.resume makes the world close its other open
 * connections, as a world replacing a connection does (AWP-SES-010). Every wait is bounded; on the first
 * divergence the other side is stopped, everything is closed, and a TracePlayError names the step.
 */
import type { Json, JsonObject, PlayScript, TraceEntry, TraceMessage } from './trace-types.js';
import { describeEntry } from './trace-types.js';
import { diffJson } from './json-diff.js';
import { methodOf, paramsOf, stringField } from './message-view.js';
import { transportActionOf } from './trace-loader.js';
import { ScriptedWorld, type WorldConnection } from './scripted-world.js';
import { ScriptedAgent, type AgentConnection } from './scripted-agent.js';
import { exactComparison } from './normalise.js';
import { Signal } from './signal.js';

export interface PlayOptions {
  /** Maps the scripted world's URL to the URL the agent dials (default: the world's own URL). Called for
   * every agent connection; a proxy under test is started here pointing upstream at `worldUrl`. */
  readonly agentUrl?: (worldUrl: string) => Promise<string>;
  /** The agent's credential, sent as `Authorization: Bearer <credential>`; none by default. */
  readonly credential?: string;
  /** Applied to both sides of every comparison (default: exact). Use `normaliseIllustrative` through a proxy. */
  readonly normalise?: (msg: Json) => Json;
  /** Bound on each wait for a message or a barrier (default 5000 ms). */
  readonly stepTimeoutMs?: number;
  /** Bound on opening a connection (default 5000 ms). */
  readonly connectTimeoutMs?: number;
  /** Quiet period after the last step in which neither side may receive anything more (default 100 ms). */
  readonly settleMs?: number;
  /** Called before each agent step is sent, e.g. to pace submissions under a rate envelope. */
  readonly beforeAgentStep?: (entry: TraceMessage, index: number) => Promise<void> | void;
}

export interface PlayResult {
  readonly worldUrl: string;
  /** Every message the agent received, in order. */
  readonly agentTranscript: JsonObject[];
  /** Every message the world received, in order. */
  readonly worldTranscript: JsonObject[];
  readonly agentConnections: readonly AgentConnection[];
  readonly worldConnections: readonly WorldConnection[];
  /** Entries the world sent that nobody received (`delivered: false`), with whether the write happened. */
  readonly undelivered: readonly { readonly entry: TraceMessage; readonly written: boolean }[];
}

/** A divergence between the wire and the trace, naming the step. */
export class TracePlayError extends Error {
  override readonly name = 'TracePlayError';
  constructor(
    readonly trace: string,
    /** 0-based index in the script's entries (prefix included); entries.length for "after the last step". */
    readonly index: number,
    readonly entry: TraceEntry | undefined,
    detail: string,
  ) {
    super(
      `${trace}: ${entry === undefined ? 'after the last step' : `entry ${index + 1}, ${describeEntry(entry)}`}: ${detail}`,
    );
  }
}

/** Entries at which the agent abandons its connection before the world goes on. */
function isDropPoint(entry: TraceEntry): boolean {
  if (entry.kind === 'marker') return transportActionOf(entry) === 'drop-control-connection';
  return entry.from === 'world' && !entry.delivered;
}

export async function playTrace(script: PlayScript, options: PlayOptions = {}): Promise<PlayResult> {
  const stepTimeoutMs = options.stepTimeoutMs ?? 5000;
  const connectTimeoutMs = options.connectTimeoutMs ?? 5000;
  const normalise = options.normalise ?? exactComparison;
  const world = await ScriptedWorld.start();
  const worldUrl = world.url;
  const agentUrl = options.agentUrl ?? ((url: string) => Promise.resolve(url));
  const agent = new ScriptedAgent({
    url: () => agentUrl(worldUrl),
    credential: options.credential,
    connectTimeoutMs,
  });
  const undelivered: { entry: TraceMessage; written: boolean }[] = [];
  const dropped = new Map<number, Signal>();
  script.entries.forEach((e, i) => {
    if (isDropPoint(e)) dropped.set(i, new Signal());
  });
  const failAt = (index: number, detail: string): TracePlayError =>
    new TracePlayError(script.name, index, script.entries[index], detail);
  const rethrowAt =
    (index: number) =>
    (err: unknown): never => {
      throw err instanceof TracePlayError ? err : failAt(index, (err as Error).message);
    };

  const agentSide = async (): Promise<void> => {
    for (const [index, entry] of script.entries.entries()) {
      if (isDropPoint(entry)) {
        await agent.dropConnection(connectTimeoutMs);
        dropped.get(index)!.fire();
        continue;
      }
      if (entry.kind === 'marker') continue;
      if (entry.from === 'agent') {
        await options.beforeAgentStep?.(entry, index);
        await agent.send(agent.prepare(entry.msg)).catch(rethrowAt(index));
        continue;
      }
      const arrival = await agent
        .nextMessage(stepTimeoutMs, () => `the agent received nothing within ${stepTimeoutMs} ms`)
        .catch(rethrowAt(index));
      compare('the agent', entry.msg, arrival.msg, normalise, (d) => failAt(index, d));
    }
  };

  const worldSide = async (): Promise<void> => {
    for (const [index, entry] of script.entries.entries()) {
      if (isDropPoint(entry)) {
        const describe = (): string => `the agent did not drop its connection within ${stepTimeoutMs} ms`;
        await dropped.get(index)!.wait(stepTimeoutMs, describe).catch(rethrowAt(index));
      }
      if (entry.kind === 'marker') continue;
      if (entry.from === 'agent') {
        const arrival = await world
          .nextMessage(stepTimeoutMs, () => `the world received nothing within ${stepTimeoutMs} ms`)
          .catch(rethrowAt(index));
        compare('the world', entry.msg, arrival.msg, normalise, (d) => failAt(index, d));
        checkResumeToken(entry.msg, arrival.msg, world.issuedToken, (d) => failAt(index, d));
        if (methodOf(entry.msg) === 'session.resume') world.replaceOtherConnections(arrival.connectionId);
        continue;
      }
      const outcome = await world.send(entry.msg, { timeoutMs: stepTimeoutMs, mayBeLost: !entry.delivered });
      if (!entry.delivered) undelivered.push({ entry, written: outcome.written });
      else if (!outcome.written)
        throw failAt(index, `the world had no open connection within ${stepTimeoutMs} ms`);
    }
  };

  let firstError: Error | undefined;
  const failFast = (side: Promise<void>): Promise<void> =>
    side.catch((err: unknown) => {
      if (firstError !== undefined) return;
      firstError = err instanceof Error ? err : new Error(String(err));
      const reason = 'stopped: the other side of the play failed';
      agent.abort(reason);
      world.abort(reason);
      for (const signal of dropped.values()) signal.abort(reason);
    });

  try {
    await Promise.all([failFast(agentSide()), failFast(worldSide())]);
    if (firstError !== undefined) throw firstError;

    await new Promise((resolve) => setTimeout(resolve, options.settleMs ?? 100));
    const extraAtWorld = world.drainUnexpected();
    const extraAtAgent = agent.drainUnexpected();
    if (extraAtWorld.length > 0 || extraAtAgent.length > 0) {
      const lines = [
        ...extraAtWorld.map((a) => `  world got on #${a.connectionId}: ${JSON.stringify(a.msg)}`),
        ...extraAtAgent.map((a) => `  agent got on #${a.connectionId}: ${JSON.stringify(a.msg)}`),
      ];
      throw new TracePlayError(
        script.name,
        script.entries.length,
        undefined,
        `unexpected messages:\n${lines.join('\n')}`,
      );
    }
    return {
      worldUrl,
      agentTranscript: agent.transcript,
      worldTranscript: world.transcript,
      agentConnections: agent.connections,
      worldConnections: world.connections,
      undelivered,
    };
  } finally {
    await agent.close();
    await world.close();
  }
}

function compare(
  receiver: string,
  expected: JsonObject,
  actual: JsonObject,
  normalise: (msg: Json) => Json,
  fail: (detail: string) => TracePlayError,
): void {
  const diffs = diffJson(normalise(expected), normalise(actual));
  if (diffs.length === 0) return;
  throw fail(
    `${receiver} received a different message:\n  ${diffs.join('\n  ')}\n` +
      `  expected: ${JSON.stringify(expected)}\n  received: ${JSON.stringify(actual)}`,
  );
}

/** session.resume must present the token this world issued, whatever token the agent was handed. */
function checkResumeToken(
  expected: JsonObject,
  actual: JsonObject,
  issued: string | undefined,
  fail: (detail: string) => TracePlayError,
): void {
  if (methodOf(expected) !== 'session.resume') return;
  const presented = stringField(paramsOf(actual), 'session_token');
  const want = issued ?? stringField(paramsOf(expected), 'session_token');
  if (presented !== want) {
    throw fail(
      `session.resume presented session_token ${JSON.stringify(presented)}, the world issued ${JSON.stringify(want)}`,
    );
  }
}

/** The messages one side sends in the script (by default only those the other side receives). */
export function messagesFrom(
  entries: readonly TraceEntry[],
  from: 'agent' | 'world',
  deliveredOnly = true,
): JsonObject[] {
  return entries
    .filter(
      (e): e is TraceMessage => e.kind === 'message' && e.from === from && (!deliveredOnly || e.delivered),
    )
    .map((e) => e.msg);
}
