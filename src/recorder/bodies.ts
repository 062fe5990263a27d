/**
 * Record bodies a session log builds (sans-IO): a file's header, a message's body (parsed and redacted,
 * or as it is when there is nothing in it to redact or learn from).
 */
import { nestsDeeperThan } from '../protocol/jsonrpc.js';
import type { FrameMethod } from './frame-body.js';
import { sha256Hex } from './record.js';
import { redactMessage, type RedactionRules } from './redact.js';
import { isRecord } from '../protocol/json-object.js';

/** What makes a text need parsing before it is recorded (see isPlain). */
const NOT_PLAIN =
  /[\r\n]|token|uthori[sz]ation|bearer|secret|password|api_?key|credential|granted|safety_policy|"obs\.frame"|"cmd\.frame"/i;

/**
 * Whether a text the edge sent (JSON it wrote, or a peer's text it parsed and relayed) can be its own
 * record body as it is: one line, an object, nothing to redact in it (no word a credential goes by, no
 * credential the edge knows, no redact_paths in force), no grant or manifest to learn from, no frame.
 */
export function isPlain(text: string, rules: RedactionRules): boolean {
  if (text.charCodeAt(0) !== 0x7b || rules.paths.length > 0 || NOT_PLAIN.test(text)) return false;
  for (const c of rules.credentials?.() ?? []) if (c.length >= 8 && text.includes(c)) return false;
  return true;
}

/**
 * A message's body as JSON (redacted; what is not a JSON object within the depth limit by its size and
 * hash only), or an inline frame's params (recorded as a frame). `learn` sees every result first.
 */
export function parseBody(
  text: string,
  maxDepth: number,
  rules: RedactionRules,
  learn: (result: unknown) => void,
): string | { method: FrameMethod; params: Record<string, unknown> } {
  const unparsed = (why: string) =>
    JSON.stringify({ unparsed: why, bytes: Buffer.byteLength(text), sha256: sha256Hex(text) });
  if (nestsDeeperThan(text, maxDepth)) return unparsed('too_deep');
  let msg: unknown;
  try {
    msg = JSON.parse(text);
  } catch {
    return unparsed('invalid_json');
  }
  if (!isRecord(msg)) return unparsed('not_an_object');
  if ((msg.method === 'obs.frame' || msg.method === 'cmd.frame') && isRecord(msg.params))
    return { method: msg.method, params: msg.params };
  if (msg.result !== undefined) learn(msg.result);
  return JSON.stringify(redactMessage(msg, rules));
}

/** What a header says of its session (a session log's options). */
interface HeaderFields {
  readonly route: string;
  readonly kind: string;
  readonly session_id: string;
  readonly startedWallMs: number;
  readonly frames: 'hashes' | 'payloads';
  readonly channels?: readonly string[] | undefined;
  readonly maxPayloadBytes?: number | undefined;
  readonly header: Readonly<Record<string, unknown>>;
}

/** The body of a file's first record (AWP-AUD-007's class goes beside it, in the record). */
export function headerBody(
  o: HeaderFields,
  segment: number,
  continues: { file: string; last_hash: string } | undefined,
): Record<string, unknown> {
  return {
    recorder: 'awp-edge',
    ...o.header,
    route: o.route,
    session_kind: o.kind,
    session_id: o.session_id,
    started_at: new Date(o.startedWallMs).toISOString(),
    clock: 'ts_mono_ns: nanoseconds since started_at on the edge monotonic clock',
    segment,
    frames: o.frames === 'payloads' ? 'header, payload_sha256 and payload_b64' : 'header and payload_sha256',
    ...(o.channels !== undefined && { payload_channels: o.channels }),
    ...(o.maxPayloadBytes !== undefined && { max_payload_bytes: o.maxPayloadBytes }),
    ...(continues !== undefined && { continues }),
  };
}
