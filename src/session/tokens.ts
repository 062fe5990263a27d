import { randomBytes } from 'node:crypto';

const EPOCH_BYTES = 6;
const SECRET_BYTES = 32;
/** A minted token's length: unpadded base64url of the epoch and the secret. */
const TOKEN_CHARS = Math.ceil(((EPOCH_BYTES + SECRET_BYTES) * 4) / 3);

/**
 * Mints agent-facing session tokens: 256 unguessable bits, unpadded base64url (AWP-SEC-003/005),
 * prefixed by the session store's epoch. A token from another epoch names a session this edge can no
 * longer hold (a restart of a memory store): AWP_SESSION_UNKNOWN, not AWP_SESSION_EXPIRED (AWP-SES-008).
 */
export class TokenMint {
  private epoch: Buffer;

  constructor(epoch: Buffer = randomBytes(EPOCH_BYTES)) {
    if (epoch.length !== EPOCH_BYTES) throw new Error(`token epoch must be ${EPOCH_BYTES} bytes`);
    this.epoch = epoch;
  }

  /** Adopts the shared store's epoch, so every replica mints and recognises the same tokens. */
  setEpoch(epoch: Buffer): void {
    if (epoch.length !== EPOCH_BYTES) throw new Error(`token epoch must be ${EPOCH_BYTES} bytes`);
    this.epoch = epoch;
  }

  mint(): string {
    return Buffer.concat([this.epoch, randomBytes(SECRET_BYTES)]).toString('base64url');
  }

  owns(token: string): boolean {
    if (token.length !== TOKEN_CHARS) return false; // before decoding what may be megabytes
    const raw = Buffer.from(token, 'base64url');
    return raw.length === EPOCH_BYTES + SECRET_BYTES && raw.subarray(0, EPOCH_BYTES).equals(this.epoch);
  }
}
