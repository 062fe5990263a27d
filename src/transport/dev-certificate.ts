/**
 * A self-signed ECDSA P-256 certificate for WebTransport in development and tests. Clients pin it by
 * its SHA-256 hash (`serverCertificateHashes`), which the WebTransport rules accept only for a
 * certificate valid for 14 days or less. Node 20 has no X.509 generation API, so the certificate is
 * assembled here with a minimal DER writer and signed with node:crypto; no third-party package.
 */
import { createHash, generateKeyPairSync, randomBytes, sign, X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';

export interface DevCertificate {
  /** PEM certificate. */
  readonly cert: string;
  /** PEM private key (PKCS#8). */
  readonly key: string;
  /** SHA-256 of the DER certificate: the `serverCertificateHashes` value a client pins. */
  readonly hash: Buffer;
  /** The same hash as colon-separated upper-case hex (as `X509Certificate.fingerprint256`). */
  readonly fingerprint: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
}

export interface DevCertificateOptions {
  /** Names and addresses the certificate is for (subjectAltName); the first is also the CN. */
  readonly hosts?: readonly string[];
  /** Validity in days; at most 14 (the limit for hash-pinned WebTransport certificates). Default 10. */
  readonly days?: number;
  /** Start of validity; default one minute ago (tolerates small clock skew). */
  readonly notBefore?: Date;
}

const MAX_DAYS = 14;
const DAY_MS = 86_400_000;

const OID_ECDSA_WITH_SHA256 = '1.2.840.10045.4.3.2';
const OID_COMMON_NAME = '2.5.4.3';
const OID_SUBJECT_ALT_NAME = '2.5.29.17';
const OID_KEY_USAGE = '2.5.29.15';
const OID_BASIC_CONSTRAINTS = '2.5.29.19';
const OID_EXT_KEY_USAGE = '2.5.29.37';
const OID_SERVER_AUTH = '1.3.6.1.5.5.7.3.1';

export function createDevCertificate(options: DevCertificateOptions = {}): DevCertificate {
  const hosts = options.hosts ?? ['localhost', '127.0.0.1', '::1'];
  if (hosts.length === 0) throw new RangeError('a certificate needs at least one host');
  const days = options.days ?? 10;
  // The whole validity span counts, so the 14-day bound includes the backdating.
  const notBefore = options.notBefore ?? new Date(Date.now() - 60_000);
  const notAfter = new Date(notBefore.getTime() + days * DAY_MS);
  if (!(days > 0) || notAfter.getTime() - notBefore.getTime() > MAX_DAYS * DAY_MS) {
    throw new RangeError(`a hash-pinned WebTransport certificate is valid for at most ${MAX_DAYS} days`);
  }
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const name = seq(set(seq(oid(OID_COMMON_NAME), utf8(hosts[0]!))));
  const algorithm = seq(oid(OID_ECDSA_WITH_SHA256));
  const serial = randomBytes(16);
  serial[0] = serial[0]! & 0x7f; // positive (RFC 5280 4.1.2.2)
  const tbs = seq(
    explicit(0, integer(Buffer.from([2]))), // v3
    integer(serial),
    algorithm,
    name,
    seq(time(notBefore), time(notAfter)),
    name,
    spki,
    explicit(3, seq(...extensions(hosts))),
  );
  const signature = sign('sha256', tbs, privateKey); // DER ECDSA-Sig-Value, as X.509 wants
  const der = seq(tbs, algorithm, bitString(signature));
  const cert = `-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/.{1,64}/g, '$&\n')}-----END CERTIFICATE-----\n`;
  const x509 = new X509Certificate(cert);
  if (!x509.verify(publicKey)) throw new Error('generated certificate does not verify'); // a DER bug, never expected
  return {
    cert,
    key: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    hash: createHash('sha256').update(der).digest(),
    fingerprint: x509.fingerprint256,
    notBefore,
    notAfter,
  };
}

/** The SHA-256 of a PEM certificate's DER bytes (what a client pins). */
export function certificateHash(pem: string): Buffer {
  return createHash('sha256').update(new X509Certificate(pem).raw).digest();
}

function extensions(hosts: readonly string[]): Buffer[] {
  const altNames = hosts.map((h) => {
    const family = isIP(h);
    if (family === 4) return tagged(0x87, Buffer.from(h.split('.').map(Number)));
    if (family === 6) return tagged(0x87, ipv6Bytes(h));
    return tagged(0x82, Buffer.from(h, 'ascii')); // dNSName
  });
  return [
    extension(OID_BASIC_CONSTRAINTS, true, seq()),
    extension(OID_KEY_USAGE, true, Buffer.from([0x03, 0x02, 0x07, 0x80])), // digitalSignature
    extension(OID_EXT_KEY_USAGE, false, seq(oid(OID_SERVER_AUTH))),
    extension(OID_SUBJECT_ALT_NAME, false, seq(...altNames)),
  ];
}

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return seq(oid(id), ...(critical ? [Buffer.from([0x01, 0x01, 0xff])] : []), tagged(0x04, value));
}

function ipv6Bytes(address: string): Buffer {
  const [head = '', tail = ''] = address.split('::');
  const parts = (s: string) => (s === '' ? [] : s.split(':').map((p) => parseInt(p, 16)));
  const h = parts(head);
  const t = address.includes('::') ? parts(tail) : [];
  const groups = [...h, ...new Array<number>(8 - h.length - t.length).fill(0), ...t];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(g, i * 2));
  return out;
}

// ---------------------------------------------------------------- minimal DER writer

function tagged(tag: number, body: Buffer): Buffer {
  const n = body.length;
  let len: Buffer;
  if (n < 0x80) len = Buffer.from([n]);
  else {
    const bytes: number[] = [];
    for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
    len = Buffer.from([0x80 | bytes.length, ...bytes]);
  }
  return Buffer.concat([Buffer.from([tag]), len, body]);
}

function seq(...items: Buffer[]): Buffer {
  return tagged(0x30, Buffer.concat(items));
}

function set(...items: Buffer[]): Buffer {
  return tagged(0x31, Buffer.concat(items));
}

function explicit(n: number, inner: Buffer): Buffer {
  return tagged(0xa0 | n, inner);
}

function integer(unsigned: Buffer): Buffer {
  let i = 0;
  while (i < unsigned.length - 1 && unsigned[i] === 0) i++;
  const v = unsigned.subarray(i);
  return tagged(0x02, v[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), v]) : v);
}

function bitString(bytes: Buffer): Buffer {
  return tagged(0x03, Buffer.concat([Buffer.from([0]), bytes]));
}

function utf8(s: string): Buffer {
  return tagged(0x0c, Buffer.from(s, 'utf8'));
}

function oid(dotted: string): Buffer {
  const arcs = dotted.split('.').map(Number);
  const out = [40 * arcs[0]! + arcs[1]!];
  for (const arc of arcs.slice(2)) {
    const bytes = [arc & 0x7f];
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) bytes.unshift((v & 0x7f) | 0x80);
    out.push(...bytes);
  }
  return tagged(0x06, Buffer.from(out));
}

/** UTCTime before 2050, GeneralizedTime from 2050 (RFC 5280 4.1.2.5). */
function time(d: Date): Buffer {
  const iso = d.toISOString(); // YYYY-MM-DDTHH:MM:SS.sssZ
  const digits = iso.slice(0, 19).replace(/[-:T]/g, '');
  return d.getUTCFullYear() < 2050
    ? tagged(0x17, Buffer.from(`${digits.slice(2)}Z`))
    : tagged(0x18, Buffer.from(`${digits}Z`));
}
