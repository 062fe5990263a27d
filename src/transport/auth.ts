import { createHash } from 'node:crypto';

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

/**
 * Accepted credentials held as SHA-256 digests, one set per list (config lists are replaced, never
 * changed, when credentials rotate). A presented credential costs one digest and one lookup however many
 * are accepted: walking the list copied every entry per check, and a URL's segments are each checked
 * (upgrade-decision.ts). The lookup's timing says nothing useful about a credential: nobody can choose
 * the bytes of a digest they are after.
 */
const digests = new WeakMap<readonly string[], Set<string>>();

/**
 * A credential's SHA-256 digest in hex: what it is checked against lists by (digestAccepted) and keyed
 * by (budgets), computed once per presented credential.
 */
export function credentialDigest(credential: string): string {
  return createHash('sha256').update(credential).digest('hex');
}

/** Whether the credential of `presentedDigest` (credentialDigest) is one of `accepted`. */
export function digestAccepted(presentedDigest: string, accepted: readonly string[]): boolean {
  let set = digests.get(accepted);
  if (set === undefined) digests.set(accepted, (set = new Set(accepted.map(credentialDigest))));
  return set.has(presentedDigest);
}

/** Whether `presented` is one of `accepted`. */
export function credentialMatches(presented: string, accepted: readonly string[]): boolean {
  return digestAccepted(credentialDigest(presented), accepted);
}
