/**
 * The chaos scenarios: forced agent drops (one edge, memory store; and two replicas sharing Redis,
 * resuming at the other replica each time), world SIGKILL, Redis restart, replica SIGKILL. Each starts its own processes on 127.0.0.1 (edge replicas as
 * `awp-edge serve` children, see test/support/edge-process.ts; redis-server as test/support/redis.ts
 * runs it; the demo arm world in this process where the run needs the world's own status_seq
 * numbering as ground truth, in a child where it is SIGKILLed), drives relay agents and fan-out
 * observers through the faults, and returns counts plus the invariants that failed.
 *
 * Relay agents open observer-mode sessions on a route with `observers: relay` (the arm world binds
 * one embodiment per session): each is a real upstream session, relayed, journaled and resumable, as
 * test/scale/drain-200.test.ts does. Their status_seq traffic is the world's e-stop toggled at a steady
 * rate (one `world.event` per toggle per session) plus the world's own `session.state` transitions
 * (`suspended`, `resumed`) around every drop. In the drop scenarios agent 0 acts instead (binds
 * arm_01 and keeps submitting moves), so result-reported transitions are counted too.
 */
import { startDemoWorld, type RunningDemoWorld } from '../../src/demo/index.js';
import {
  httpStatus,
  startEdgeProcess,
  type EdgeProcess,
  type EdgeProcessRoute,
} from '../support/edge-process.js';
import { startRedis, type TestRedis } from '../support/redis.js';
import { ObserverPool, type ObserverStats } from './observers.js';
import { ChaosRelayAgent, account, contiguity, errMessage, sleep, type RetryPolicy } from './relay-agent.js';
import { estopTraffic, spawnArmWorld, type ArmWorldProcess } from './world.js';

export interface Profile {
  readonly name: string;
  /** Scenario 1: forced drops in total, over `agents` relay agents. */
  readonly drops: number;
  readonly agents: number;
  readonly observers: number;
  /** Longest time an agent stays connected between drops, and away after one. */
  readonly maxDwellMs: number;
  readonly maxAwayMs: number;
  /** Chance that a resume is sent and dropped within 30 ms, before the real one. */
  readonly abandonChance: number;
  /** E-stop toggle period: each toggle is one status_seq per session. */
  readonly estopPeriodMs: number;
  readonly cameraBytes: number;
  /** Scenario 2: world kills; time it stays down; load before and after each. */
  readonly worldKills: number;
  readonly worldDownMs: number;
  /** Scenario 3: Redis restarts; time it stays down. */
  readonly redisRestarts: number;
  readonly redisDownMs: number;
  /** Load phases between faults. */
  readonly phaseMs: number;
  /** Scenario 4: relay agents at the replica that is killed. */
  readonly failoverAgents: number;
  /** Drop scenarios: agent 0 acts (binds arm_01 and keeps submitting moves: result-reported seqs). */
  readonly actor: boolean;
  /** Self-check only: agents resume this far from the highest status_seq they saw. */
  readonly resumeSkew: number;
  /** Bound on each scenario (it is failed and torn down past this). */
  readonly scenarioTimeoutMs: number;
}

export interface ScenarioResult {
  scenario: string;
  ok: boolean;
  duration_ms: number;
  sessions: number;
  /** status_seq accounted for (every one the world issued to a checked session). */
  status_seq_checked: number;
  drops: number;
  resumes: number;
  opens: number;
  abandoned_resumes: number;
  lost: number;
  duplicated: number;
  reordered: number;
  errors: number;
  retryable: Record<string, number>;
  agent_closes: Record<string, number>;
  observers: ObserverStats | null;
  notes: Record<string, unknown>;
  failures: string[];
}

const RETRY: RetryPolicy = { deadlineMs: 45_000, backoffMs: 100, maxBackoffMs: 1000 };

/** Teardown registered by a scenario, run in reverse order whatever happens. */
export class Scope {
  private readonly fns: (() => Promise<void> | void)[] = [];
  add(fn: () => Promise<void> | void): void {
    this.fns.push(fn);
  }
  async close(): Promise<void> {
    for (const fn of this.fns.splice(0).reverse()) {
      try {
        await fn();
      } catch {
        // every process must still be stopped
      }
    }
  }
}

/** Results accumulate here as the scenario runs, so a timeout still reports what was seen. */
export function newResult(scenario: string): ScenarioResult {
  return {
    scenario,
    ok: false,
    duration_ms: 0,
    sessions: 0,
    status_seq_checked: 0,
    drops: 0,
    resumes: 0,
    opens: 0,
    abandoned_resumes: 0,
    lost: 0,
    duplicated: 0,
    reordered: 0,
    errors: 0,
    retryable: {},
    agent_closes: {},
    observers: null,
    notes: {},
    failures: [],
  };
}

function credentials(prefix: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `chaos-${prefix}-${i}-credential`);
}

function routes(upstream: string): EdgeProcessRoute[] {
  return [
    { name: 'relay', path: '/relay', upstream, observers: 'relay' },
    { name: 'fan', path: '/fan', upstream, observers: 'fanout', hub_linger_ms: 1000 },
  ];
}

async function edgeProcess(
  scope: Scope,
  upstream: string,
  tokens: readonly string[],
  redisUrl?: string,
): Promise<EdgeProcess> {
  const edge = await startEdgeProcess({
    routes: routes(upstream),
    agentTokens: tokens,
    startTimeoutMs: 30_000,
    // One prefix per Redis server (each scenario starts its own): replicas must share it.
    ...(redisUrl !== undefined && { redisUrl, keyPrefix: 'awp-chaos:' }),
  });
  scope.add(() => edge.stop());
  return edge;
}

async function inProcessWorld(scope: Scope, p: Profile): Promise<RunningDemoWorld> {
  const world = await startDemoWorld({
    kind: 'arm',
    host: '127.0.0.1',
    port: 0,
    heartbeatIntervalMs: 1000,
    reconnectWindowMs: 60_000,
    cameraBytes: p.cameraBytes,
  });
  scope.add(() => world.close());
  return world;
}

async function inBatches<T>(items: readonly T[], size: number, fn: (t: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(fn));
}

function rand(maxMs: number): number {
  return Math.floor(Math.random() * (maxMs + 1));
}

/** One forced drop of `agent` after a random dwell, then its resume (retried as documented). */
async function dropAndResume(agent: ChaosRelayAgent, p: Profile, r: ScenarioResult): Promise<void> {
  await sleep(rand(p.maxDwellMs));
  await agent.drop();
  if (Math.random() < 0.5) await sleep(rand(p.maxAwayMs));
  if (Math.random() < p.abandonChance) await agent.abandonResume(rand(30));
  const outcome = await agent.resume();
  if (outcome === 'unknown') {
    r.failures.push(`${agent.label}: AWP_SESSION_UNKNOWN for a session the world still holds`);
    await agent.reopen();
  }
}

/**
 * Waits until each agent has received everything the world numbered for its session (bounded), then
 * compares, closing the connection; the world's count is read before the close (which adds a seq).
 */
async function settleAgainstWorld(
  agents: readonly ChaosRelayAgent[],
  world: RunningDemoWorld,
  r: ScenarioResult,
  timeoutMs: number,
): Promise<void> {
  const issued = (a: ChaosRelayAgent): number => world.world.sessions.get(a.sessionId ?? '')?.statusSeq ?? -1;
  const end = performance.now() + timeoutMs;
  while (performance.now() < end && agents.some((a) => a.lastSeq() < issued(a))) await sleep(50);
  for (const a of agents) {
    const before = issued(a);
    if (before < 0) {
      r.failures.push(`${a.label}: the world holds no session ${String(a.sessionId)}`);
      continue;
    }
    await a.finish();
    const after = issued(a);
    const { lost, duplicated, phantom } = account(a.seen, before);
    r.status_seq_checked += before;
    const late = phantom.filter((s) => s > after);
    addCounts(r, a, lost, duplicated);
    if (lost.length > 0) r.failures.push(`${a.label}: lost status_seq ${fmt(lost)} of 1..${before}`);
    if (duplicated.length > 0) r.failures.push(`${a.label}: duplicated status_seq ${fmt(duplicated)}`);
    if (late.length > 0) r.failures.push(`${a.label}: status_seq the world never issued: ${fmt(late)}`);
    if (a.reordered > 0)
      r.failures.push(`${a.label}: ${a.reordered} status_seq out of order on a connection`);
  }
}

function addCounts(r: ScenarioResult, a: ChaosRelayAgent, lost: number[], duplicated: number[]): void {
  r.lost += lost.length;
  r.duplicated += duplicated.length;
  r.reordered += a.reordered;
}

function fmt(xs: number[]): string {
  return xs.length > 12 ? `${JSON.stringify(xs.slice(0, 12))}... (${xs.length})` : JSON.stringify(xs);
}

const tracked = new WeakMap<ScenarioResult, readonly ChaosRelayAgent[]>();
const folded = new WeakSet<ScenarioResult>();

/** Registers a scenario's agents so that their tallies reach the result even if it aborts. */
function track(r: ScenarioResult, agents: readonly ChaosRelayAgent[]): readonly ChaosRelayAgent[] {
  tracked.set(r, agents);
  return agents;
}

/** Folds the agents' tallies into the result (once). */
export function foldTallies(r: ScenarioResult): void {
  if (folded.has(r)) return;
  folded.add(r);
  for (const a of tracked.get(r) ?? []) {
    r.drops += a.tally.drops;
    r.resumes += a.tally.resumes;
    r.opens += a.tally.opens;
    r.abandoned_resumes += a.tally.abandoned;
    r.sessions += 1 + a.past.length;
    for (const [k, n] of a.tally.retryable) r.retryable[k] = (r.retryable[k] ?? 0) + n;
    for (const [k, n] of a.tally.closes) r.agent_closes[String(k)] = (r.agent_closes[String(k)] ?? 0) + n;
  }
}

interface Sample {
  readonly name: string;
  readonly labels: string;
  readonly value: number;
}

/** One scrape of the edge's /metrics (Prometheus text), bounded. */
async function scrape(edge: EdgeProcess): Promise<Sample[]> {
  const res = await fetch(`${edge.adminUrl}/metrics`, { signal: AbortSignal.timeout(3000) });
  const text = await res.text();
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-z_:][a-z0-9_:]*)(\{[^}]*\})? (\S+)$/i.exec(line);
    if (m !== null) out.push({ name: m[1]!, labels: m[2] ?? '', value: Number(m[3]) });
  }
  return out;
}

/**
 * What the edge holds once every relay agent has gone: no relay connection on either side (the
 * edge mirrors an agent's drop upstream at once), no negative gauge, no contained internal error.
 */
async function edgeAccounts(edge: EdgeProcess, label: string, r: ScenarioResult): Promise<void> {
  const relayOpen = (xs: Sample[]): number =>
    xs
      .filter(
        (x) =>
          (x.name === 'awp_edge_upstream_connections' || x.name === 'awp_edge_agent_connections') &&
          x.labels.includes('route="relay"'),
      )
      .reduce((n, x) => n + x.value, 0);
  let samples = await scrape(edge);
  const end = performance.now() + 5000;
  while (relayOpen(samples) > 0 && performance.now() < end) {
    await sleep(200);
    samples = await scrape(edge);
  }
  if (relayOpen(samples) > 0)
    r.failures.push(
      `${label}: ${relayOpen(samples)} relay connections still counted 5 s after every agent left`,
    );
  for (const x of samples) {
    if (x.name.startsWith('awp_edge_') && !x.name.endsWith('_total') && x.value < 0)
      r.failures.push(`${label}: gauge ${x.name}${x.labels} is ${x.value}`);
    if (x.name === 'awp_edge_internal_errors_total' && x.value > 0)
      r.failures.push(`${label}: ${x.name}${x.labels} ${x.value}`);
  }
  if (!samples.some((x) => x.name === 'awp_edge_internal_errors_total'))
    r.failures.push(`${label}: /metrics carried no awp_edge_internal_errors_total (scrape not understood)`);
  const rss = samples.find((x) => x.name === 'process_resident_memory_bytes');
  if (rss !== undefined) r.notes[`${label}_rss_mib`] = Math.round(rss.value / 1048576);
}

/** The edge is still serving: running, /healthz answers, nothing unhandled on stderr. */
async function edgeHealthy(
  edge: EdgeProcess,
  label: string,
  r: ScenarioResult,
  agentsGone = true,
): Promise<void> {
  if (!edge.running) {
    const exit = await edge.exited;
    r.failures.push(
      `${label} exited (code ${String(exit.code)}, signal ${String(exit.signal)}): ${edge.stderr.slice(-2000)}`,
    );
    return;
  }
  const health = await httpStatus(`${edge.adminUrl}/healthz`);
  if (health !== 200) r.failures.push(`${label} /healthz answered ${health}`);
  if (agentsGone)
    await edgeAccounts(edge, label, r).catch((err: unknown) =>
      r.failures.push(`${label}: /metrics: ${errMessage(err)}`),
    );
  if (/Unhandled|TypeError|RangeError|ReferenceError/.test(edge.stderr))
    r.failures.push(`${label} stderr: ${edge.stderr.slice(-2000)}`);
  const internal = edge.logs.filter((l) => l.event === 'internal_error').length;
  if (internal > 0) r.failures.push(`${label} logged ${internal} internal_error lines`);
  // Error-level log lines by event (an outage is expected to log some; their kinds are reported).
  const byEvent: Record<string, number> = {};
  for (const l of edge.logs) {
    if (typeof l.level !== 'number' || l.level < 50) continue;
    const key = l.event ?? l.msg ?? 'unnamed';
    byEvent[key] = (byEvent[key] ?? 0) + 1;
  }
  r.notes[`${label}_error_log_lines`] = byEvent;
}

function checkObservers(r: ScenarioResult, pool: ObserverPool): void {
  const s = pool.stats();
  r.observers = s;
  if (s.frames === 0) r.failures.push('observers received no frames (no fan-out load)');
  if (s.order_violations > 0) r.failures.push(`observers: ${s.order_violations} frames out of seq order`);
  if (s.reliable_gaps > 0)
    r.failures.push(`observers: ${s.reliable_gaps} reliable-channel gaps without resync`);
  if (s.first_reliable_without_resync > 0)
    r.failures.push(
      `observers: ${s.first_reliable_without_resync} sessions began a reliable channel without resync`,
    );
  for (const e of s.errors) r.failures.push(e);
}

async function openAgents(agents: readonly ChaosRelayAgent[]): Promise<void> {
  await inBatches(agents, 10, (a) => a.open());
}

// --------------------------------------------------------------------------------------------------

/** 1: forced agent drops under fan-out load; every status_seq once (memory store, one edge). */
export function agentDrops(p: Profile, scope: Scope, r: ScenarioResult): Promise<void> {
  return drops(p, scope, r, false);
}

/**
 * 1b: the same drops with two replicas sharing a Redis store, each resume at the other replica than
 * the one the agent was dropped from: every resume is a claim (fencing) and a replay from Redis.
 */
export function sharedDrops(p: Profile, scope: Scope, r: ScenarioResult): Promise<void> {
  return drops(p, scope, r, true);
}

async function drops(p: Profile, scope: Scope, r: ScenarioResult, shared: boolean): Promise<void> {
  const world = await inProcessWorld(scope, p);
  const relayCreds = credentials('drop-agent', p.agents);
  const obsCreds = credentials('drop-observer', p.observers);
  const tokens = [...relayCreds, ...obsCreds];
  let redisUrl: string | undefined;
  if (shared) {
    const redis = await startRedis();
    scope.add(() => redis.dispose());
    redisUrl = redis.url;
  }
  const edges = await Promise.all(
    (shared ? [0, 1] : [0]).map(() => edgeProcess(scope, world.url, tokens, redisUrl)),
  );
  const pool = new ObserverPool(edges[0]!.url('/fan'), obsCreds, 20_000);
  scope.add(() => pool.stop());
  await pool.start();
  const agents = relayCreds.map(
    (c, i) =>
      new ChaosRelayAgent(
        p.actor && i === 0 ? 'actor-0' : `agent-${i}`,
        c,
        edges[0]!.url('/relay'),
        RETRY,
        p.resumeSkew,
        p.actor && i === 0 ? 'arm_01' : undefined,
      ),
  );
  track(r, agents);
  scope.add(() => Promise.all(agents.map((a) => a.finish())).then(() => undefined));
  await openAgents(agents);
  const stopTraffic = estopTraffic(
    (on) => (on ? world.engageEstop('chaos') : world.releaseEstop()),
    p.estopPeriodMs,
  );
  scope.add(stopTraffic);

  let remaining = p.drops;
  const started = performance.now();
  await Promise.all(
    agents.map(async (a, i) => {
      let k = 0;
      while (remaining > 0) {
        remaining -= 1;
        k += 1;
        // Shared store: agent i resumes at replica (i + k) % 2, the other one each time.
        if (shared) a.url = edges[(i + k) % 2]!.url('/relay');
        try {
          await dropAndResume(a, p, r);
        } catch (err) {
          r.errors += 1;
          r.failures.push(`${a.label}: ${errMessage(err)}`);
          return;
        }
      }
    }),
  );
  r.notes.drop_phase_ms = Math.round(performance.now() - started);
  stopTraffic();
  if (!(await pool.settled(10_000))) r.failures.push('observers did not all have a live session with frames');
  await settleAgainstWorld(agents, world, r, 15_000);
  foldTallies(r);
  r.notes.world_sessions = world.world.sessions.size;
  if (p.actor) {
    r.notes.actor_actions = agents[0]!.actions;
    if (agents[0]!.actions.admitted === 0) r.failures.push('the acting agent had no action admitted');
  }
  checkObservers(r, pool);
  for (const [i, edge] of edges.entries())
    await edgeHealthy(edge, edges.length > 1 ? `replica_${i}` : 'edge', r);
  if (r.drops !== p.drops) r.failures.push(`${r.drops} drops done of ${p.drops}`);
  if (r.resumes < r.drops) r.failures.push(`${r.resumes} resumes for ${r.drops} drops`);
}

/** 2: the world SIGKILLed and restarted under load; the edge survives; agents and observers recover. */
export async function worldKill(p: Profile, scope: Scope, r: ScenarioResult): Promise<void> {
  const worldOptions = { reconnectWindowMs: 60_000, cameraBytes: p.cameraBytes };
  let world: ArmWorldProcess = await spawnArmWorld({ port: 0, ...worldOptions });
  scope.add(() => world.stop());
  const n = Math.max(2, Math.floor(p.agents / 2));
  const relayCreds = credentials('wk-agent', n);
  const obsCreds = credentials('wk-observer', p.observers);
  const edge = await edgeProcess(scope, world.url, [...relayCreds, ...obsCreds]);
  const pool = new ObserverPool(edge.url('/fan'), obsCreds, p.worldDownMs + 45_000);
  scope.add(() => pool.stop());
  await pool.start();
  const agents = relayCreds.map((c, i) => new ChaosRelayAgent(`agent-${i}`, c, edge.url('/relay'), RETRY));
  track(r, agents);
  scope.add(() => Promise.all(agents.map((a) => a.finish())).then(() => undefined));
  await openAgents(agents);
  const stopTraffic = estopTraffic((on) => world.estop(on), p.estopPeriodMs);
  scope.add(stopTraffic);

  const closeCodes: Record<string, number> = {};
  const recovery: number[] = [];
  let resumedAcross = 0;
  for (let k = 0; k < p.worldKills; k++) {
    // Load, with drops, before the kill: sessions the edge holds are mid-traffic.
    await Promise.all(agents.map((a) => dropAndResume(a, p, r)));
    await sleep(p.phaseMs);
    const port = world.port;
    world.kill('SIGKILL');
    await world.exited;
    const killedAt = performance.now();
    // Each agent: its connection closes (1014, the world is gone), it comes back at once and resumes,
    // retrying while the world is down; the restarted world no longer holds the session (2005).
    const back = agents.map(async (a) => {
      const closed = await a.lost(10_000).catch(() => null);
      const key = closed === null ? 'not closed' : String(closed.code);
      closeCodes[key] = (closeCodes[key] ?? 0) + 1;
      if (closed?.code !== 1014)
        r.failures.push(`${a.label}: closed ${JSON.stringify(closed)} on world loss, not 1014`);
      const outcome = await a.resume();
      if (outcome === 'unknown') await a.reopen();
      else resumedAcross += 1;
      recovery.push(performance.now() - killedAt);
    });
    await sleep(p.worldDownMs);
    world = await spawnArmWorld({ port, ...worldOptions });
    await Promise.all(
      back.map((b) =>
        b.catch((err: unknown) => {
          r.errors += 1;
          r.failures.push(errMessage(err));
        }),
      ),
    );
    if (!(await pool.settled(30_000)))
      r.failures.push(`observers did not resync within 30 s of world restart ${k + 1}`);
    await edgeHealthy(edge, 'edge', r, false);
  }
  // Load after the last restart, with drops on the new sessions.
  await Promise.all(
    agents.map((a) =>
      dropAndResume(a, p, r).catch((err: unknown) => {
        r.errors += 1;
        r.failures.push(`${a.label}: ${errMessage(err)}`);
      }),
    ),
  );
  await sleep(p.phaseMs);
  stopTraffic();
  await sleep(500);
  for (const a of agents) await a.finish();
  foldTallies(r);
  // No world-side count here (the world is another process): every session's seqs must be 1..max, once.
  for (const a of agents) {
    for (const s of [
      ...a.past.map((x) => ({ seen: x.seen, id: x.sessionId, reordered: x.reordered })),
      { seen: a.seen, id: a.sessionId, reordered: a.reordered },
    ]) {
      const { lost, duplicated } = contiguity(s.seen);
      r.status_seq_checked += s.seen.size;
      r.lost += lost.length;
      r.duplicated += duplicated.length;
      r.reordered += s.reordered;
      if (lost.length > 0) r.failures.push(`${a.label} session ${String(s.id)}: gaps ${fmt(lost)}`);
      if (duplicated.length > 0)
        r.failures.push(`${a.label} session ${String(s.id)}: duplicated ${fmt(duplicated)}`);
      if (s.reordered > 0) r.failures.push(`${a.label} session ${String(s.id)}: ${s.reordered} out of order`);
    }
  }
  r.notes.agent_close_codes_on_world_kill = closeCodes;
  r.notes.agent_recovery_ms_max = Math.round(Math.max(0, ...recovery));
  r.notes.world_kills = p.worldKills;
  r.notes.resumed_across_world_restart = resumedAcross;
  checkObservers(r, pool);
  if ((r.observers?.reopened ?? 0) < p.observers * p.worldKills)
    r.failures.push(
      `observers reopened ${r.observers?.reopened ?? 0} sessions, expected ${p.observers * p.worldKills}`,
    );
  await edgeHealthy(edge, 'edge', r);
}

/** 3: Redis stopped and restarted under load; sessions survive or fail retryably; all recover. */
export async function redisRestart(p: Profile, scope: Scope, r: ScenarioResult): Promise<void> {
  const redis: TestRedis = await startRedis({ appendonly: true });
  scope.add(() => redis.dispose());
  const world = await inProcessWorld(scope, p);
  const n = Math.max(2, Math.floor(p.agents / 2));
  const relayCreds = credentials('rr-agent', n);
  const obsCreds = credentials('rr-observer', p.observers);
  const edge = await edgeProcess(scope, world.url, [...relayCreds, ...obsCreds], redis.url);
  const pool = new ObserverPool(edge.url('/fan'), obsCreds, 30_000);
  scope.add(() => pool.stop());
  await pool.start();
  const agents = relayCreds.map((c, i) => new ChaosRelayAgent(`agent-${i}`, c, edge.url('/relay'), RETRY));
  track(r, agents);
  scope.add(() => Promise.all(agents.map((a) => a.finish())).then(() => undefined));
  await openAgents(agents);
  const stopTraffic = estopTraffic(
    (on) => (on ? world.engageEstop('chaos') : world.releaseEstop()),
    p.estopPeriodMs,
  );
  scope.add(stopTraffic);

  // Agents keep dropping and resuming through the outages.
  let running = true;
  const churn = agents.map(async (a) => {
    while (running) {
      try {
        await dropAndResume(a, { ...p, maxDwellMs: p.maxDwellMs * 3 }, r);
      } catch (err) {
        r.errors += 1;
        r.failures.push(`${a.label}: ${errMessage(err)}`);
        return;
      }
    }
  });
  const outages: { down_ms: number; ready_again_ms: number }[] = [];
  for (let k = 0; k < p.redisRestarts; k++) {
    await sleep(p.phaseMs);
    await redis.stop();
    const down = performance.now();
    await sleep(p.redisDownMs);
    await redis.restart();
    const up = performance.now();
    const end = up + 15_000;
    while ((await edge.readyz()) !== 200 && performance.now() < end) await sleep(100);
    if ((await edge.readyz()) !== 200) r.failures.push(`edge not ready 15 s after Redis restart ${k + 1}`);
    outages.push({ down_ms: Math.round(up - down), ready_again_ms: Math.round(performance.now() - up) });
  }
  await sleep(p.phaseMs);
  running = false;
  await Promise.all(churn);
  stopTraffic();
  await settleAgainstWorld(agents, world, r, 15_000);
  foldTallies(r);
  r.notes.outages = outages;
  checkObservers(r, pool);
  await edgeHealthy(edge, 'edge', r);
}

/** 4: SIGKILL of one of two replicas (Redis store); every relay session resumes at the other. */
export async function replicaKill(p: Profile, scope: Scope, r: ScenarioResult): Promise<void> {
  const redis = await startRedis();
  scope.add(() => redis.dispose());
  const world = await inProcessWorld(scope, p);
  const relayCreds = credentials('rk-agent', p.failoverAgents);
  const obsCreds = credentials('rk-observer', p.observers);
  const tokens = [...relayCreds, ...obsCreds];
  const [a, b] = await Promise.all([
    edgeProcess(scope, world.url, tokens, redis.url),
    edgeProcess(scope, world.url, tokens, redis.url),
  ]);
  // Fan-out load on the surviving replica: its observers must not notice A's death.
  const pool = new ObserverPool(b.url('/fan'), obsCreds, 20_000);
  scope.add(() => pool.stop());
  await pool.start();
  const agents = relayCreds.map((c, i) => new ChaosRelayAgent(`agent-${i}`, c, a.url('/relay'), RETRY));
  track(r, agents);
  scope.add(() => Promise.all(agents.map((x) => x.finish())).then(() => undefined));
  await openAgents(agents);
  const stopTraffic = estopTraffic(
    (on) => (on ? world.engageEstop('chaos') : world.releaseEstop()),
    p.estopPeriodMs,
  );
  scope.add(stopTraffic);

  await Promise.all(agents.map((x) => dropAndResume(x, p, r)));
  await sleep(p.phaseMs);
  a.kill('SIGKILL');
  const killedAt = performance.now();
  const closeCodes: Record<string, number> = {};
  const resumedAfter: number[] = [];
  await Promise.all(
    agents.map(async (x) => {
      try {
        const closed = await x.lost(10_000).catch(() => null);
        const key = closed === null ? 'not closed' : String(closed.code);
        closeCodes[key] = (closeCodes[key] ?? 0) + 1;
        x.url = b.url('/relay');
        const outcome = await x.resume();
        if (outcome === 'unknown') {
          r.failures.push(`${x.label}: AWP_SESSION_UNKNOWN at the other replica`);
          await x.reopen();
        }
        resumedAfter.push(performance.now() - killedAt);
      } catch (err) {
        r.errors += 1;
        r.failures.push(`${x.label}: ${errMessage(err)}`);
      }
    }),
  );
  // Load at B, with a drop and resume each there too.
  await Promise.all(
    agents.map((x) =>
      dropAndResume(x, p, r).catch((err: unknown) => {
        r.errors += 1;
        r.failures.push(`${x.label}: ${errMessage(err)}`);
      }),
    ),
  );
  await sleep(p.phaseMs);
  stopTraffic();
  await settleAgainstWorld(agents, world, r, 15_000);
  foldTallies(r);
  const exit = await a.exited;
  if (exit.signal !== 'SIGKILL') r.failures.push(`replica A exited ${JSON.stringify(exit)}, not by SIGKILL`);
  const resumedAtB = b.logs.filter((l) => l.event === 'session_resumed').length;
  r.notes.agent_close_codes_on_replica_kill = closeCodes;
  r.notes.resumed_at_b_logged = resumedAtB;
  r.notes.resume_after_kill_ms_max = Math.round(Math.max(0, ...resumedAfter));
  if (resumedAtB < p.failoverAgents)
    r.failures.push(`B logged ${resumedAtB} resumes for ${p.failoverAgents} sessions`);
  checkObservers(r, pool);
  if ((r.observers?.reopened ?? 0) > 0)
    r.failures.push(`observers at B lost ${r.observers?.reopened} sessions`);
  await edgeHealthy(b, 'replica_b', r);
}
