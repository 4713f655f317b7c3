import { X509Certificate } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import selfsigned from 'selfsigned';

export interface IssuedDomainCertificate {
  /** The CA that signed it, for clients to verify with. */
  readonly ca: string;
  readonly cert: string;
  /** When the certificate ends, as the API reports it. */
  readonly expiresAt: string;
}

/** A CA of its own signs a certificate for `names` (the first is the folder), written where PGWARD_DOMAIN_CERT_DIR looks: `<dir>/<names[0]>/cert.pem` and `key.pem`. */
export async function writeDomainCertificate(dir: string, names: readonly string[], days = 90): Promise<IssuedDomainCertificate> {
  const now = Date.now();
  const ca = await selfsigned.generate([{ name: 'commonName', value: `test domain CA ${names[0]}` }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: new Date(now - 3_600_000),
    notAfterDate: new Date(now + 3_650 * 86_400_000),
    extensions: [{ name: 'basicConstraints', cA: true, critical: true }, { name: 'keyUsage', keyCertSign: true, critical: true }],
  });
  const leaf = await selfsigned.generate([{ name: 'commonName', value: names[0]! }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: new Date(now - 3_600_000),
    notAfterDate: new Date(now + days * 86_400_000),
    ca: { cert: ca.cert, key: ca.private },
    extensions: [
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: names.map((value) => ({ type: 2 as const, value })) },
    ],
  });
  await mkdir(join(dir, names[0]!), { recursive: true });
  await writeFile(join(dir, names[0]!, 'cert.pem'), leaf.cert);
  await writeFile(join(dir, names[0]!, 'key.pem'), leaf.private, { mode: 0o600 });
  return { ca: ca.cert, cert: leaf.cert, expiresAt: new Date(new X509Certificate(leaf.cert).validTo).toISOString() };
}
