/**
 * The routes' flight recorders (issue 14), opened at start for every route with `record:`, their writes
 * counted in awp_edge_recorder_* and each closed file logged with the hash of its last line
 * (`recording_closed`, `final_hash`: what `awp-edge recordings verify --final-hash` checks).
 */
import type { EdgeConfig, RouteConfig } from '../config/schema.js';
import type { RecordConfig } from '../config/record.js';
import type { RecorderFs } from '../recorder/io/recorder-fs.js';
import { RouteRecorder, type RecordSettings } from '../recorder/io/route-recorder.js';
import type { Logger } from '../telemetry/logger.js';
import type { EdgeMetrics } from '../telemetry/metrics.js';
import type { FaultReporter } from '../transport/contain.js';
import type { SliceLoop } from '../transport/slice-loop.js';
import { SlicedPass } from '../transport/sliced-pass.js';
import { RecorderMetrics } from '../telemetry/recorder-metrics.js';
import { edgeVersion, SPEC_REVISION } from './admin.js';
import type { EdgeContext } from './context.js';
import { recordRelayFrame } from './relay-recording.js';

export type { RecorderFs } from '../recorder/io/recorder-fs.js';

export interface RecordingDeps {
  readonly metrics: EdgeMetrics;
  readonly log: Logger;
  /** Monotonic milliseconds. */
  readonly now: () => number;
  /** Whether a string is a credential the edge knows (configured ones, the tokens it minted). */
  readonly isCredential: (value: string) => boolean;
  /** The routes, whose configurations (credentials) may be reloaded while the edge runs. */
  readonly routes: readonly { readonly config: RouteConfig }[];
  /** Another file system for the recordings (a test's slow disk). */
  readonly fs?: RecorderFs | undefined;
  /** The process's budget per event-loop turn, which the recorders' ticks share with the hubs' passes. */
  readonly slices: SliceLoop;
  readonly fault: FaultReporter;
}

export function recordSettings(c: RecordConfig): RecordSettings {
  return {
    dir: c.dir,
    frames: c.class === 'payloads' ? 'payloads' : 'hashes',
    channels: c.channels,
    maxPayloadBytes: c.max_payload_bytes,
    rotateBytes: c.rotate_bytes,
    rotateMs: c.rotate_ms,
    redactPaths: c.redact_paths,
    relay: c.relay,
    observer: c.observer,
    queueBytes: c.queue_bytes,
    retainFiles: c.retain_files,
    retainBytes: c.retain_bytes,
  };
}

/** Credentials kept for redaction: those in force, and those a reload retired (still held by sessions). */
const MAX_CREDENTIALS = 4096;

/**
 * The configured credentials of every route, recomputed when a route's configuration changed (a
 * credential reload); retired ones stay (open connections and sessions may still use them), bounded.
 */
function configuredCredentials(routes: readonly { readonly config: RouteConfig }[]): () => readonly string[] {
  let seen: RouteConfig[] = [];
  const all = new Set<string>();
  let list: string[] = [];
  return () => {
    if (routes.some((r, i) => r.config !== seen[i])) {
      seen = routes.map((r) => r.config);
      for (const c of seen)
        for (const t of [
          ...c.agent_tokens,
          ...c.approver_tokens,
          ...(c.upstream_token !== undefined ? [c.upstream_token] : []),
        ])
          all.add(t);
      list = [...all].slice(-MAX_CREDENTIALS);
    }
    return list;
  };
}

/** One recorder per route that records, by route name. */
async function openRecorders(config: EdgeConfig, deps: RecordingDeps): Promise<Map<string, RouteRecorder>> {
  const out = new Map<string, RouteRecorder>();
  const credentials = configuredCredentials(deps.routes);
  const m = RecorderMetrics.for(deps.metrics.registry);
  const host = {
    now: deps.now,
    wallNow: () => Date.now(),
    isCredential: deps.isCredential,
    credentials,
    maxJsonDepth: config.transport.max_json_depth,
    header: { edge_version: edgeVersion(), spec_revision: SPEC_REVISION },
    sliced: <T>(each: (item: T, now: number) => void) =>
      new SlicedPass('recorder_tick', each, { now: deps.now, fault: deps.fault, slices: deps.slices }),
  };
  try {
    for (const r of config.routes) {
      if (r.record === undefined) continue;
      const route = r.name;
      m.initialise(route);
      const recorder = await RouteRecorder.open(
        route,
        recordSettings(r.record),
        host,
        {
          written: (bytes, lines) => {
            m.bytes.labels(route).inc(bytes);
            m.records.labels(route).inc(lines);
          },
          dropped: (records) => m.dropped.labels(route).inc(records),
          deleted: (file, bytes) => {
            m.filesDeleted.labels(route).inc();
            deps.log.debug({ route, event: 'recording_deleted', file, bytes });
          },
          closed: (file, finalHash, records) =>
            deps.log.info({ route, event: 'recording_closed', file, final_hash: finalHash, records }),
          error: (file, err) => {
            m.writeErrors.labels(route).inc();
            deps.log.warn(
              { route, event: 'recording_write_failed', file, err: String(err) },
              'a recording file cannot be written; its session records no more',
            );
          },
        },
        deps.fs,
      );
      out.set(route, recorder);
    }
  } catch (err) {
    await closeRecording({ recorders: out });
    throw err;
  }
  return out;
}

/** The recording parts of the edge's context: the recorders, and the hook of relay stream frames. */
export async function openRecording(
  config: EdgeConfig,
  deps: RecordingDeps,
): Promise<Pick<EdgeContext, 'recorders' | 'recordFrame'>> {
  const recorders = await openRecorders(config, deps);
  const now = deps.now;
  return { recorders, recordFrame: (...frame) => recordRelayFrame(now(), ...frame) };
}

/** Ends every recording (`reason` in each file's end record) and writes out what is queued. */
export async function closeRecording(
  r: Pick<EdgeContext, 'recorders'>,
  reason = 'the edge did not start',
): Promise<void> {
  await Promise.all([...r.recorders.values()].map((rec) => rec.close(reason)));
}
