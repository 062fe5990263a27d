/**
 * The chaos run (issue 12, item 9): faults under load against real edge processes on 127.0.0.1, with
 * status_seq accounting per relay session. Prints one JSON summary on stdout and exits 1 if an
 * invariant failed (or a scenario overran its bound), 0 otherwise.
 *
 *   npm run test:chaos        # the long run: 1,000 forced agent drops, 3 world kills, 3 Redis restarts
 *   npm run test:chaos:ci     # the short one (--profile ci): 100 drops, one of each fault
 *   node --import tsx test/chaos/run.ts [--profile ci|long] [--only drops,shared-drops,world,redis,replica]
 *                                        [--drops N] [--agents N] [--observers N] [--no-self-check]
 * Every parameter can also come from the environment: AWP_CHAOS_PROFILE, AWP_CHAOS_ONLY,
 * AWP_CHAOS_DROPS, AWP_CHAOS_AGENTS, AWP_CHAOS_OBSERVERS, AWP_CHAOS_SELF_CHECK=0. Progress goes to
 * stderr. The self-check (on by default) first proves the accounting: agents that resume one
 * status_seq behind (or ahead of) what they saw must be reported as duplicates (or a loss).
 */
import { parseArgs } from 'node:util';
import { format } from 'node:util';
import type { Profile, ScenarioResult, Scope as ScopeType } from './scenarios.js';
import { redisServerAvailable } from '../support/redis.js';

// stdout carries the summary only: libraries that log on import (the WebTransport client prints its
// missing HTTP/3 transport) go to stderr. Set before the scenarios are imported, hence the dynamic import.
for (const level of ['log', 'info', 'warn', 'debug'] as const) {
  console[level] = (...args: unknown[]) => process.stderr.write(`${format(...args)}\n`);
}
const { Scope, agentDrops, foldTallies, newResult, redisRestart, replicaKill, sharedDrops, worldKill } =
  await import('./scenarios.js');

const PROFILES: Record<string, Profile> = {
  long: {
    name: 'long',
    drops: 1000,
    agents: 20,
    observers: 8,
    maxDwellMs: 400,
    maxAwayMs: 300,
    abandonChance: 0.1,
    estopPeriodMs: 50,
    cameraBytes: 16_384,
    worldKills: 3,
    worldDownMs: 2000,
    redisRestarts: 3,
    redisDownMs: 2000,
    phaseMs: 3000,
    failoverAgents: 30,
    actor: true,
    resumeSkew: 0,
    scenarioTimeoutMs: 600_000,
  },
  ci: {
    name: 'ci',
    drops: 100,
    agents: 10,
    observers: 4,
    maxDwellMs: 300,
    maxAwayMs: 200,
    abandonChance: 0.1,
    estopPeriodMs: 50,
    cameraBytes: 8192,
    worldKills: 1,
    worldDownMs: 1500,
    redisRestarts: 1,
    redisDownMs: 1500,
    phaseMs: 1500,
    failoverAgents: 10,
    actor: true,
    resumeSkew: 0,
    scenarioTimeoutMs: 90_000,
  },
};

const SCENARIOS: Record<string, (p: Profile, s: ScopeType, r: ScenarioResult) => Promise<void>> = {
  drops: agentDrops,
  'shared-drops': sharedDrops,
  world: worldKill,
  redis: redisRestart,
  replica: replicaKill,
};
const NEEDS_REDIS = new Set(['shared-drops', 'redis', 'replica']);

function int(v: string | undefined, what: string): number | undefined {
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${what} must be a positive integer, got ${v}`);
  return n;
}

function options(): { profile: Profile; only: string[]; selfCheck: boolean } {
  const { values } = parseArgs({
    options: {
      profile: { type: 'string' },
      only: { type: 'string' },
      drops: { type: 'string' },
      agents: { type: 'string' },
      observers: { type: 'string' },
      'no-self-check': { type: 'boolean', default: false },
    },
  });
  const env = process.env;
  const name = values.profile ?? env.AWP_CHAOS_PROFILE ?? 'long';
  const base = PROFILES[name];
  if (base === undefined) throw new Error(`unknown profile ${name} (${Object.keys(PROFILES).join(', ')})`);
  const drops = int(values.drops ?? env.AWP_CHAOS_DROPS, '--drops');
  const agents = int(values.agents ?? env.AWP_CHAOS_AGENTS, '--agents');
  const observers = int(values.observers ?? env.AWP_CHAOS_OBSERVERS, '--observers');
  const profile: Profile = {
    ...base,
    ...(drops !== undefined && { drops }),
    ...(agents !== undefined && { agents }),
    ...(observers !== undefined && { observers }),
  };
  const only = (values.only ?? env.AWP_CHAOS_ONLY ?? Object.keys(SCENARIOS).join(','))
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (const s of only) if (SCENARIOS[s] === undefined) throw new Error(`unknown scenario ${s}`);
  return { profile, only, selfCheck: !values['no-self-check'] && env.AWP_CHAOS_SELF_CHECK !== '0' };
}

async function runOne(name: string, p: Profile): Promise<ScenarioResult> {
  const r = newResult(name);
  const scope = new Scope();
  const t0 = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      SCENARIOS[name]!(p, scope, r),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`scenario overran its bound of ${p.scenarioTimeoutMs} ms`)),
          p.scenarioTimeoutMs,
        );
      }),
    ]);
  } catch (err) {
    r.errors += 1;
    r.failures.push(`scenario aborted: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  } finally {
    clearTimeout(timer);
    await scope.close();
    foldTallies(r);
  }
  r.duration_ms = Math.round(performance.now() - t0);
  r.ok = r.failures.length === 0;
  return r;
}

/**
 * The accounting must see what it claims to: a short drop run whose agents resume one status_seq
 * behind what they saw has to report duplicates, one ahead has to report a loss (or a refusal).
 */
async function selfCheck(p: Profile): Promise<Record<string, unknown>> {
  const short = { ...p, drops: 20, agents: 4, observers: 1, scenarioTimeoutMs: 60_000 };
  const behind = await runOne('drops', { ...short, resumeSkew: -1 });
  const ahead = await runOne('drops', { ...short, resumeSkew: 1 });
  const detected = {
    behind: behind.duplicated > 0,
    ahead: ahead.lost > 0 || ahead.errors > 0,
  };
  return {
    ok: detected.behind && detected.ahead,
    resume_one_behind: { duplicated: behind.duplicated, lost: behind.lost, detected: detected.behind },
    resume_one_ahead: {
      duplicated: ahead.duplicated,
      lost: ahead.lost,
      errors: ahead.errors,
      detected: detected.ahead,
    },
  };
}

async function main(): Promise<void> {
  const { profile, only, selfCheck: check } = options();
  const started = performance.now();
  const results: ScenarioResult[] = [];
  const skipped: string[] = [];
  for (const name of only) {
    if (NEEDS_REDIS.has(name) && !redisServerAvailable()) {
      skipped.push(`${name}: redis-server not installed`);
      continue;
    }
    process.stderr.write(`chaos: ${name} (${profile.name})...\n`);
    const r = await runOne(name, profile);
    process.stderr.write(
      `chaos: ${name} ${r.ok ? 'ok' : 'FAILED'} in ${r.duration_ms} ms${r.ok ? '' : `: ${r.failures.slice(0, 5).join(' | ')}`}\n`,
    );
    results.push(r);
  }
  let harness: Record<string, unknown> | null = null;
  if (check) {
    process.stderr.write('chaos: self-check of the accounting...\n');
    harness = await selfCheck(profile);
    process.stderr.write(`chaos: self-check ${harness.ok === true ? 'ok' : 'FAILED'}\n`);
  }
  const ok = results.every((r) => r.ok) && skipped.length === 0 && (harness === null || harness.ok === true);
  const summary = {
    chaos: 'awp-edge',
    profile: profile.name,
    engine: process.env.AWP_EDGE_ENGINE ?? 'ws',
    ok,
    duration_ms: Math.round(performance.now() - started),
    parameters: profile,
    skipped,
    self_check: harness,
    scenarios: results.map((r) => ({ ...r, failures: r.failures.slice(0, 50) })),
  };
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  // Child processes are already stopped; sockets or timers left by a failed scenario must not hang the run.
  process.exit(ok ? 0 : 1);
}

main().catch((err: unknown) => {
  process.stderr.write(`chaos: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(2);
});
