/**
 * The containment boundary: every handler that runs on a peer's bytes (agent, world, HTTP client) runs
 * inside it. An exception there is a bug, and its blast radius is the one connection whose input caused
 * it: the connection is closed with 1011, the fault is reported (log line, counter), and the process
 * keeps serving everyone else.
 */
import type { ConnectionHandlers } from './engine.js';

/** Where a fault was contained (a bounded metric label) and what was thrown. */
export type FaultReporter = (where: string, err: unknown) => void;

/** Runs `fn`; an exception is reported and `onFault` runs (e.g. closes the connection). */
export function guarded<T>(
  where: string,
  report: FaultReporter,
  fn: () => T,
  onFault?: () => void,
): T | undefined {
  try {
    return fn();
  } catch (err) {
    report(where, err);
    if (onFault !== undefined) {
      try {
        onFault();
      } catch (again) {
        report(where, again);
      }
    }
    return undefined;
  }
}

/** A connection's handlers behind the boundary: a fault closes that connection (`closeOnFault`). */
export function containHandlers(
  where: string,
  h: ConnectionHandlers,
  report: FaultReporter,
  closeOnFault: () => void,
): ConnectionHandlers {
  let faulted = false;
  const fault = () => {
    if (faulted) return;
    faulted = true;
    closeOnFault();
  };
  return {
    message: (data, binary) => {
      if (!faulted) guarded(`${where}_message`, report, () => h.message(data, binary), fault);
    },
    drain: () => {
      if (!faulted) guarded(`${where}_drain`, report, () => h.drain(), fault);
    },
    // The close handler runs even after a fault: it releases what the connection held.
    close: (code, reason) => guarded(`${where}_close`, report, () => h.close(code, reason)),
  };
}
