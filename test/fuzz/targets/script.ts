/**
 * The event script of the relay fuzz target, read from the fuzzer's bytes with FuzzedDataProvider, and the
 * writer that encodes a script into bytes that read back as the same script (for the seed corpus).
 *
 * FuzzedDataProvider reads integers from the end of the input (little-endian, as few bytes as the range needs)
 * and strings from the front, so a script's bytes are: every text, in order, then every integer, last first.
 */
import type { FuzzedDataProvider } from '@jazzer.js/core/dist/FuzzedDataProvider.js';

export const OPS = [
  'agent',
  'world',
  'agent-closed',
  'upstream-opened',
  'upstream-closed',
  'upstream-failed',
  'looked-up',
  'lookup-failed',
  'new-connection',
  'select',
  'hand-off',
  'durable',
  'tick',
  'store-toggle',
] as const;
export type Op = (typeof OPS)[number];

export type ScriptEvent =
  | { op: 'agent' | 'world'; text: string }
  | { op: 'looked-up' | 'new-connection' | 'select' | 'tick'; n: number }
  | { op: Exclude<Op, 'agent' | 'world' | 'looked-up' | 'new-connection' | 'select' | 'tick'> };

const MAX_EVENTS = 256;
const MAX_TEXT = 0xffff;
const MAX_PART = 0xff;
const MAX_REPEAT = 20_000;
/** All amplified texts of one script together stay below this many UTF-16 units (one exec stays fast). */
const MAX_AMPLIFIED = 1 << 18;
/** One value of the text-mode integer in eight means "amplified". */
const TEXT_MODES = 8;
const CONFIGS = 12;
const N_RANGE: Partial<Record<Op, number>> = { 'looked-up': 7, 'new-connection': 1, select: 3, tick: 0xffff };

/** Amplified text parts. */
export interface Amplified {
  head: string;
  unit: string;
  middle: string;
  close: string;
  tail: string;
  repeat: number;
}

function readText(fdp: FuzzedDataProvider, budget: { left: number }): string {
  const mode = fdp.consumeIntegralInRange(0, TEXT_MODES - 1);
  if (mode !== TEXT_MODES - 1) return fdp.consumeString(fdp.consumeIntegralInRange(0, MAX_TEXT));
  const part = (): string => fdp.consumeString(fdp.consumeIntegralInRange(0, MAX_PART));
  const head = part();
  const unit = part();
  const middle = part();
  const close = part();
  const tail = part();
  const per = unit.length + close.length;
  const repeat = Math.min(
    fdp.consumeIntegralInRange(0, MAX_REPEAT),
    Math.floor(budget.left / Math.max(per, 1)),
  );
  budget.left -= repeat * per;
  return head + unit.repeat(repeat) + middle + close.repeat(repeat) + tail;
}

export function readScript(fdp: FuzzedDataProvider): { config: number; events: ScriptEvent[] } {
  const config = fdp.consumeIntegralInRange(0, CONFIGS - 1);
  const events: ScriptEvent[] = [];
  const budget = { left: MAX_AMPLIFIED };
  while (fdp.remainingBytes > 0 && events.length < MAX_EVENTS) {
    const op = OPS[fdp.consumeIntegralInRange(0, OPS.length - 1)]!;
    if (op === 'agent' || op === 'world') {
      events.push({ op, text: readText(fdp, budget) });
    } else if (op === 'looked-up' || op === 'new-connection' || op === 'select' || op === 'tick') {
      events.push({ op, n: fdp.consumeIntegralInRange(0, N_RANGE[op]!) });
    } else {
      events.push({ op });
    }
  }
  return { config, events };
}

/**
 * Writes bytes that FuzzedDataProvider reads back as the given values: `int(v, max)` for
 * consumeIntegralInRange(0, max), `bool` for consumeBoolean, `string(s, max)` for
 * consumeString(consumeIntegralInRange(0, max)).
 */
export class FdpWriter {
  private readonly front: Buffer[] = [];
  private readonly ints: Buffer[] = [];

  int(value: number, max: number): this {
    if (!Number.isInteger(value) || value < 0 || value > max) throw new Error(`${value} is not in 0..${max}`);
    const bytes = Math.ceil(Math.log2(max + 1) / 8);
    if (bytes === 0) return this;
    const b = Buffer.alloc(bytes);
    b.writeUIntLE(value, 0, bytes);
    this.ints.push(b);
    return this;
  }

  bool(value: boolean): this {
    return this.int(value ? 1 : 0, 1);
  }

  string(s: string, max: number): this {
    const b = Buffer.from(s, 'utf8');
    this.int(b.length, max);
    this.front.push(b);
    return this;
  }

  bytes(): Buffer {
    return Buffer.concat([...this.front, ...this.ints.slice().reverse()]);
  }
}

/** Encodes a script so that `readScript` reads it back. */
export class ScriptWriter {
  private readonly w = new FdpWriter();

  constructor(config = 0) {
    this.w.int(config, CONFIGS - 1);
  }

  private op(op: Op): void {
    this.w.int(OPS.indexOf(op), OPS.length - 1);
  }

  text(op: 'agent' | 'world', text: string): this {
    this.op(op);
    this.w.int(0, TEXT_MODES - 1);
    this.w.string(text, MAX_TEXT);
    return this;
  }

  amplified(op: 'agent' | 'world', a: Amplified): this {
    this.op(op);
    this.w.int(TEXT_MODES - 1, TEXT_MODES - 1);
    for (const s of [a.head, a.unit, a.middle, a.close, a.tail]) this.w.string(s, MAX_PART);
    this.w.int(a.repeat, MAX_REPEAT);
    return this;
  }

  event(op: Exclude<Op, 'agent' | 'world'>, n = 0): this {
    this.op(op);
    const max = N_RANGE[op];
    if (max !== undefined) this.w.int(n, max);
    return this;
  }

  bytes(): Buffer {
    return this.w.bytes();
  }
}
