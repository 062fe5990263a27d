// The world configurations the interop run covers: both time models, Core alone and with every
// optional feature the conformance suite tests.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FIXTURES_DIR } from './paths.js';
import type { TimeModel, WorldFeature, WorldOptions } from './world.js';

export interface InteropConfig {
  /** Also the results sub-folder, e.g. `streaming-features`. */
  readonly name: string;
  readonly mode: TimeModel;
  readonly features: readonly WorldFeature[];
  readonly streamBinding: 'inline' | 'ws';
  readonly fixture: string;
  /** `--profile` values for the suite's claim (the `sim` feature makes a sim-profile world). */
  readonly profiles: readonly string[];
  readonly approvalTimeoutMs?: number;
}

export const CORE_FIXTURE = join(FIXTURES_DIR, 'awp-sim.json');
export const FEATURES_FIXTURE = join(FIXTURES_DIR, 'awp-sim-features.json');

/**
 * `sim` is lockstep-only and `servo` streaming-only (awp-sim refuses them otherwise); `gripper`
 * adds a second embodiment in a multi_bind_group (multi-bind, and the tick barrier in lockstep).
 * The approval timeout is shortened so that the suite can wait one out (AWP-APR-003).
 */
export const CONFIGS: readonly InteropConfig[] = [
  {
    name: 'lockstep-core',
    mode: 'lockstep',
    features: [],
    streamBinding: 'inline',
    fixture: CORE_FIXTURE,
    profiles: [],
  },
  {
    name: 'streaming-core',
    mode: 'streaming',
    features: [],
    streamBinding: 'inline',
    fixture: CORE_FIXTURE,
    profiles: [],
  },
  {
    name: 'lockstep-features',
    mode: 'lockstep',
    features: ['task', 'approval', 'blend', 'transfer', 'sim', 'gripper'],
    streamBinding: 'ws',
    fixture: FEATURES_FIXTURE,
    profiles: ['sim'],
    approvalTimeoutMs: 5000,
  },
  {
    name: 'streaming-features',
    mode: 'streaming',
    features: ['task', 'approval', 'blend', 'transfer', 'servo', 'gripper'],
    streamBinding: 'ws',
    fixture: FEATURES_FIXTURE,
    profiles: [],
    approvalTimeoutMs: 5000,
  },
];

/** The fixture's `approver_token`, which the world must accept as an approver's credential. */
export function fixtureApproverToken(fixture: string): string | undefined {
  const raw = JSON.parse(readFileSync(fixture, 'utf8')) as { approver_token?: unknown };
  return typeof raw.approver_token === 'string' ? raw.approver_token : undefined;
}

/** The fixture's relative `audit_dir` (default `awp-audit`), the world's audit directory under its dir. */
export function fixtureAuditDirName(fixture: string): string {
  const raw = JSON.parse(readFileSync(fixture, 'utf8')) as { audit_dir?: unknown };
  return typeof raw.audit_dir === 'string' ? raw.audit_dir : 'awp-audit';
}

/** World options for a config (without `dir`, which each case chooses). */
export function worldOptionsFor(c: InteropConfig, dir: string): WorldOptions {
  const approverToken = c.features.includes('approval') ? fixtureApproverToken(c.fixture) : undefined;
  return {
    mode: c.mode,
    features: c.features,
    streamBinding: c.streamBinding,
    dir,
    auditDirName: fixtureAuditDirName(c.fixture),
    ...(approverToken !== undefined ? { approverToken } : {}),
    ...(c.approvalTimeoutMs !== undefined ? { approvalTimeoutMs: c.approvalTimeoutMs } : {}),
  };
}
