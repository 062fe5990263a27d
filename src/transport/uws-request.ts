import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { parseProtocols, type UpgradeRequest } from './engine.js';

/** What the uWS upgrade needs later, copied out of the stack-allocated request. */
export interface CopiedUpgrade {
  readonly request: UpgradeRequest;
  readonly key: string;
  readonly version: string;
}

/**
 * Copies everything the edge and the upgrade need out of a uWS request. uWS requests are valid only
 * until the handler returns, so this runs before any await.
 */
export function copyUpgrade(res: HttpResponse, req: HttpRequest): CopiedUpgrade {
  const headers = new Map<string, string>();
  req.forEach((key, value) => {
    const name = key.toLowerCase();
    const prev = headers.get(name);
    if (prev === undefined) headers.set(name, value);
    else if (name === 'cookie') headers.set(name, `${prev}; ${value}`);
    else if (!FIRST_WINS.has(name)) headers.set(name, `${prev}, ${value}`);
  });
  // The typings say string; uWS returns undefined for a URL without '?'.
  const query = req.getQuery() as string | undefined;
  const request: UpgradeRequest = {
    path: req.getUrl(),
    query: query ?? '',
    header: (name) => headers.get(name.toLowerCase()),
    headers,
    protocols: parseProtocols(headers.get('sec-websocket-protocol')),
    remoteAddress: formatAddress(res.getRemoteAddress()),
  };
  return {
    request,
    key: req.getHeader('sec-websocket-key'),
    version: req.getHeader('sec-websocket-version'),
  };
}

/** Headers Node's HTTP parser keeps the first of when repeated (so both engines see the same value). */
const FIRST_WINS = new Set([
  'age',
  'authorization',
  'content-length',
  'content-type',
  'etag',
  'expires',
  'from',
  'host',
  'if-modified-since',
  'if-unmodified-since',
  'last-modified',
  'location',
  'max-forwards',
  'proxy-authorization',
  'referer',
  'retry-after',
  'server',
  'user-agent',
]);

/**
 * Formats uWS's binary remote address the way Node's `socket.remoteAddress` does: dotted IPv4,
 * `::ffff:a.b.c.d` for IPv4-mapped IPv6, compressed IPv6 otherwise.
 */
export function formatAddress(raw: ArrayBuffer): string {
  const b = new Uint8Array(raw);
  if (b.length === 4) return b.join('.');
  if (b.length !== 16) return '';
  if (b.subarray(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff) {
    return `::ffff:${b.subarray(12).join('.')}`;
  }
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((b[i]! << 8) | b[i + 1]!).toString(16));
  // The URL parser applies RFC 5952 compression (longest zero run -> '::').
  return new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1);
}
