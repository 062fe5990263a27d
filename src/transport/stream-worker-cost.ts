/**
 * What the stream worker's batches cost it (stream-worker.ts), estimated on the main thread as a turn
 * builds its batch, so that a turn hands over about BATCH_WORKER_US of the worker's time
 * (`EngineBacklog.full`): the worker then carries out each batch in a millisecond or two, and a frame waits
 * for it about that long. Without a bound a turn handed over as much as was cheap to hand over: at 5x
 * overload proprio frames were 41-70 ms old at p99 (the goal is 30); bounded, about 20 ms (bench/RESULTS.md,
 * "Stream connections on a worker thread").
 *
 * The estimate is a model of the engine's writes (per message, per KiB), scaled by what the worker
 * reports it spent on recent batches: the model's constants are rough, the scale is this machine's, under
 * this load (a write to a socket that is behind is a copy into its buffer, not a syscall). Sans-IO: the
 * caller passes the clock's readings and the worker's reports.
 */

/** The model (us): per message written to a socket, and per KiB of it. */
const WRITE_US = 3;
const KIB_US = 1;
/**
 * A batch's worth of the worker's time (us). The bound was first set on the model alone, at 4,000 us of
 * it; the worker, timed at 5x overload on the bench machine, spent 0.3-0.4 of the model's estimate, so
 * that bound was 1.2-1.6 ms of its time. This keeps it there on any machine.
 */
export const BATCH_WORKER_US = 1500;

/**
 * Batches handed over and not yet carried out before the edge's sliced work waits (`behind`). With one,
 * the worker idled while its report went back and the main thread built the next batch; with two it has
 * the next one meanwhile, and a frame waits for at most two bounded batches. At 5x overload, 1,819
 * observers: 11 % more frames delivered (median of 7 runs each), proprio age p99 up from 21 to 27 ms (goal
 * 30). bench/RESULTS.md, "Two batches in flight". (Tried before the batch bound, when batches were
 * unbounded, two made frames almost twice as old.)
 */
export const BATCHES_IN_FLIGHT = 2;

/** The scale follows about the last this much estimated work (us), and moves once it has seen a batch's worth. */
const SCALE_WINDOW_US = 10 * BATCH_WORKER_US;
const SCALE_MIN_SEEN_US = BATCH_WORKER_US;
/** Bounds on the scale: a report skewed by a pause (GC, descheduling) moves batches by at most this much. */
const SCALE_MIN = 0.1;
const SCALE_MAX = 10;

export class BatchCost {
  /** The model's estimate for the batch being built (us). */
  private building = 0;
  /** Batches handed over and not yet reported carried out: their sequence number, when, and estimate. */
  private readonly posted: { seq: number; atMs: number; estimatedUs: number }[] = [];
  /** Decayed sums over recent batches of what the worker spent and what the model estimated (us). */
  private spentUs = 0;
  private estimatedUs = 0;
  /** Worker time per estimated unit (1 until the worker has reported enough). */
  scale = 1;

  /** One message of `bytes` written to `sockets` sockets (a publish writes to each of its topic's members). */
  write(bytes: number, sockets = 1): void {
    this.building += sockets * (WRITE_US + (bytes / 1024) * KIB_US);
  }

  /** Whether the batch being built is worth a turn of the worker's time. */
  full(): boolean {
    return this.building * this.scale >= BATCH_WORKER_US;
  }

  /** Whether as many batches as may be are in flight: the work that feeds them waits for a report. */
  behind(): boolean {
    return this.posted.length >= BATCHES_IN_FLIGHT;
  }

  /** The batch being built was handed over as `seq` at `atMs`. */
  handedOver(seq: number, atMs: number): void {
    this.posted.push({ seq, atMs, estimatedUs: this.building });
    this.building = 0;
  }

  /**
   * The worker has carried out the batches up to `acked`, spending `workerUs` on them since its last
   * report. Returns each such batch's time from hand-over until now (ms).
   */
  carriedOut(acked: number, workerUs: number, nowMs: number): number[] {
    const waits: number[] = [];
    let estimated = 0;
    while (this.posted.length > 0 && this.posted[0]!.seq <= acked) {
      const b = this.posted.shift()!;
      waits.push(nowMs - b.atMs);
      estimated += b.estimatedUs;
    }
    this.spentUs += workerUs;
    this.estimatedUs += estimated;
    if (this.estimatedUs > SCALE_WINDOW_US) {
      const keep = SCALE_WINDOW_US / this.estimatedUs;
      this.spentUs *= keep;
      this.estimatedUs = SCALE_WINDOW_US;
    }
    if (this.estimatedUs >= SCALE_MIN_SEEN_US)
      this.scale = Math.min(SCALE_MAX, Math.max(SCALE_MIN, this.spentUs / this.estimatedUs));
    return waits;
  }

  /** Nothing is in flight any more, nor will the batch being built be (the worker ended). */
  clear(): void {
    this.posted.length = 0;
    this.building = 0;
  }
}
