/**
 * `awp-edge recordings verify FILE...` and `awp-edge recordings show FILE` (issue 14): the flight
 * recorder's files checked (src/recorder/verify.ts) and read back as a timeline (src/recorder/timeline.ts).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { isRecord } from '../protocol/json-object.js';
import { parseRecords } from '../recorder/read.js';
import { describeHeader, timeline } from '../recorder/timeline.js';
import { verifyLinks, verifyText, type NamedSummary } from '../recorder/verify.js';
import { nearest, UsageError, type Parsed } from './args.js';

export interface Output {
  out(line: string): void;
  err(line: string): void;
}

const ACTIONS = ['verify', 'show'];

export function recordingsCommand(args: Parsed, io: Output): number {
  const [action, ...files] = args.positionals;
  if (action === undefined || !ACTIONS.includes(action)) {
    const near = action === undefined ? undefined : nearest(action, ACTIONS);
    const what = action === undefined ? 'needs verify or show' : `unknown action ${JSON.stringify(action)}`;
    throw new UsageError(
      `awp-edge recordings: ${what}${near !== undefined ? ` (did you mean ${near}?)` : ''} (see awp-edge recordings --help)`,
    );
  }
  if (files.length === 0)
    throw new UsageError(`awp-edge recordings ${action}: needs a FILE (see awp-edge recordings --help)`);
  const v = args.values;
  if (action === 'show') {
    if (files.length > 1) throw new UsageError('awp-edge recordings show: one FILE at a time');
    if (v.open === true || v['final-hash'] !== undefined)
      throw new UsageError('awp-edge recordings show: --open and --final-hash are for recordings verify');
    return show(files[0]!, v.frames === true, io);
  }
  if (v.frames === true) throw new UsageError('awp-edge recordings verify: --frames is for recordings show');
  const finalHash = v['final-hash'] as string | undefined;
  if (finalHash !== undefined && (files.length > 1 || !/^[0-9a-f]{64}$/.test(finalHash)))
    throw new UsageError(
      'awp-edge recordings verify: --final-hash takes 64 lowercase hex digits, for one FILE (see awp-edge recordings --help)',
    );
  return verify(files, { allowOpen: v.open === true, finalHash }, io);
}

function verify(
  files: readonly string[],
  o: { allowOpen: boolean; finalHash: string | undefined },
  io: Output,
): number {
  const sessions = new Map<string, (NamedSummary & { segment: number })[]>();
  for (const file of files) {
    const verdict = verifyText(readFileSync(file, 'utf8'), o);
    if (!verdict.ok) {
      io.err(`${file}:${verdict.line}: ${verdict.problem}`);
      return 1;
    }
    const s = verdict.summary;
    const h = s.header;
    const segment = typeof h.segment === 'number' ? h.segment : 0;
    const who =
      typeof h.session_id === 'string'
        ? `${typeof h.session_kind === 'string' ? h.session_kind : ''} session ${h.session_id}`.trim()
        : 'session';
    io.out(
      `${file}: ok (${s.records} records, ${s.recordClass}, ${who}${segment > 0 ? `, segment ${segment}` : ''}${s.lastKind === 'end' || s.lastKind === 'rotated' ? '' : ', still open'})`,
    );
    const key = JSON.stringify([h.route, h.session_kind, h.session_id, h.started_at]);
    let list = sessions.get(key);
    if (list === undefined) sessions.set(key, (list = []));
    list.push({ name: file, summary: s, segment });
  }
  for (const list of sessions.values()) {
    const problem = verifyLinks(list.sort((a, b) => a.segment - b.segment));
    if (problem !== undefined) {
      io.err(`${problem[0]}: ${problem[1]}`);
      return 1;
    }
  }
  return 0;
}

function show(file: string, frames: boolean, io: Output): number {
  const text = readFileSync(file, 'utf8');
  const verdict = verifyText(text, { allowOpen: true });
  if (!verdict.ok)
    io.err(`warning: ${file}:${verdict.line}: ${verdict.problem} (the timeline shows the file as it is)`);
  const records = parseRecords(text);
  io.out(`${file}: ${describeHeader(records)}`);
  for (const line of timeline(records, { frames, resolve: hubFiles(dirname(file)) })) io.out(line);
  return 0;
}

/**
 * An observer's frames by reference, looked up in the hub log's files beside its file (every segment of
 * the log the reference names, each read once). A name that is not a recording's file name is not used.
 */
function hubFiles(
  dir: string,
): (hubFile: string, n: number) => Readonly<Record<string, unknown>> | undefined {
  // Read by log, not by file name: references may name any segment of a log, and each is in all of them.
  const logs = new Map<string, Map<number, Record<string, unknown>>>();
  const byName = new Map<string, Map<number, Record<string, unknown>> | undefined>();
  const framesOf = (hubFile: string): Map<number, Record<string, unknown>> | undefined => {
    const log = /^([A-Za-z0-9_.-]+\.)\d{4}\.jsonl$/.exec(hubFile)?.[1];
    if (log === undefined) return undefined;
    let frames = logs.get(log);
    if (frames !== undefined) return frames;
    logs.set(log, (frames = new Map<number, Record<string, unknown>>()));
    const segments = existsSync(dir) ? readdirSync(dir).filter((f) => f.startsWith(log)) : [];
    for (const segment of segments)
      for (const r of parseRecords(readFileSync(join(dir, segment), 'utf8')))
        if (r.kind === 'frames' && Array.isArray(r.body.frames))
          for (const f of r.body.frames as unknown[])
            if (isRecord(f) && typeof f.n === 'number') frames.set(f.n, f);
    return frames;
  };
  return (hubFile, n) => {
    if (!byName.has(hubFile)) byName.set(hubFile, framesOf(hubFile));
    return byName.get(hubFile)?.get(n);
  };
}
