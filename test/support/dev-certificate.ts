/**
 * A self-signed ECDSA P-256 certificate for WebTransport and TLS tests. Clients pin it by its SHA-256 hash
 * (`serverCertificateHashes`), which the WebTransport rules accept only for a certificate valid for 14 days or
 * less. Node 20 has no X.509 generation API: the certificate's structure is encoded with @peculiar/asn1-x509
 * (synchronously, unlike WebCrypto-based generators, so tests can build one at module load) and signed with
 * node:crypto.
 */
import { createHash, generateKeyPairSync, randomBytes, sign, X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { AsnConvert, OctetString } from '@peculiar/asn1-schema';
import {
  AlgorithmIdentifier,
  AttributeTypeAndValue,
  AttributeValue,
  BasicConstraints,
  Certificate,
  ExtendedKeyUsage,
  Extension,
  Extensions,
  GeneralName,
  KeyUsage,
  KeyUsageFlags,
  Name,
  RelativeDistinguishedName,
  SubjectAlternativeName,
  SubjectPublicKeyInfo,
  TBSCertificate,
  Time,
  Validity,
  Version,
  id_ce_basicConstraints,
  id_ce_extKeyUsage,
  id_ce_keyUsage,
  id_ce_subjectAltName,
  id_kp_serverAuth,
} from '@peculiar/asn1-x509';

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
  const name = new Name([
    new RelativeDistinguishedName([
      new AttributeTypeAndValue({
        type: OID_COMMON_NAME,
        value: new AttributeValue({ utf8String: hosts[0]! }),
      }),
    ]),
  ]);
  const algorithm = new AlgorithmIdentifier({ algorithm: OID_ECDSA_WITH_SHA256 });
  const serial = randomBytes(16);
  serial[0] = (serial[0]! & 0x3f) | 0x40; // positive (RFC 5280 4.1.2.2), and no leading zero byte to strip
  const tbs = new TBSCertificate({
    version: Version.v3,
    serialNumber: toArrayBuffer(serial),
    signature: algorithm,
    issuer: name,
    validity: new Validity({ notBefore, notAfter }),
    subject: name,
    subjectPublicKeyInfo: AsnConvert.parse(spki, SubjectPublicKeyInfo),
    extensions: extensions(hosts),
  });
  tbs.validity.notBefore = time(notBefore);
  tbs.validity.notAfter = time(notAfter);
  const tbsDer = Buffer.from(AsnConvert.serialize(tbs));
  const signature = sign('sha256', tbsDer, privateKey); // DER ECDSA-Sig-Value, as X.509 wants
  const der = Buffer.from(
    AsnConvert.serialize(
      new Certificate({
        tbsCertificate: tbs,
        signatureAlgorithm: algorithm,
        signatureValue: toArrayBuffer(signature),
      }),
    ),
  );
  const cert = `-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/.{1,64}/g, '$&\n')}-----END CERTIFICATE-----\n`;
  const x509 = new X509Certificate(cert);
  // The certificate re-encodes the TBS part; a signature over other bytes would not verify.
  if (!x509.verify(publicKey)) throw new Error('generated certificate does not verify');
  return {
    cert,
    key: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    hash: createHash('sha256').update(der).digest(),
    fingerprint: x509.fingerprint256,
    notBefore,
    notAfter,
  };
}

/**
 * A fresh loopback certificate written to `dir` (cert.pem, and key.pem readable by the owner only), with
 * the edge's `webtransport` config section that serves it on `listen`.
 */
export function webtransportSection(
  dir: string,
  listen = '127.0.0.1:0',
): { cert: DevCertificate; section: { listen: string; cert_file: string; key_file: string } } {
  const cert = createDevCertificate({ hosts: ['127.0.0.1', 'localhost'] });
  const cert_file = join(dir, 'cert.pem');
  const key_file = join(dir, 'key.pem');
  writeFileSync(cert_file, cert.cert);
  writeFileSync(key_file, cert.key, { mode: 0o600 });
  return { cert, section: { listen, cert_file, key_file } };
}

/** The SHA-256 of a PEM certificate's DER bytes (what a client pins). */
export function certificateHash(pem: string): Buffer {
  return createHash('sha256').update(new X509Certificate(pem).raw).digest();
}

function extensions(hosts: readonly string[]): Extensions {
  const altNames = hosts.map((h) =>
    isIP(h) === 0 ? new GeneralName({ dNSName: h }) : new GeneralName({ iPAddress: h }),
  );
  return new Extensions([
    extension(id_ce_basicConstraints, true, new BasicConstraints()),
    extension(id_ce_keyUsage, true, new KeyUsage(KeyUsageFlags.digitalSignature)),
    extension(id_ce_extKeyUsage, false, new ExtendedKeyUsage([id_kp_serverAuth])),
    extension(id_ce_subjectAltName, false, new SubjectAlternativeName(altNames)),
  ]);
}

function extension(id: string, critical: boolean, value: object): Extension {
  return new Extension({ extnID: id, critical, extnValue: new OctetString(AsnConvert.serialize(value)) });
}

/** UTCTime before 2050, GeneralizedTime from 2050 (RFC 5280 4.1.2.5). */
function time(d: Date): Time {
  return d.getUTCFullYear() < 2050 ? new Time({ utcTime: d }) : new Time({ generalTime: d });
}

function toArrayBuffer(b: Buffer): ArrayBuffer {
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
}
