/**
 * `routes[].record`: the flight recorder's keys in edge.yaml (see edge-schema.ts for the annotations). Off
 * when absent; the semantic checks are in record.ts.
 */
import type { FromSchema } from 'json-schema-to-ts';

const int = (minimum: number, maximum: number, dflt: number, description: string) =>
  ({ type: 'integer', minimum, maximum, default: dflt, description }) as const;

const MIB = 1024 * 1024;

export const RECORD = {
  type: 'object',
  description:
    "Flight recorder: record this route's sessions as AWP audit-log files (JSON Lines, hash-chained, credentials redacted; AWP-AUD-001..007), one file per session, rotated and retained; off when absent. A slow disk never delays a session: records the write queue cannot take are dropped, counted and noted in the file.",
  additionalProperties: false,
  required: ['dir'],
  properties: {
    dir: {
      type: 'string',
      minLength: 1,
      description:
        'The directory of the recording files (created at start, mode 0750; relative to the working directory). Routes may share one: file names start with the route.',
      'x-missing': 'required: the directory the recording files go to',
    },
    class: {
      enum: ['audit', 'payloads'],
      default: 'audit',
      description:
        "audit (default): frames as their header and the SHA-256 of the payload (an audit record); payloads: with each frame's payload too (a replay bundle when every payload is kept: no channels, no max_payload_bytes).",
    },
    sessions: {
      type: 'array',
      items: { enum: ['relay', 'observer'], 'x-expected': 'expected relay or observer' },
      minItems: 1,
      uniqueItems: true,
      default: ['relay', 'observer'],
      description:
        'Which sessions to record: relay (acting agents), observer (sessions the hub serves); default both.',
      'x-expected': 'expected a list of relay, observer (at least one, each once)',
    },
    channels: {
      type: 'array',
      items: { type: 'string', minLength: 1, 'x-expected': 'expected a channel name' },
      minItems: 1,
      description:
        'payloads only: keep the payloads of these channels (by name); the others are recorded by hash.',
      'x-expected': 'expected a list of channel names',
    },
    max_payload_bytes: {
      type: 'integer',
      minimum: 1,
      maximum: 2 ** 50,
      description:
        'payloads only: payload bytes kept per session (and per hub log, for observers) at most; later frames are recorded by hash (the file says when).',
    },
    rotate_bytes: int(
      4096,
      2 ** 40,
      64 * MIB,
      "A session's file is closed and continued in a new one (its chain linked) beyond this many bytes.",
    ),
    rotate_ms: int(
      1000,
      7 * 86_400_000,
      3_600_000,
      "A session's file is continued in a new one when a record arrives this long after the file began.",
    ),
    retain_files: int(
      1,
      10_000_000,
      10_000,
      "The route's files kept at most; the oldest closed ones are deleted.",
    ),
    retain_bytes: int(
      MIB,
      2 ** 50,
      10 * 1024 * MIB,
      "Bytes of the route's files kept at most; the oldest closed files are deleted.",
    ),
    queue_bytes: int(
      65_536,
      2 ** 32,
      64 * MIB,
      "The route's write queue: records that do not fit while the disk is behind are dropped and counted (awp_edge_recorder_records_dropped_total), never waited for.",
    ),
    redact_paths: {
      type: 'array',
      items: { type: 'string', pattern: '^/', 'x-expected': 'expected a JSON pointer starting with /' },
      default: [],
      description:
        "JSON pointers (relative to params or result) whose values are redacted in the records, besides the world manifest's safety_policy.audit.redact_paths (AWP-AUD-006).",
      'x-expected': 'expected a list of JSON pointers like /task/content',
    },
  },
} as const;

export type RecordFile = FromSchema<typeof RECORD>;
