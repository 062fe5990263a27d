/** A certificate and its key, read and matched when the config is loaded, so a bad pair fails at start. */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Problems } from './problems.js';

/** A certificate and its key: the file names, and their PEM contents read when the config was loaded. */
export interface TlsConfig {
  readonly cert_file: string;
  readonly key_file: string;
  readonly cert: string;
  readonly key: string;
}

/** Reads `<prefix>.cert_file` and `<prefix>.key_file` (both present: the schema requires them). */
export function certificatePair(
  p: Problems,
  files: { readonly cert_file: string; readonly key_file: string },
  prefix: string,
): TlsConfig | undefined {
  const DEFERRED = Symbol('deferred');
  const read = (k: 'cert_file' | 'key_file'): string | typeof DEFERRED | undefined => {
    try {
      return readFileSync(files[k], 'utf8');
    } catch (err) {
      return p.absent(`${prefix}.${k}`, `cannot read ${files[k]}: ${(err as Error).message}`)
        ? DEFERRED
        : undefined;
    }
  };
  const cert = read('cert_file');
  const key = read('key_file');
  // Checked without the files (check-config): the pair is matched at start instead.
  if (cert === DEFERRED || key === DEFERRED) {
    const text = (v: string | undefined | typeof DEFERRED) => (typeof v === 'string' ? v : '');
    return { cert_file: files.cert_file, key_file: files.key_file, cert: text(cert), key: text(key) };
  }
  if (cert === undefined || key === undefined) return undefined;
  try {
    if (!new X509Certificate(cert).checkPrivateKey(createPrivateKey(key))) {
      p.fail(`${prefix}.key_file`, 'the private key does not match the certificate');
      return undefined;
    }
  } catch (err) {
    p.fail(`${prefix}.cert_file`, `not a PEM certificate and private key: ${(err as Error).message}`);
    return undefined;
  }
  return { cert_file: files.cert_file, key_file: files.key_file, cert, key };
}
