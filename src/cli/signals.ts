/**
 * The signals `serve` and `demo` answer: SIGTERM (serve: graceful drain), SIGINT (stop at once) and SIGHUP
 * (re-read the credential files). A SIGHUP sent because the terminal the edge runs in hung up (its window
 * closed) is no reload request: the edge stops as on SIGINT rather than live on detached, holding its ports.
 *
 * The handlers go in before the edge starts: a signal's default action would otherwise end a process that
 * has just printed its ports (an operator's SIGHUP then, as a script's, must not kill it).
 */
import { closeSync, openSync } from 'node:fs';

export type StopSignal = 'SIGINT' | 'SIGTERM';

export interface Signals {
  /** Settles with the first stop signal once running (before, a stop signal ends the process). */
  readonly stopped: Promise<StopSignal>;
  /** From now on SIGHUP calls `reload` (before, one is noted and answered here, once running). */
  running(reload: () => void): void;
}

export function watchSignals(): Signals {
  const terminal = controllingTerminal();
  let reload: (() => void) | undefined;
  let pendingHup = false;
  let resolveStopped!: (s: StopSignal) => void;
  const stopped = new Promise<StopSignal>((resolve) => (resolveStopped = resolve));
  const stop = (signal: StopSignal) => {
    // Still starting (e.g. waiting for a store): nothing to drain, end as the default action would.
    if (reload === undefined) process.exit(signal === 'SIGINT' ? 130 : 143);
    process.off('SIGHUP', hup);
    process.off('SIGINT', int);
    process.off('SIGTERM', term);
    resolveStopped(signal);
  };
  const int = () => stop('SIGINT');
  const term = () => stop('SIGTERM');
  const hup = () => {
    if (terminal && !controllingTerminal()) stop('SIGINT');
    else if (reload === undefined) pendingHup = true;
    else reload();
  };
  process.on('SIGHUP', hup);
  process.on('SIGINT', int);
  process.on('SIGTERM', term);
  return {
    stopped,
    running(fn) {
      reload = fn;
      if (pendingHup) {
        pendingHup = false;
        fn();
      }
    },
  };
}

/** Whether the process has a controlling terminal now (a hang-up takes it away). */
function controllingTerminal(): boolean {
  try {
    closeSync(openSync('/dev/tty', 'r'));
    return true;
  } catch {
    return false;
  }
}
