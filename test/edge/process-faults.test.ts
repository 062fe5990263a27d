/**
 * The process-level boundary (issue 12): what no connection's boundary caught is reported, not fatal;
 * and a log destination that fails stops logging instead of feeding its own errors back as faults.
 */
import { describe, expect, it } from 'vitest';
import { containProcessFaults } from '../../src/edge/process-faults.js';
import { createLogger } from '../../src/telemetry/logger.js';
import { EdgeMetrics } from '../../src/telemetry/metrics.js';

describe('containProcessFaults', () => {
  it('reports an uncaught exception as a fault of the process, and a failing stdout silences the log once', async () => {
    const faults: string[] = [];
    const metrics = new EdgeMetrics();
    const log = createLogger('info');
    const stdoutListeners = process.stdout.listenerCount('error');
    const release = containProcessFaults({
      fault: (where) => faults.push(where),
      log,
      metrics,
    });
    try {
      // What Node does with an exception nothing caught (its typings list only other emit signatures).
      (process.emit as (event: string, ...args: unknown[]) => boolean)(
        'uncaughtException',
        new Error('escaped a boundary'),
        'uncaughtException',
      );
      expect(faults).toEqual(['process']);
      const eio = Object.assign(new Error('write EIO'), { code: 'EIO' });
      process.stdout.emit('error', eio);
      process.stdout.emit('error', eio);
      expect(log.level).toBe('silent');
      const text = (await metrics.exposition()).body;
      expect(text).toMatch(/awp_edge_internal_errors_total\{where="log_destination"\} 1\b/);
    } finally {
      release();
    }
    expect(process.stdout.listenerCount('error')).toBe(stdoutListeners);
  });
});
