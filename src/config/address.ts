/** Address helpers shared by the config loader and the listeners: pure functions, no I/O. */

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/** `HOST:PORT` with a DNS name, IPv4 address or `[IPv6]` host; undefined when it is not one. */
export function parseAddress(s: string): ListenAddress | undefined {
  const m = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(s);
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port > 65535) return undefined;
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port };
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}

const ORIGIN =
  /^https?:\/\/(\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*)(:\d{1,5})?\/?$/;

/**
 * An `allowed_origins` entry or an `Origin` header value as a browser serialises it: `scheme://host[:port]`
 * in lower case, without a trailing slash or a default port, so origins compare as strings. "*" stays "*".
 * Undefined for anything else (another scheme, a path, a query, user info, a port outside 1..65535).
 */
export function normaliseOrigin(entry: string): string | undefined {
  if (entry === '*') return entry;
  const s = entry.toLowerCase();
  if (!ORIGIN.test(s)) return undefined;
  const port = /:(\d+)\/?$/.exec(s)?.[1];
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) return undefined;
  try {
    // The URL parser settles IPv6 and numeric IPv4 forms and drops a default port, as browsers do.
    return new URL(s).origin;
  } catch {
    return undefined;
  }
}
