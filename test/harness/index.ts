/** The wire-trace harness: load a trace, build its playable script, play it, check it. */
export type {
  Json,
  JsonObject,
  ParsedTrace,
  PlayScript,
  Side,
  TraceEntry,
  TraceMarker,
  TraceMessage,
  TraceSource,
} from './trace-types.js';
export { describeEntry } from './trace-types.js';
export {
  TRACE_NAMES,
  TRACES_DIR,
  type TraceName,
  loadTrace,
  parseTrace,
  transportActionOf,
} from './trace-loader.js';
export { APPROVAL_ACTION_TYPE, TRANSFER_VIAL_SCHEMA, buildPlayScript } from './continuations.js';
export { checkGrantsCover, checkPrefixAgainstGiven, sessionContext } from './script-checks.js';
export { checkTraceInvariants, type InvariantOptions } from './invariants.js';
export {
  ENDPOINTS_PLACEHOLDER,
  TOKEN_PLACEHOLDER,
  exactComparison,
  normaliseIllustrative,
} from './normalise.js';
export { diffJson, jsonEqual } from './json-diff.js';
export { ScriptedWorld, type WorldConnection } from './scripted-world.js';
export { ScriptedAgent, type AgentConnection, type AgentOptions } from './scripted-agent.js';
export { type PlayOptions, type PlayResult, TracePlayError, messagesFrom, playTrace } from './play-trace.js';
export {
  PassThroughRelay,
  type RelayDirection,
  type RelayOptions,
  type RelayTransform,
} from './pass-through-relay.js';
export { type ReissueOptions, reissueTokensAndEndpoints } from './relay-transforms.js';
