/**
 * Host and Origin of an upgrade request, both hostile: checked by pattern before anything (a URL
 * constructor, a log line, an endpoint URL) uses them.
 */

const REG_NAME = /^[a-z0-9._-]+(?::(\d{1,5}))?$/;
const IPV6 = /^\[[0-9a-f:.]+\](?::(\d{1,5}))?$/;
const ORIGIN = /^(https?):\/\/(\[[0-9a-f:.]+\]|[a-z0-9._-]+)(?::(\d{1,5}))?$/;

/** A Host header as a valid authority (`host[:port]`, lower case), or undefined. */
export function parseAuthority(host: string): string | undefined {
  const h = host.trim().toLowerCase();
  if (h.length === 0 || h.length > 255) return undefined;
  const m = REG_NAME.exec(h) ?? IPV6.exec(h);
  if (m === null) return undefined;
  if (m[1] !== undefined && Number(m[1]) > 65535) return undefined;
  // The pattern admits what the URL parser rejects or rewrites (`1.2.3.256`, `09`, `[:]`, `0x7f.1`):
  // only a host the endpoints' URLs will carry unchanged is one (found by test/fuzz).
  const hostPart = m[1] !== undefined ? h.slice(0, h.length - m[1].length - 1) : h;
  try {
    return new URL(`http://${h}/`).hostname === hostPart ? h : undefined;
  } catch {
    return undefined;
  }
}

interface Origin {
  readonly scheme: 'http' | 'https';
  readonly host: string;
  readonly port: number;
}

function defaultPort(scheme: string): number {
  return scheme === 'https' || scheme === 'wss' ? 443 : 80;
}

/** `scheme://host[:port]` with its default port made explicit; undefined for anything else ("null"). */
function parseOrigin(origin: string): Origin | undefined {
  const m = ORIGIN.exec(origin.trim().toLowerCase().replace(/\/$/, ''));
  if (m === null) return undefined;
  const scheme = m[1] as 'http' | 'https';
  const port = m[3] !== undefined ? Number(m[3]) : defaultPort(scheme);
  return port > 65535 ? undefined : { scheme, host: m[2]!, port };
}

function sameOrigin(a: Origin, b: Origin): boolean {
  return a.scheme === b.scheme && a.host === b.host && a.port === b.port;
}

/** The host and port an authority names, the port defaulted as the origin's scheme would. */
function authorityMatches(o: Origin, authority: string | undefined): boolean {
  if (authority === undefined) return false;
  const a = parseAuthority(authority);
  if (a === undefined) return false;
  const colon = a.lastIndexOf(':');
  const hasPort = colon > a.lastIndexOf(']');
  const host = hasPort ? a.slice(0, colon) : a;
  const port = hasPort ? Number(a.slice(colon + 1)) : defaultPort(o.scheme);
  return host === o.host && port === o.port;
}

/**
 * Whether a browser upgrade from `origin` may proceed (the convention of Centrifugo and Socket.IO):
 * listed origins (or "*"); with no list, only the edge's own origin (the request's Host, or public_url).
 * Non-browser agents send no Origin and are not asked.
 */
export function originAllowed(
  origin: string,
  allowed: readonly string[],
  host: string | undefined,
  publicUrl: string | undefined,
): boolean {
  if (allowed.includes('*')) return true;
  const value = origin.trim().toLowerCase();
  // Browsers send a serialized origin or "null" (sandboxed and file pages); anything else (one
  // WebTransport client library sends its hostname) is not a browser's, and the check protects browsers.
  if (value !== 'null' && !value.includes('://')) return true;
  const o = parseOrigin(value);
  if (o === undefined) return false;
  if (allowed.length > 0) {
    return allowed.some((entry) => {
      const a = parseOrigin(entry);
      return a !== undefined && sameOrigin(a, o);
    });
  }
  if (publicUrl !== undefined) {
    const m = /^[a-z]+:\/\/([^/?#]+)/i.exec(publicUrl);
    return m !== null && authorityMatches(o, m[1]);
  }
  return authorityMatches(o, host);
}
