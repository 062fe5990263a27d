/** The wire-trace harness: load a trace, build its playable script, play it, check it. */
export type { JsonObject, PlayScript, TraceEntry } from './trace-types.js';
export { TRACE_NAMES, loadTrace, transportActionOf } from './trace-loader.js';
export { APPROVAL_ACTION_TYPE, buildPlayScript } from './continuations.js';
export { checkGrantsCover, checkPrefixAgainstGiven, sessionContext } from './script-checks.js';
export { checkTraceInvariants } from './invariants.js';
export { normaliseIllustrative } from './normalise.js';
export { ScriptedWorld } from './scripted-world.js';
export { ScriptedAgent } from './scripted-agent.js';
export { TracePlayError, messagesFrom, playTrace } from './play-trace.js';
export { PassThroughRelay, type RelayTransform } from './pass-through-relay.js';
export { reissueTokensAndEndpoints } from './relay-transforms.js';
