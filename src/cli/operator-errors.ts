/**
 * Failures an operator causes and fixes (a port in use, a file that cannot be read, an engine that does not
 * load here), said in one line that names the listener or the file: no stack trace, which would only bury it.
 * Anything else is a bug and keeps its stack.
 */

/** The listeners a run opens: the config's key, what it is, and its port. */
export interface Listener {
  readonly key: string;
  readonly what: string;
  readonly host: string;
  readonly port: number;
}

const LISTEN_REASONS: Readonly<Record<string, string>> = {
  EADDRINUSE: 'the port is in use (another process listens there)',
  EACCES: 'permission denied (ports below 1024 need privileges)',
  EADDRNOTAVAIL: 'the address is not one of this machine',
  ENOTFOUND: 'the host name does not resolve',
};

const FILE_REASONS: Readonly<Record<string, string>> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EISDIR: 'it is a directory',
  EPERM: 'operation not permitted',
};

interface SystemError extends Error {
  code?: string;
  port?: number;
  address?: string;
  path?: string;
  syscall?: string;
}

/** The one line for an operator's error, or undefined when `err` is not one. */
export function operatorError(err: unknown, listeners: readonly Listener[]): string | undefined {
  if (!(err instanceof Error)) return undefined;
  const e = err as SystemError;
  const code = e.code ?? '';
  if (
    e.syscall === 'listen' ||
    e.syscall === 'bind' ||
    (LISTEN_REASONS[code] !== undefined && e.port !== undefined)
  ) {
    return `cannot listen on ${listenerOf(listeners, e.port, e.address)}: ${LISTEN_REASONS[code] ?? e.message}`;
  }
  // uWebSockets.js says only that it could not listen (engine: uws; auto falls back to ws, which says why).
  const uws = /cannot listen on (\S+):(\d+)/.exec(e.message);
  if (uws !== null)
    return `cannot listen on ${listenerOf(listeners, Number(uws[2]), uws[1])}: the port is in use or not permitted`;
  if (/^engine "\w+" was requested/.test(e.message)) return e.message.split('\n')[0];
  if (e.path !== undefined && FILE_REASONS[code] !== undefined)
    return `cannot read ${e.path}: ${FILE_REASONS[code]}`;
  if (code.startsWith('ERR_OSSL') || /PEM|certificate|private key/i.test(e.message))
    return `TLS: the certificate or key cannot be used: ${e.message.split('\n')[0]}`;
  return undefined;
}

function listenerOf(
  listeners: readonly Listener[],
  port: number | undefined,
  address: string | undefined,
): string {
  const matching = listeners.filter((l) => l.port === port && l.port !== 0);
  const where = `${address ?? matching[0]?.host ?? '?'}:${port ?? '?'}`;
  if (matching.length === 0) return where;
  return `${where} (${matching.map((l) => `${l.key}: ${l.what}`).join('; ')})`;
}
