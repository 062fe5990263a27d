/**
 * The vendored schemas (spec/schemas/v0.1), imported as JSON modules so that protocol reads no files itself
 * (it is sans-IO; the build copies spec/ next to the compiled modules). One entry per `*.schema.json` file,
 * sorted by path. test/protocol/spec-schemas.test.ts checks that this list matches the folder: re-vendoring the
 * spec means adding its new schema files here.
 */
import actionCancelResult from './spec/schemas/v0.1/action-cancel-result.schema.json' with { type: 'json' };
import actionRef from './spec/schemas/v0.1/action-ref.schema.json' with { type: 'json' };
import actionSchema from './spec/schemas/v0.1/action-schema.schema.json' with { type: 'json' };
import actionStatus from './spec/schemas/v0.1/action-status.schema.json' with { type: 'json' };
import actionSubmitResult from './spec/schemas/v0.1/action-submit-result.schema.json' with { type: 'json' };
import actionSubmit from './spec/schemas/v0.1/action-submit.schema.json' with { type: 'json' };
import agentManifest from './spec/schemas/v0.1/agent-manifest.schema.json' with { type: 'json' };
import approvalRequested from './spec/schemas/v0.1/approval-requested.schema.json' with { type: 'json' };
import approvalRespond from './spec/schemas/v0.1/approval-respond.schema.json' with { type: 'json' };
import common from './spec/schemas/v0.1/common.schema.json' with { type: 'json' };
import embodiment from './spec/schemas/v0.1/embodiment.schema.json' with { type: 'json' };
import emptyResult from './spec/schemas/v0.1/empty-result.schema.json' with { type: 'json' };
import error from './spec/schemas/v0.1/error.schema.json' with { type: 'json' };
import frameInline from './spec/schemas/v0.1/frame-inline.schema.json' with { type: 'json' };
import frameTree from './spec/schemas/v0.1/frame-tree.schema.json' with { type: 'json' };
import obsReport from './spec/schemas/v0.1/obs-report.schema.json' with { type: 'json' };
import observationChannel from './spec/schemas/v0.1/observation-channel.schema.json' with { type: 'json' };
import pingResult from './spec/schemas/v0.1/ping-result.schema.json' with { type: 'json' };
import ping from './spec/schemas/v0.1/ping.schema.json' with { type: 'json' };
import profilesGuiActions from './spec/schemas/v0.1/profiles/gui-actions.schema.json' with { type: 'json' };
import resetResult from './spec/schemas/v0.1/reset-result.schema.json' with { type: 'json' };
import reset from './spec/schemas/v0.1/reset.schema.json' with { type: 'json' };
import restore from './spec/schemas/v0.1/restore.schema.json' with { type: 'json' };
import safetyPolicy from './spec/schemas/v0.1/safety-policy.schema.json' with { type: 'json' };
import sessionOpen from './spec/schemas/v0.1/session-open.schema.json' with { type: 'json' };
import sessionReady from './spec/schemas/v0.1/session-ready.schema.json' with { type: 'json' };
import sessionResume from './spec/schemas/v0.1/session-resume.schema.json' with { type: 'json' };
import sessionState from './spec/schemas/v0.1/session-state.schema.json' with { type: 'json' };
import sessionTelemetry from './spec/schemas/v0.1/session-telemetry.schema.json' with { type: 'json' };
import sessionTransferResult from './spec/schemas/v0.1/session-transfer-result.schema.json' with { type: 'json' };
import sessionTransfer from './spec/schemas/v0.1/session-transfer.schema.json' with { type: 'json' };
import snapshotResult from './spec/schemas/v0.1/snapshot-result.schema.json' with { type: 'json' };
import subscribeResult from './spec/schemas/v0.1/subscribe-result.schema.json' with { type: 'json' };
import subscribe from './spec/schemas/v0.1/subscribe.schema.json' with { type: 'json' };
import taskUpdate from './spec/schemas/v0.1/task-update.schema.json' with { type: 'json' };
import tickResult from './spec/schemas/v0.1/tick-result.schema.json' with { type: 'json' };
import tick from './spec/schemas/v0.1/tick.schema.json' with { type: 'json' };
import unsubscribe from './spec/schemas/v0.1/unsubscribe.schema.json' with { type: 'json' };
import worldEvent from './spec/schemas/v0.1/world-event.schema.json' with { type: 'json' };
import worldManifest from './spec/schemas/v0.1/world-manifest.schema.json' with { type: 'json' };

/** `[path relative to schemas/v0.1, parsed document]`, sorted by path. */
export const SCHEMA_DOCUMENTS: readonly (readonly [file: string, doc: unknown])[] = [
  ['action-cancel-result.schema.json', actionCancelResult],
  ['action-ref.schema.json', actionRef],
  ['action-schema.schema.json', actionSchema],
  ['action-status.schema.json', actionStatus],
  ['action-submit-result.schema.json', actionSubmitResult],
  ['action-submit.schema.json', actionSubmit],
  ['agent-manifest.schema.json', agentManifest],
  ['approval-requested.schema.json', approvalRequested],
  ['approval-respond.schema.json', approvalRespond],
  ['common.schema.json', common],
  ['embodiment.schema.json', embodiment],
  ['empty-result.schema.json', emptyResult],
  ['error.schema.json', error],
  ['frame-inline.schema.json', frameInline],
  ['frame-tree.schema.json', frameTree],
  ['obs-report.schema.json', obsReport],
  ['observation-channel.schema.json', observationChannel],
  ['ping-result.schema.json', pingResult],
  ['ping.schema.json', ping],
  ['profiles/gui-actions.schema.json', profilesGuiActions],
  ['reset-result.schema.json', resetResult],
  ['reset.schema.json', reset],
  ['restore.schema.json', restore],
  ['safety-policy.schema.json', safetyPolicy],
  ['session-open.schema.json', sessionOpen],
  ['session-ready.schema.json', sessionReady],
  ['session-resume.schema.json', sessionResume],
  ['session-state.schema.json', sessionState],
  ['session-telemetry.schema.json', sessionTelemetry],
  ['session-transfer-result.schema.json', sessionTransferResult],
  ['session-transfer.schema.json', sessionTransfer],
  ['snapshot-result.schema.json', snapshotResult],
  ['subscribe-result.schema.json', subscribeResult],
  ['subscribe.schema.json', subscribe],
  ['task-update.schema.json', taskUpdate],
  ['tick-result.schema.json', tickResult],
  ['tick.schema.json', tick],
  ['unsubscribe.schema.json', unsubscribe],
  ['world-event.schema.json', worldEvent],
  ['world-manifest.schema.json', worldManifest],
];
