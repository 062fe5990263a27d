// The interop harness's public API in one import: the pinned peers, the world, the suite, the
// scenario agents, report comparison, and the targets the through-edge variant plugs into.
export { ensurePeers, readPins, REQUIREMENTS, VENV_DIR } from './venv.js';
export type { Peers } from './venv.js';
export { CI_TIMERS, startWorld, worldArgs, worldErrors } from './world.js';
export type { TimeModel, World, WorldFeature, WorldOptions, WorldTimers } from './world.js';
export { fixtureAuditDir, runSuite, suiteArgs, tracesMentioning } from './suite.js';
export type { SuiteOptions, SuiteRun } from './suite.js';
export { runScenario, SCENARIOS } from './scenarios.js';
export type { ScenarioName, ScenarioOptions, ScenarioResult, ScenarioRun } from './scenarios.js';
export { compareClaims, compareReports, describeDifferences, notPassing, parseReport } from './report.js';
export type {
  Claim,
  ConformanceReport,
  Outcome,
  OutcomePair,
  ReportComparison,
  RequirementRow,
} from './report.js';
export { CONFIGS, configNamed, worldOptionsFor } from './configs.js';
export type { InteropConfig } from './configs.js';
export { direct } from './targets.js';
export { tcpPassthrough } from './passthrough.js';
export type { Target, TargetFactory } from './targets.js';
export { runConformanceCase, runScenarioCase, writeComparison } from './cases.js';
export type { ConformanceCase, ScenarioCase } from './cases.js';
export { defineConformanceMatrix, defineScenarioMatrix, BASELINE_OUTCOMES } from './matrix.js';
export { caseDir, currentRunId, newRunId, RESULTS_ROOT } from './paths.js';
