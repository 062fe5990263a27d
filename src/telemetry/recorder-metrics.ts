/**
 * The flight recorder's metrics (issue 14), on the edge's registry, by route: records written and
 * dropped, bytes written, files deleted by retention, write errors. Series start at 0 for every route that
 * records, so a drop shows as a rate from the first one.
 */
import { Counter, type Registry } from 'prom-client';

export class RecorderMetrics {
  private static readonly byRegistry = new WeakMap<Registry, RecorderMetrics>();

  static for(registry: Registry): RecorderMetrics {
    let m = RecorderMetrics.byRegistry.get(registry);
    if (m === undefined) RecorderMetrics.byRegistry.set(registry, (m = new RecorderMetrics(registry)));
    return m;
  }

  readonly records: Counter<'route'>;
  readonly dropped: Counter<'route'>;
  readonly bytes: Counter<'route'>;
  readonly filesDeleted: Counter<'route'>;
  readonly writeErrors: Counter<'route'>;

  private constructor(registry: Registry) {
    const counter = (name: string, help: string) =>
      new Counter({ name, help, labelNames: ['route'] as const, registers: [registry] });
    this.records = counter(
      'awp_edge_recorder_records_total',
      'Records the flight recorder wrote to recording files (AWP audit-log lines), by route.',
    );
    this.dropped = counter(
      'awp_edge_recorder_records_dropped_total',
      'Records the flight recorder dropped because its write queue was full (the disk was behind) or a file could not be written; each file says how many it lost.',
    );
    this.bytes = counter(
      'awp_edge_recorder_bytes_written_total',
      'Bytes written to recording files, by route.',
    );
    this.filesDeleted = counter(
      'awp_edge_recorder_files_deleted_total',
      'Recording files deleted by retention (retain_files, retain_bytes), by route.',
    );
    this.writeErrors = counter(
      'awp_edge_recorder_write_errors_total',
      'Recording files that could not be created or written (each stops taking records), by route.',
    );
  }

  /** Series at 0 for a route that records. */
  initialise(route: string): void {
    for (const c of [this.records, this.dropped, this.bytes, this.filesDeleted, this.writeErrors])
      c.labels(route).inc(0);
  }
}
