import { createHash } from 'node:crypto';

/** How a credential appears in logs: `[redacted:sha256:<first 8 hex>]` (AWP-AUD-006). */
export function redact(secret: string): string {
  return `[redacted:sha256:${createHash('sha256').update(secret).digest('hex').slice(0, 8)}]`;
}
