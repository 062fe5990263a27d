/**
 * The spec's wire traces through a recording edge (issue 14 item 4): real sockets, the scripted world and
 * agent of test/harness. Each side's records match that side of the wire exactly but for redaction (a
 * redacted value must be the hash of what passed) and timestamps: `agent` records are what the agent sent,
 * `world` records what the world sent, `edge_to_agent` what the agent received, `edge_to_world` what the
 * world received (so the edge's token and endpoint rewrites show). Every file verifies, and no credential
 * or token of the run appears in any file.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { redactedValue } from '../../src/recorder/redact.js';
import { parseRecords, type StoredRecord } from '../../src/recorder/read.js';
import { sha256Hex } from '../../src/recorder/record.js';
import { verifyLinks, verifyText } from '../../src/recorder/verify.js';
import {
  TRACE_NAMES,
  buildPlayScript,
  messagesFrom,
  normaliseIllustrative,
  playTrace,
  type JsonObject,
} from '../harness/index.js';
import { AGENT_TOKEN, startEdge, type TestEdge } from '../support/edge.js';

const root = mkdtempSync(join(tmpdir(), 'awp-traces-recorded-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const UPSTREAM_TOKEN = 'upstream-credential-for-recording-0123';
const REDACTED = /^\[redacted:sha256:[0-9a-f]{8}\]$/;

/** A message as the recorder writes it: an inline frame becomes its header and payload hash. */
function asRecorded(msg: JsonObject): unknown {
  if (msg.method !== 'obs.frame' && msg.method !== 'cmd.frame') return msg;
  const { payload_b64, ...rest } = msg.params as JsonObject;
  return {
    ...rest,
    method: msg.method,
    payload_sha256: sha256Hex(Buffer.from(typeof payload_b64 === 'string' ? payload_b64 : '', 'base64')),
  };
}

/**
 * Equal, but a redacted value stands for the value whose hash it carries; with `anyToken`, a redacted
 * session_token stands for any token (the script's agent resumes with the token the edge gave it, which the
 * trace cannot know).
 */
function mismatch(recorded: unknown, wire: unknown, path = '', anyToken = false): string | undefined {
  if (typeof recorded === 'string' && REDACTED.test(recorded)) {
    if (anyToken && path.endsWith('.session_token') && typeof wire === 'string') return undefined;
    return redactedValue(wire) === recorded ? undefined : `${path}: ${recorded} is not the hash of the value`;
  }
  if (Array.isArray(recorded) && Array.isArray(wire)) {
    if (recorded.length !== wire.length)
      return `${path}: ${recorded.length} items, ${wire.length} on the wire`;
    for (let i = 0; i < wire.length; i++) {
      const m = mismatch(recorded[i], wire[i], `${path}[${i}]`, anyToken);
      if (m !== undefined) return m;
    }
    return undefined;
  }
  if (typeof recorded === 'object' && recorded !== null && typeof wire === 'object' && wire !== null) {
    const a = recorded as Record<string, unknown>;
    const b = wire as Record<string, unknown>;
    const keys = Object.keys(a);
    if (keys.join() !== Object.keys(b).join())
      return `${path}: keys ${keys.join()} vs ${Object.keys(b).join()}`;
    for (const k of keys) {
      const m = mismatch(a[k], b[k], `${path}.${k}`, anyToken);
      if (m !== undefined) return m;
    }
    return undefined;
  }
  return Object.is(recorded, wire)
    ? undefined
    : `${path}: ${JSON.stringify(recorded)} vs ${JSON.stringify(wire)}`;
}

const isFrame = (m: JsonObject) => m.method === 'obs.frame' || m.method === 'cmd.frame';

/**
 * The records of one direction against what passed there. Frames are recorded once, as their sender sent
 * them (the edge forwards them unchanged), so what the edge sent on (`edge_to_*`) is compared without them.
 */
function expectSide(records: readonly StoredRecord[], direction: string, wire: readonly JsonObject[]): void {
  const sent = direction === 'edge_to_agent' || direction === 'edge_to_world';
  const got = records.filter(
    (r) => r.direction === direction && (r.kind === 'message' || r.kind === 'frame'),
  );
  const want = (sent ? wire.filter((m) => !isFrame(m)) : wire).map(asRecorded);
  const problems: string[] = [];
  for (let i = 0; i < Math.max(got.length, want.length); i++) {
    const m = mismatch(got[i]?.body, want[i], '', direction === 'agent');
    if (m !== undefined) problems.push(`${direction} #${i + 1}${m}`);
  }
  expect(problems.slice(0, 3)).toEqual([]);
}

describe('wire traces through a recording edge', () => {
  for (const name of TRACE_NAMES) {
    it(`${name}: each side's records are what passed on that side, and nothing secret`, async () => {
      const dir = join(root, name);
      let edge: TestEdge | undefined;
      const script = buildPlayScript(name);
      const through = await playTrace(script, {
        credential: AGENT_TOKEN,
        normalise: normaliseIllustrative,
        beforeAgentStep: async (entry) => {
          if (entry.msg.method === 'action.submit') await new Promise((r) => setTimeout(r, 110));
        },
        agentUrl: async (worldUrl) => {
          edge ??= await startEdge([
            { path: '/', upstream: worldUrl, upstream_token: UPSTREAM_TOKEN, record: { dir } },
          ]);
          return edge.url();
        },
      });
      await edge!.close(); // ends the recordings and writes out the queue

      const files = readdirSync(dir).sort();
      expect(files.length).toBeGreaterThan(0);
      const texts = files.map((f) => readFileSync(join(dir, f), 'utf8'));
      const summaries = files.map((f, i) => {
        const v = verifyText(texts[i]!);
        if (!v.ok) throw new Error(`${f}:${v.line}: ${v.problem}`);
        return { name: f, summary: v.summary };
      });
      expect(verifyLinks(summaries)).toBeUndefined();
      const records = texts.flatMap((t) => parseRecords(t));

      expectSide(records, 'agent', messagesFrom(script.entries, 'agent'));
      expectSide(records, 'world', messagesFrom(script.entries, 'world'));
      expectSide(records, 'edge_to_agent', through.agentTranscript);
      expectSide(records, 'edge_to_world', through.worldTranscript);

      // No credential or token of the run in any file: the agent's and the edge's upstream credential,
      // the world's session tokens, the tokens the edge minted.
      const tokens = (msgs: readonly JsonObject[]) =>
        msgs
          .map((m) => (m.result as { session_token?: unknown } | undefined)?.session_token)
          .filter((t): t is string => typeof t === 'string');
      const secrets = [
        AGENT_TOKEN,
        UPSTREAM_TOKEN,
        ...tokens(messagesFrom(script.entries, 'world')),
        ...tokens(through.agentTranscript),
      ];
      expect(secrets.length).toBeGreaterThan(3);
      const all = texts.join('');
      for (const s of secrets) expect(all, s).not.toContain(s);
    });
  }
});
