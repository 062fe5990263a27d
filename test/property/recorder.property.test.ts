/**
 * Properties of the flight recorder's sans-IO core (src/recorder): for any sequence of hostile messages,
 * frames, edge events, full-queue episodes and rotations, every file the session log writes verifies
 * (AWP-AUD-002 shape, AWP-AUD-003 chain, AWP-AUD-007 class), the files of a session link up, every
 * dropped record is reported in the file, and no credential or redact_paths value survives (AWP-AUD-006);
 * any edited, removed, duplicated or reordered line is detected.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createFrameHeader, peekFrame } from '../../src/protocol/frame.js';
import { encodeFrame } from '../../src/protocol/frame-encode.js';
import type { Direction } from '../../src/recorder/record.js';
import { refNumbers } from '../../src/recorder/frame-refs.js';
import { parseRecords } from '../../src/recorder/read.js';
import { binaryFrameBody, type FrameBody } from '../../src/recorder/frame-body.js';
import { SessionLog, type SharedFrame } from '../../src/recorder/session-log.js';
import { verifyLinks, verifyText } from '../../src/recorder/verify.js';
import { MemorySink } from '../recorder/memory-sink.js';
import { garbageText, hostileObject, params } from './arbitraries.js';

const hex = (n: number) => fc.stringMatching(new RegExp(`^[0-9a-f]{${n}}$`));
const credentials = fc.uniqueArray(
  hex(24).map((h) => `cred-${h}`),
  { minLength: 3, maxLength: 3 },
);
/** A value only redact_paths protects (it is no credential the edge knows). */
const personal = hex(16).map((h) => `pii-${h}`);

type Plant =
  | 'session_token'
  | 'transfer_token'
  | 'any_key'
  | 'bearer'
  | 'subprotocol'
  | 'authorization'
  | 'array'
  | 'none';

interface Msg {
  readonly op: 'msg';
  readonly direction: Direction;
  readonly params: Record<string, unknown>;
  readonly plant: Plant;
  readonly cred: number;
  readonly asResult: boolean;
}
type Op =
  | Msg
  | { readonly op: 'garbage'; readonly direction: Direction; readonly text: string }
  | {
      readonly op: 'inline' | 'binary';
      readonly direction: Direction;
      readonly channel: number;
      readonly payload: Uint8Array;
    }
  | { readonly op: 'shared'; readonly channel: number; readonly payload: Uint8Array }
  | { readonly op: 'event'; readonly cred: number }
  | { readonly op: 'ref'; readonly n: number; readonly file: number; readonly stream: boolean }
  | { readonly op: 'full'; readonly on: boolean }
  | { readonly op: 'wait'; readonly ms: number };

const direction = fc.constantFrom<Direction>('agent', 'world', 'edge_to_agent', 'edge_to_world');
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      op: fc.constant('msg' as const),
      direction,
      params: hostileObject,
      plant: fc.constantFrom<Plant>(
        'session_token',
        'transfer_token',
        'any_key',
        'bearer',
        'subprotocol',
        'authorization',
        'array',
        'none',
      ),
      cred: fc.nat(2),
      asResult: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('garbage' as const), direction, text: garbageText }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constantFrom('inline' as const, 'binary' as const),
      direction,
      channel: fc.integer({ min: 1, max: 3 }),
      payload: fc.uint8Array({ maxLength: 64 }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('shared' as const),
      channel: fc.integer({ min: 1, max: 3 }),
      payload: fc.uint8Array({ maxLength: 64 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('event' as const), cred: fc.nat(2) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('ref' as const),
      n: fc.nat(40),
      file: fc.nat(1),
      stream: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('full' as const), on: fc.boolean() }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('wait' as const), ms: fc.integer({ min: 0, max: 400 }) }),
  },
);

const sessionArb = fc.record({
  creds: credentials,
  pii: personal,
  ops: fc.array(opArb, { minLength: 1, maxLength: 40 }),
  rotateBytes: fc.constantFrom(600, 2000, 1 << 20),
  /** With redact_paths in force no text is recorded as it is; without, plain texts are. */
  paths: fc.boolean(),
  payloads: fc.boolean(),
});
type Session = typeof sessionArb extends fc.Arbitrary<infer T> ? T : never;

function own(o: Record<string, unknown>, key: string, value: unknown): Record<string, unknown> {
  Object.defineProperty(o, key, { value, writable: true, enumerable: true, configurable: true });
  return o;
}

function planted(m: Msg, cred: string, pii: string | undefined): string {
  const params = { ...m.params };
  switch (m.plant) {
    case 'session_token':
    case 'transfer_token':
      own(params, m.plant, cred);
      break;
    case 'any_key':
      own(params, 'note', cred);
      break;
    case 'bearer':
      own(params, 'header', `Bearer ${cred}`);
      break;
    case 'subprotocol':
      own(params, 'protocols', `awp, awp.bearer.${cred}`);
      break;
    case 'authorization':
      own(params, 'Authorization', { scheme: 'Bearer', value: cred });
      break;
    case 'array':
      own(params, 'list', [1, cred, { deep: [cred] }]);
  }
  if (pii !== undefined) own(params, 'task', { content: pii, kind: 'text' });
  const msg = m.asResult
    ? { jsonrpc: '2.0', id: 7, result: params }
    : { jsonrpc: '2.0', method: 'x.y', params };
  return JSON.stringify(msg);
}

/** Plays a session into a fresh log; returns the sink and the log. */
function play(s: Session): { sink: MemorySink; log: SessionLog } {
  const sink = new MemorySink();
  let now = 1000;
  const log = new SessionLog(
    {
      route: 'r0',
      kind: 'relay',
      session_id: 'sess-1',
      startedWallMs: Date.UTC(2026, 10, 30, 16, 48),
      startedMs: now,
      frames: s.payloads ? 'payloads' : 'hashes',
      rotateBytes: s.rotateBytes,
      rotateMs: 1000,
      isCredential: (v) => s.creds.includes(v),
      credentials: () => s.creds,
      redactPaths: s.paths ? ['/task/content'] : [],
      maxJsonDepth: 64,
      header: { version: 'test' },
    },
    sink,
  );
  const h = createFrameHeader();
  for (const op of s.ops) {
    now += 1;
    switch (op.op) {
      case 'msg':
        // What the edge sent takes the path that may record it as it is (SessionLog.sent).
        log.text(op.direction, planted(op, s.creds[op.cred]!, s.paths ? s.pii : undefined), now);
        break;
      case 'garbage':
        log.message(op.direction, op.text, now);
        break;
      case 'inline': {
        const b64 = Buffer.from(op.payload).toString('base64');
        const params = { channel_id: op.channel, seq: 1, ts_mono_ns: 5, flags: 1, payload_b64: b64 };
        log.message(op.direction, JSON.stringify({ jsonrpc: '2.0', method: 'obs.frame', params }), now);
        break;
      }
      case 'binary': {
        const buf = encodeFrame({
          channel_id: op.channel,
          seq: 2,
          ts_mono_ns: 9,
          flags: 1,
          payload: op.payload,
          vendor: [],
        });
        log.frame(op.direction, 'obs.frame', buf, peekFrame(buf, h), 'ws', now);
        break;
      }
      case 'shared': {
        // A fan-out hub's frame: its bodies built once, batched into `frames` records.
        const buf = encodeFrame({
          channel_id: op.channel,
          seq: 3,
          ts_mono_ns: 11,
          flags: 1,
          payload: op.payload,
          vendor: [],
        });
        const bodies = new Map<boolean, FrameBody>();
        const frame: SharedFrame = {
          channel_id: op.channel,
          payloadBytes: op.payload.length,
          body: (keep) => {
            let b = bodies.get(keep);
            if (b === undefined)
              bodies.set(keep, (b = binaryFrameBody('obs.frame', buf, peekFrame(buf, h), 'ws', keep)));
            return b;
          },
        };
        log.sharedFrame('edge_to_agent', frame, now);
        break;
      }
      case 'ref':
        log.frameRef('edge_to_agent', `hub-${op.file}.jsonl`, op.stream ? 'ws' : 'inline', op.n, now);
        break;
      case 'event':
        log.event({ event: 'dropped', detail: `id ${s.creds[op.cred]!}`, also: s.creds[op.cred]! }, now);
        break;
      case 'full':
        sink.open = !op.on;
        break;
      case 'wait':
        now += op.ms;
        log.tick(now);
    }
  }
  sink.open = true;
  log.end('session closed', now + 1);
  return { sink, log };
}

describe('flight recorder core (properties)', () => {
  it('every file verifies, the files link, drops are reported, no credential survives', () => {
    fc.assert(
      fc.property(sessionArb, (s) => {
        const { sink, log } = play(s);
        const files = sink.all();
        const summaries = files.map(({ name, text }) => {
          const v = verifyText(text, { finalHash: sink.closed.get(name)!.finalHash });
          if (!v.ok) throw new Error(`${name}:${v.line}: ${v.problem}`);
          return { name, summary: v.summary };
        });
        expect(verifyLinks(summaries)).toBeUndefined();
        expect(files.length).toBe(log.totals.files);
        const lines = files.flatMap((f) => f.text.split('\n').filter((l) => l !== ''));
        expect(lines.length).toBe(log.totals.records);
        const reported = lines
          .map((l) => JSON.parse(l) as { kind: string; body: { records?: number } })
          .filter((r) => r.kind === 'dropped')
          .reduce((n, r) => n + r.body.records!, 0);
        expect(reported).toBe(log.totals.dropped);
        expect(sink.droppedRecords).toBe(log.totals.dropped);
        const all = files.map((f) => f.text).join('');
        for (const secret of [...s.creds, s.pii]) expect(all).not.toContain(secret); // no pii unless redacted
      }),
      params(150),
    );
  });

  it("an observer's frames by reference come back in delivery order, with their hub file and binding", () => {
    const refArb = fc.array(
      fc.record({
        n: fc.nat(3000),
        file: fc.nat(1),
        stream: fc.boolean(),
        waitMs: fc.constantFrom(0, 0, 0, 700),
      }),
      { maxLength: 2500 },
    );
    fc.assert(
      fc.property(refArb, fc.boolean(), (refs, consecutive) => {
        const sink = new MemorySink();
        const log = new SessionLog(
          {
            route: 'arm',
            kind: 'observer',
            session_id: 'obs-1',
            startedWallMs: Date.UTC(2026, 11, 2),
            startedMs: 0,
            frames: 'hashes',
            rotateBytes: 1 << 20,
            rotateMs: 3_600_000,
            isCredential: () => false,
            redactPaths: [],
            maxJsonDepth: 64,
            header: {},
          },
          sink,
        );
        let now = 0;
        const fed = refs.map((r, i) => ({ ...r, n: consecutive ? i : r.n }));
        for (const r of fed) {
          now += r.waitMs;
          log.frameRef('edge_to_agent', `hub-${r.file}.jsonl`, r.stream ? 'ws' : 'inline', r.n, now);
        }
        log.end('session ended', now + 1);
        const [file] = sink.all();
        const v = verifyText(file!.text);
        expect(v.ok ? 'ok' : `${v.line}: ${v.problem}`).toBe('ok');
        const back = parseRecords(file!.text)
          .filter((r) => r.kind === 'frame_refs')
          .flatMap((r) =>
            refNumbers(r.body)!.map((n) => ({ n, file: r.body.hub_file, stream: r.body.binding === 'ws' })),
          );
        expect(back).toEqual(fed.map(({ n, file, stream }) => ({ n, file: `hub-${file}.jsonl`, stream })));
      }),
      params(60),
    );
  });

  type Mutation =
    | { kind: 'edit'; line: number; at: number; ch: string }
    | { kind: 'remove'; line: number }
    | { kind: 'swap'; a: number; b: number }
    | { kind: 'duplicate'; line: number; to: number };
  const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
    fc.record({
      kind: fc.constant('edit' as const),
      line: fc.nat(),
      at: fc.nat(),
      ch: fc.constantFrom('0', 'a', ' ', '"', '}', 'x'),
    }),
    fc.record({ kind: fc.constant('remove' as const), line: fc.nat() }),
    fc.record({ kind: fc.constant('swap' as const), a: fc.nat(), b: fc.nat() }),
    fc.record({ kind: fc.constant('duplicate' as const), line: fc.nat(), to: fc.nat() }),
  );

  /** The lines after the mutation, and whether it touched only the last line's content. */
  function mutate(lines: string[], m: Mutation): { out: string[]; lastOnly: boolean } | undefined {
    const n = lines.length;
    const out = lines.slice();
    switch (m.kind) {
      case 'edit': {
        const i = m.line % n;
        const line = lines[i]!;
        const at = m.at % line.length;
        if (line[at] === m.ch) return undefined;
        out[i] = line.slice(0, at) + m.ch + line.slice(at + 1);
        return { out, lastOnly: i === n - 1 };
      }
      case 'remove':
        out.splice(m.line % n, 1);
        return { out, lastOnly: false };
      case 'swap': {
        const a = m.a % n;
        const b = m.b % n;
        if (lines[a] === lines[b]) return undefined;
        [out[a], out[b]] = [lines[b]!, lines[a]!];
        return { out, lastOnly: false };
      }
      case 'duplicate':
        out.splice(m.to % (n + 1), 0, lines[m.line % n]!);
        return { out, lastOnly: false };
    }
  }

  it('detects any edited, removed, duplicated or reordered line', () => {
    fc.assert(
      fc.property(sessionArb, mutationArb, fc.nat(), (s, m, pick) => {
        const { sink } = play(s);
        const files = sink.all();
        const file = files[pick % files.length]!;
        const lines = file.text.split('\n').slice(0, -1);
        const mutated = mutate(lines, m);
        fc.pre(mutated !== undefined);
        const text = mutated.out.map((l) => `${l}\n`).join('');
        const finalHash = sink.closed.get(file.name)!.finalHash;
        // With the final hash the edge logged, every change is found.
        expect(verifyText(text, { finalHash }).ok).toBe(false);
        // Without it, every change but an edit of the last line alone is found by the chain and the shape.
        if (!mutated.lastOnly) expect(verifyText(text).ok).toBe(false);
      }),
      params(300),
    );
  });

  it('detects a missing file of a rotated session', () => {
    fc.assert(
      fc.property(sessionArb, fc.nat(), (s, pick) => {
        const { sink } = play({ ...s, rotateBytes: 600 });
        const files = sink.all();
        fc.pre(files.length >= 3);
        const summaries = files.map(({ name, text }) => {
          const v = verifyText(text);
          if (!v.ok) throw new Error(v.problem);
          return { name, summary: v.summary };
        });
        const gone = 1 + (pick % (files.length - 2)); // neither the first nor the last
        expect(verifyLinks(summaries.filter((_, i) => i !== gone))).toBeDefined();
      }),
      params(100),
    );
  });
});
