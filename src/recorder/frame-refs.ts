/**
 * An observer session's frames by reference (sans-IO). At fan-out, one hub frame is delivered to every
 * observer: its record (header, payload hash, payload) is written once, in the route's hub log (a file of
 * kind `hub`, each frame numbered `n` in the order it was first delivered), and each observer's file
 * records what it was delivered as `frame_refs`: runs of those numbers, in delivery order, with the hub
 * log's first file (its segments share the name up to the segment number; a frame may be in any of them). An observer that keeps up costs a few bytes per second of frames, not one
 * header and hash per frame.
 *
 * Body: `{"first_ts_mono_ns", "hub_file", "binding", "frames": count, "runs": [[first n, count], ...]}`.
 */
import type { Direction } from './record.js';

/** At most this many runs in one record (a slow observer's deliveries have gaps). */
export const MAX_RUNS = 512;

export class RefBatch {
  /** Flat pairs: first number of a run, its length. */
  private readonly runs: number[] = [];
  private count = 0;

  constructor(
    readonly direction: Direction,
    readonly hubFile: string,
    readonly binding: string,
    readonly firstMs: number,
    private readonly firstTs: number,
  ) {}

  /** Whether the frame numbered `n` in `hubFile`, delivered on `binding`, can join this batch. */
  fits(direction: Direction, hubFile: string, binding: string): boolean {
    return (
      direction === this.direction &&
      hubFile === this.hubFile &&
      binding === this.binding &&
      this.runs.length < 2 * MAX_RUNS
    );
  }

  add(n: number): void {
    const r = this.runs;
    const last = r.length - 2;
    if (last >= 0 && r[last]! + r[last + 1]! === n) r[last + 1]!++;
    else r.push(n, 1);
    this.count++;
  }

  /** The record body (ASCII: numbers, and a file name the recorder made). */
  json(): string {
    const r = this.runs;
    let runs = '';
    for (let i = 0; i < r.length; i += 2) runs += `${i === 0 ? '' : ','}[${r[i]!},${r[i + 1]!}]`;
    return `{"first_ts_mono_ns":${this.firstTs},"hub_file":${JSON.stringify(this.hubFile)},"binding":${JSON.stringify(this.binding)},"frames":${this.count},"runs":[${runs}]}`;
  }
}

/** Most numbers one `frame_refs` record expands to: a hostile file may claim a huge run. */
export const MAX_REF_NUMBERS = 2 * MAX_RUNS * 1024;

/**
 * The numbers a `frame_refs` body refers to, in order; undefined when the body is not one, or refers to
 * more than `max`.
 */
export function refNumbers(
  body: Readonly<Record<string, unknown>>,
  max = MAX_REF_NUMBERS,
): number[] | undefined {
  const runs = body.runs;
  if (!Array.isArray(runs)) return undefined;
  const out: number[] = [];
  for (const run of runs as unknown[]) {
    if (!Array.isArray(run) || run.length !== 2) return undefined;
    const [first, n] = run as unknown[];
    if (
      !Number.isSafeInteger(first) ||
      !Number.isSafeInteger(n) ||
      (first as number) < 0 ||
      (n as number) < 1
    )
      return undefined;
    if (out.length + (n as number) > max) return undefined;
    for (let i = 0; i < (n as number); i++) out.push((first as number) + i);
  }
  return out;
}
