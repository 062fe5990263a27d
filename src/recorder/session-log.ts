/**
 * One session's recording, sans-IO: builds the records (AWP-AUD-002), redacts them (AWP-AUD-006), chains
 * them (AWP-AUD-003), rotates files by size and time, keeps payloads within the budget, and drops records
 * the write queue cannot take, saying so in the file. It writes lines to a `LineSink` and reads no clock:
 * every input carries the current monotonic time in milliseconds.
 *
 * Chain across files: every file starts a chain of its own (`prev_hash: null` on its header), so each
 * verifies alone; a rotated file ends with a `rotated` record naming the next file, whose header carries
 * `continues: { file, last_hash }`, the hash of the previous file's last line.
 *
 * Drops keep the chain whole: a record the queue has no room for is never chained. The next record that
 * fits is preceded by a `dropped` record (`records`, `bytes`, `first_ts_mono_ns`, `last_ts_mono_ns`).
 */
import type { FrameHeader } from '../protocol/frame.js';
import { binaryFrameBody, inlineFrameBody, type FrameBody, type FrameMethod } from './frame-body.js';
import { RefBatch } from './frame-refs.js';
import { grantedChannels } from './grants.js';
import { recordLine, sha256Hex, type Direction, type Kind, type RecordClass } from './record.js';
import { manifestRedactPaths, MAX_REDACT_PATHS, redactMessage, type RedactionRules } from './redact.js';
import { headerBody, isPlain, parseBody } from './bodies.js';
import { segmentFileName } from './file-names.js';
import { isRecord } from '../protocol/json-object.js';

/** A frame shared by many sessions (the fan-out hub's): its record bodies are built once, on first use. */
export interface SharedFrame {
  readonly channel_id: number;
  readonly payloadBytes: number;
  body(keepPayload: boolean): FrameBody;
}

/** Where a session's lines go (the write queue, in the edge). */
export interface LineSink {
  /** Whether the write queue takes `bytes` more now. */
  room(bytes: number): boolean;
  /** Appends a line (without its newline) to `file`, created on its first line. */
  write(file: string, line: string, bytes: number): void;
  /** `file` is complete; `finalHash` is the hash of its last line (the anchor of its last record). */
  close(file: string, finalHash: string, records: number): void;
  /** Records the queue had no room for. */
  dropped(records: number, bytes: number): void;
}

export interface SessionLogOptions {
  readonly route: string;
  /** `hub`: the frames a fan-out hub delivered to recorded observers, once each (see frame-refs.ts). */
  readonly kind: 'relay' | 'observer' | 'hub';
  readonly session_id: string;
  /** Wall-clock and monotonic milliseconds at ts_mono_ns 0 (the recording's start). */
  readonly startedWallMs: number;
  readonly startedMs: number;
  /** `hashes`: frames as header + payload hash (an audit record); `payloads`: with their payloads. */
  readonly frames: 'hashes' | 'payloads';
  /** payloads: only for these channels (by name). */
  readonly channels?: readonly string[] | undefined;
  /** payloads: at most this many payload bytes per session; then hashes only. */
  readonly maxPayloadBytes?: number | undefined;
  readonly rotateBytes: number;
  readonly rotateMs: number;
  readonly isCredential: (value: string) => boolean;
  /** The configured credentials, to find inside longer strings (see redact.ts). */
  readonly credentials?: () => Iterable<string>;
  /** The route's own redact_paths (the world's manifest adds its own when the session sees it). */
  readonly redactPaths: readonly string[];
  readonly maxJsonDepth: number;
  /** More header fields (recorder version, why the recording starts). */
  readonly header: Readonly<Record<string, unknown>>;
}

/** Frames of a `frames` record: those delivered within BATCH_MS, at most BATCH_FRAMES or BATCH_BYTES. */
const BATCH_MS = 1000;
const BATCH_FRAMES = 512;
const BATCH_BYTES = 256 * 1024;
/** Tokens a session log remembers from `session_token` (and the like) keys, to redact them elsewhere too. */
const MAX_LEARNED = 16;
/** A bound on the size of a `dropped` record, reserved when checking for room. */
const DROPPED_RECORD_BYTES = 192;

export class SessionLog {
  readonly recordClass: RecordClass;
  private readonly rules: RedactionRules & { paths: string[] };
  private readonly channelNames = new Map<number, string>();
  private prev: string | null = null;
  private file = '';
  private segment = -1;
  private segBytes = 0;
  private segRecords = 0;
  private segStartMs = 0;
  private lastTs = 0;
  private keptPayloadBytes = 0;
  private budgetNoted = false;
  private drops = { records: 0, bytes: 0, first: 0, last: 0 };
  private lastText = '';
  private lastBody: string | undefined;
  private ended = false;
  /** Shared frames waiting to be written as one `frames` record (see sharedFrame). */
  private batch:
    { direction: Direction; entries: string[]; bytes: number; firstMs: number; firstTs: number } | undefined;
  /** Hub frames delivered, by reference, waiting to be written as one `frame_refs` record. */
  private refs: RefBatch | undefined;
  /**
   * This session's batch period: BATCH_MS plus up to half of it by its id, so that the many observer
   * sessions fed by one hub frame do not all write their batch on the same frame.
   */
  private readonly batchMs: number;
  /** Records written and dropped over the whole recording. */
  readonly totals = { records: 0, dropped: 0, files: 0 };
  /**
   * Takes in the frames delivered to the session that it was not told of one at a time (an observer's
   * topic shards, edge/observer-recording.ts): called before any other record, on `tick` and at the end,
   * so the file keeps the order of delivery.
   */
  pendingFrames: (() => void) | undefined;

  constructor(
    private readonly o: SessionLogOptions,
    private readonly sink: LineSink,
  ) {
    const complete = o.frames === 'payloads' && o.channels === undefined && o.maxPayloadBytes === undefined;
    this.recordClass = complete ? 'replay_bundle' : 'audit_record';
    this.batchMs = BATCH_MS + (Number.parseInt(sha256Hex(o.session_id).slice(0, 4), 16) % (BATCH_MS / 2));
    const learned = new Set<string>();
    this.rules = {
      isCredential: (v) => learned.has(v) || o.isCredential(v),
      credentials: () => (o.credentials === undefined ? learned : [...learned, ...o.credentials()]),
      // The world's own session token, say, is no credential the edge was configured with.
      found: (v) => {
        if (learned.size < MAX_LEARNED && v.length >= 8) learned.add(v);
      },
      paths: [...o.redactPaths],
    };
    this.startSegment(o.startedMs, undefined);
  }

  get closed(): boolean {
    return this.ended;
  }

  /** The name of its first file (segment 0). */
  get firstFile(): string {
    return segmentFileName(this.o, 0);
  }

  /** A channel's name, as the grants this session saw name it. */
  channelName(channel_id: number): string | undefined {
    return this.channelNames.get(channel_id);
  }

  /** The file being written now. */
  get currentFile(): string {
    return this.file;
  }

  /** A control message as `direction` saw it (inline frames become `frame` records). */
  message(direction: Direction, text: string, nowMs: number): void {
    if (this.ended) return;
    if (text === this.lastText && this.lastBody !== undefined) {
      this.append(nowMs, direction, 'message', this.lastBody);
      return;
    }
    const parsed = parseBody(text, this.o.maxJsonDepth, this.rules, (result) => this.learn(result));
    if (typeof parsed !== 'string') {
      // Never cached: whether its payload is kept depends on the budget left.
      const { method, params } = parsed;
      const b64 = params.payload_b64;
      const estimate = typeof b64 === 'string' ? Math.ceil((b64.length * 3) / 4) : 0;
      const channel = typeof params.channel_id === 'number' ? params.channel_id : -1;
      const keep = this.keepPayload(channel, estimate, nowMs);
      const redacted = redactMessage(params, this.rules) as Record<string, unknown>;
      this.appendFrame(nowMs, direction, inlineFrameBody(method, redacted, keep));
      return;
    }
    this.lastText = text;
    this.lastBody = parsed;
    this.append(nowMs, direction, 'message', parsed);
  }

  /** A binary frame (from a stream connection), peeked into `h`. */
  frame(
    direction: Direction,
    method: FrameMethod,
    buf: Uint8Array,
    h: FrameHeader,
    binding: string,
    nowMs: number,
    sha256?: string,
  ): void {
    if (this.ended) return;
    const keep = this.keepPayload(h.channel_id, h.payload_len, nowMs);
    this.appendFrame(nowMs, direction, binaryFrameBody(method, buf, h, binding, keep, sha256));
  }

  /**
   * A frame whose bodies were built once for every session that records it (the fan-out hub's frames).
   * Such frames are recorded in batches: one `frames` record holds the bodies of the frames delivered in
   * up to BATCH_MS (at most BATCH_FRAMES of them), each as a `frame` record's body would be; any other
   * record, `tick` and the end write the batch first, so the file's order is the order of delivery.
   */
  sharedFrame(direction: Direction, frame: SharedFrame, nowMs: number, channelName?: string): void {
    if (this.ended) return;
    // A hub log sees no grants: the observer that delivered the frame first names its channel.
    if (channelName !== undefined) this.channelNames.set(frame.channel_id, channelName);
    const keep = this.keepPayload(frame.channel_id, frame.payloadBytes, nowMs);
    const body = frame.body(keep);
    let b = this.batch;
    if (b !== undefined && (b.direction !== direction || nowMs - b.firstMs >= this.batchMs)) {
      this.flushBatch(nowMs);
      b = undefined;
    }
    b ??= this.batch = { direction, entries: [], bytes: 0, firstMs: nowMs, firstTs: this.ts(nowMs) };
    b.entries.push(body.json);
    b.bytes += body.bytes + 1;
    this.keptPayloadBytes += body.keptBytes; // counted when taken (a dropped batch still counts)
    if (b.entries.length >= BATCH_FRAMES || b.bytes >= BATCH_BYTES) this.flushBatch(nowMs);
  }

  /**
   * A hub frame delivered to this (observer) session, by its number `n` in the hub log's `hubFile`,
   * batched into one `frame_refs` record per BATCH_MS like `sharedFrame`'s batches.
   */
  frameRef(direction: Direction, hubFile: string, binding: string, n: number, nowMs: number): void {
    if (this.ended) return;
    let r = this.refs;
    if (r !== undefined && (!r.fits(direction, hubFile, binding) || nowMs - r.firstMs >= this.batchMs)) {
      this.flushBatch(nowMs);
      r = undefined;
    }
    (r ?? (this.refs = new RefBatch(direction, hubFile, binding, nowMs, this.ts(nowMs)))).add(n);
  }

  /** Time passes: a batch of frames older than BATCH_MS is written. */
  tick(nowMs: number): void {
    this.pendingFrames?.();
    const first = this.batch?.firstMs ?? this.refs?.firstMs;
    if (first !== undefined && nowMs - first >= this.batchMs) this.flushBatch(nowMs);
  }

  private flushBatch(nowMs: number): void {
    const r = this.refs;
    if (r !== undefined) {
      this.refs = undefined;
      this.append(nowMs, r.direction, 'frame_refs', r.json());
    }
    const b = this.batch;
    if (b === undefined) return;
    this.batch = undefined;
    const head = `{"first_ts_mono_ns":${b.firstTs},"frames":[`;
    this.append(nowMs, b.direction, 'frames', `${head}${b.entries.join(',')}]}`, head.length + b.bytes + 1);
  }

  /** A decision or event of the edge's own (`event` names it). */
  event(body: Readonly<Record<string, unknown>>, nowMs: number): void {
    if (this.ended) return;
    this.append(nowMs, 'edge', 'edge', JSON.stringify(redactMessage(body, this.rules)));
  }

  /** The recording ends: what was dropped last, then an `end` record; the file is closed. */
  end(reason: string, nowMs: number): void {
    if (this.ended) return;
    this.pendingFrames?.();
    this.flushBatch(nowMs);
    this.flushDrops(nowMs);
    const body = JSON.stringify({ reason, records: this.segRecords + 1, dropped: this.totals.dropped });
    this.write(nowMs, 'edge', 'end', body);
    this.sink.close(this.file, this.prev!, this.segRecords);
    this.ended = true;
  }

  // ---------------------------------------------------------------- bodies

  /** A message received (`agent`, `world`) or sent by the edge (`edge_to_*`: see `sent`). */
  text(direction: Direction, text: string, nowMs: number): void {
    if (direction === 'edge_to_agent' || direction === 'edge_to_world') this.sent(direction, text, nowMs);
    else this.message(direction, text, nowMs);
  }

  /**
   * A message the edge sent (`edge_to_agent`, `edge_to_world`): JSON it wrote, or a peer's text it parsed
   * before relaying it, so valid JSON. Recorded as it is when `plain` (most of what the edge sends
   * observers: telemetry, heartbeats, events), else like a message received.
   */
  sent(direction: 'edge_to_agent' | 'edge_to_world', text: string, nowMs: number): void {
    if (this.ended) return;
    if (isPlain(text, this.rules)) this.append(nowMs, direction, 'message', text);
    else this.message(direction, text, nowMs);
  }

  /**
   * A message the edge wrote of its own keys and numbers only (session.telemetry, once a second per
   * observer): no string in it can be a credential or a grant, so it is recorded as it is without the
   * scan `sent` makes (profiled: 2-3 % of a recording edge), unless redact_paths are in force (a path
   * may name one of its numbers). ASCII, so its length is its size.
   */
  sentNumbers(direction: 'edge_to_agent' | 'edge_to_world', text: string, nowMs: number): void {
    if (this.ended) return;
    if (this.rules.paths.length > 0 || text.charCodeAt(0) !== 0x7b) this.sent(direction, text, nowMs);
    else this.append(nowMs, direction, 'message', text, text.length);
  }

  /** Channel names and the world's redact_paths, from the results the session sees. */
  private learn(result: unknown): void {
    for (const [id, name] of grantedChannels(result)) this.channelNames.set(id, name);
    if (isRecord(result) && result.safety_policy !== undefined) {
      // At most MAX_REDACT_PATHS in all, learned from every result a peer sends: each is walked for every
      // later message, so results naming new paths must not make recording ever costlier.
      for (const p of manifestRedactPaths(result)) {
        if (this.rules.paths.length >= MAX_REDACT_PATHS) break;
        if (!this.rules.paths.includes(p)) this.rules.paths.push(p);
      }
      this.lastText = ''; // cached bodies were redacted without them
    }
  }

  private keepPayload(channel_id: number, bytes: number, nowMs: number): boolean {
    if (this.o.frames !== 'payloads') return false;
    const only = this.o.channels;
    if (only !== undefined && !only.includes(this.channelNames.get(channel_id) ?? '')) return false;
    const max = this.o.maxPayloadBytes;
    if (max === undefined || this.keptPayloadBytes + bytes <= max) return true;
    if (!this.budgetNoted) {
      this.budgetNoted = true;
      this.event(
        { event: 'payload_budget_reached', max_payload_bytes: max, kept_bytes: this.keptPayloadBytes },
        nowMs,
      );
    }
    return false;
  }

  private appendFrame(nowMs: number, direction: Direction, body: FrameBody): void {
    if (this.append(nowMs, direction, 'frame', body.json, body.bytes))
      this.keptPayloadBytes += body.keptBytes;
  }

  // ---------------------------------------------------------------- lines

  /** A record, unless the queue has no room for it (then it is counted as dropped). */
  private append(
    nowMs: number,
    direction: Direction,
    kind: Kind,
    bodyJson: string,
    bodyBytes = Buffer.byteLength(bodyJson),
  ): boolean {
    // Frames delivered before this record come first.
    if (kind !== 'frames' && kind !== 'frame_refs') {
      this.pendingFrames?.();
      this.flushBatch(nowMs);
    }
    const estimate = bodyBytes + 160;
    if (!this.sink.room(estimate + (this.drops.records > 0 ? DROPPED_RECORD_BYTES : 0))) {
      const ts = this.ts(nowMs);
      if (this.drops.records === 0) this.drops.first = ts;
      this.drops.records++;
      this.drops.bytes += estimate;
      this.drops.last = ts;
      this.totals.dropped++;
      this.sink.dropped(1, estimate);
      return false;
    }
    this.flushDrops(nowMs);
    this.write(nowMs, direction, kind, bodyJson, bodyBytes);
    return true;
  }

  private flushDrops(nowMs: number): void {
    const d = this.drops;
    if (d.records === 0) return;
    const body = `{"records":${d.records},"bytes":${d.bytes},"first_ts_mono_ns":${d.first},"last_ts_mono_ns":${d.last}}`;
    this.drops = { records: 0, bytes: 0, first: 0, last: 0 };
    this.write(nowMs, 'edge', 'dropped', body);
  }

  /** Writes one record, rotating first when the file is full or old enough. */
  private write(
    nowMs: number,
    direction: Direction,
    kind: Kind,
    bodyJson: string,
    bodyBytes = Buffer.byteLength(bodyJson),
  ): void {
    const full =
      this.segBytes + bodyBytes + 160 > this.o.rotateBytes || nowMs - this.segStartMs >= this.o.rotateMs;
    if (full && this.segRecords > 1 && kind !== 'end') this.rotate(nowMs);
    this.put(this.ts(nowMs), direction, kind, bodyJson, bodyBytes);
  }

  private put(
    ts: number,
    direction: Direction,
    kind: Kind,
    bodyJson: string,
    bodyBytes = Buffer.byteLength(bodyJson),
    recordClass?: RecordClass,
  ): void {
    const line = recordLine(ts, direction, kind, bodyJson, this.prev, recordClass);
    // Everything around the body is ASCII: its bytes are its characters.
    const bytes = line.length - bodyJson.length + bodyBytes + 1;
    this.sink.write(this.file, line, bytes);
    this.prev = sha256Hex(line);
    this.segBytes += bytes;
    this.segRecords++;
    this.totals.records++;
  }

  private rotate(nowMs: number): void {
    const next = segmentFileName(this.o, this.segment + 1);
    this.put(this.ts(nowMs), 'edge', 'rotated', JSON.stringify({ next, records: this.segRecords + 1 }));
    this.sink.close(this.file, this.prev!, this.segRecords);
    this.startSegment(nowMs, { file: this.file, last_hash: this.prev! });
  }

  private startSegment(nowMs: number, continues: { file: string; last_hash: string } | undefined): void {
    this.segment++;
    this.file = segmentFileName(this.o, this.segment);
    this.prev = null;
    this.segBytes = 0;
    this.segRecords = 0;
    this.segStartMs = nowMs;
    this.totals.files++;
    const header = headerBody(this.o, this.segment, continues);
    const json = JSON.stringify(header);
    this.put(this.ts(nowMs), 'edge', 'header', json, Buffer.byteLength(json), this.recordClass);
  }

  /** Nanoseconds since the start, never backwards. */
  private ts(nowMs: number): number {
    const t = Math.max(this.lastTs, Math.round((nowMs - this.o.startedMs) * 1e6));
    this.lastTs = t;
    return t;
  }
}
