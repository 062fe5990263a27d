import { createRequire } from 'node:module';
import type * as Uws from 'uWebSockets.js';

export type UwsModule = typeof Uws;

const require = createRequire(import.meta.url);

/**
 * Loads uWebSockets.js, throwing if its binary cannot run here (e.g. glibc older than 2.38).
 *
 * `require`, not `import()`: on Node 20 a failed `import('uWebSockets.js')` (an ESM wrapper over a CJS
 * module that throws) rejects the import *and* raises a second, unhandled rejection, which kills a
 * process that meant to fall back to `ws`. `require` throws once, synchronously.
 */
export function loadUws(): UwsModule {
  return require('uWebSockets.js') as UwsModule;
}

/** Whether uWebSockets.js loads in this runtime, and why not. */
export function uwsAvailability(): { ok: true } | { ok: false; reason: string } {
  try {
    loadUws();
    return { ok: true };
  } catch (err) {
    return { ok: false, reason: err instanceof Error ? err.message : String(err) };
  }
}
