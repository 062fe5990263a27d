import { timingSafeEqual } from 'node:crypto';

const BEARER_PROTOCOL = 'awp.bearer.';

/**
 * The bearer credential of an upgrade request: `Authorization: Bearer <credential>`, or an offered
 * `awp.bearer.<credential>` subprotocol for clients that cannot set headers (AWP-SEC-005).
 */
export function bearerCredential(
  authorization: string | undefined,
  protocols: readonly string[],
): string | undefined {
  if (authorization !== undefined) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (m) return m[1];
  }
  for (const p of protocols) if (p.startsWith(BEARER_PROTOCOL)) return p.slice(BEARER_PROTOCOL.length);
  return undefined;
}

/** Query keys that carry credentials; a URL with one is refused (AWP-SEC-006). */
const CREDENTIAL_KEY =
  /(^|[_.-])(token|access[_-]?token|auth|authorization|bearer|key|api[_-]?key|secret|password|passwd|credential|session[_-]?token|sig|signature)$/i;

/** Whether a request URL's query carries something that looks like a credential. */
export function urlCarriesCredential(query: string): boolean {
  if (query === '') return false;
  for (const [k] of new URLSearchParams(query)) if (CREDENTIAL_KEY.test(k)) return true;
  return false;
}

/** Constant-time membership test for a presented credential. */
export function credentialMatches(presented: string, accepted: readonly string[]): boolean {
  const p = Buffer.from(presented);
  let ok = false;
  for (const a of accepted) {
    const b = Buffer.from(a);
    if (b.length === p.length && timingSafeEqual(b, p)) ok = true;
  }
  return ok;
}
