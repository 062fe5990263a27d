/**
 * The last resort of containment (issue 12), for `serve` and `demo`: an exception or rejection no
 * boundary caught is reported as a fault of the process (a log line, awp_edge_internal_errors_total)
 * instead of ending it, since ending it would end every agent's session.
 */
import type { EdgeContext } from './context.js';

export function containProcessFaults(ctx: Pick<EdgeContext, 'fault' | 'log' | 'metrics'>): () => void {
  const exception = (err: unknown) => ctx.fault('process', err);
  const rejection = (err: unknown) => ctx.fault('process_promise', err);
  // A log destination that fails (terminal gone: EIO; reader gone: EPIPE) would report each of its
  // write errors as a fault whose log line fails again: a loop that spins a core. Logging stops instead.
  const logLost = () => {
    if (ctx.log.level === 'silent') return;
    ctx.log.level = 'silent';
    ctx.metrics.internalErrors.labels('log_destination').inc();
  };
  process.on('uncaughtException', exception);
  process.on('unhandledRejection', rejection);
  process.stdout.on('error', logLost);
  return () => {
    process.off('uncaughtException', exception);
    process.off('unhandledRejection', rejection);
    process.stdout.off('error', logLost);
  };
}
