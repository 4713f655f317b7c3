import { randomBytes, X509Certificate } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { createSecureContext, type SecureContext } from 'node:tls';
import selfsigned from 'selfsigned';
import { ConfigError, readConfiguredFile } from '../src/config.js';

const DAY_MS = 24 * 3600 * 1000;
const CA_DAYS = 3650;
const CERT_DAYS = 825;
/** A generated certificate this close to its end is issued again at start. */
const RENEW_BEFORE_DAYS = 30;
/** Valid from a little before now: a client whose clock runs behind must not find a certificate not yet valid. */
const BACKDATE_MS = 3600 * 1000;

/** Where the generated material lives in the data directory. */
export const GENERATED = { caCert: 'proxy-ca.pem', caKey: 'proxy-ca-key.pem', cert: 'proxy-cert.pem', key: 'proxy-key.pem' } as const;

export interface TlsOptions {
  /** PGWARD_TLS_CERT and PGWARD_TLS_KEY: the operator's certificate (chain) and key; else generated. */
  readonly certFile?: string | undefined;
  readonly keyFile?: string | undefined;
  /** PGWARD_TLS_CA: the CA certificate clients verify the operator's certificate with. */
  readonly caFile?: string | undefined;
  readonly dataDir: string;
  /** The names clients connect with (PGWARD_PUBLIC_HOST, PGWARD_LISTEN_HOST): the generated certificate carries them and the loopback names. */
  readonly hosts: readonly string[];
  /** Told what was generated, for the log. */
  readonly onGenerated?: (what: string) => void;
}

/** The names a generated certificate carries: the configured hosts (wildcard listen addresses aside), localhost, 127.0.0.1 and ::1. */
export function certificateNames(hosts: readonly string[]): string[] {
  const wanted = [...hosts.filter((host) => host !== '0.0.0.0' && host !== '::'), 'localhost', '127.0.0.1', '::1'];
  return [...new Set(wanted.map((name) => name.toLowerCase()))];
}

/**
 * The file of the CA certificate clients verify the proxy with (GET /v1/proxy/ca.pem): PGWARD_TLS_CA,
 * else the generated CA; undefined when the operator's certificate comes without PGWARD_TLS_CA.
 */
export function publishedCaFile(options: Pick<TlsOptions, 'certFile' | 'caFile' | 'dataDir'>): string | undefined {
  if (options.caFile) return options.caFile;
  return options.certFile ? undefined : join(options.dataDir, GENERATED.caCert);
}

function secureContext(cert: Buffer | string, key: Buffer | string): SecureContext {
  return createSecureContext({ cert, key, minVersion: 'TLSv1.2' });
}

/**
 * The proxy's TLS context. The operator's PGWARD_TLS_CERT/PGWARD_TLS_KEY when set; else a CA made
 * once in the data directory (its key mode 0600) signs the proxy's certificate, which is issued
 * again whenever it does not carry every name of `hosts`, is not the CA's, or nears its end, so
 * clients verify it with sslmode=verify-full and the CA as their root (docs/proxy.md#tls).
 */
export async function loadTls(options: TlsOptions): Promise<SecureContext> {
  if (options.certFile && options.keyFile) {
    const [cert, key] = [await readConfiguredFile('PGWARD_TLS_CERT', options.certFile), await readConfiguredFile('PGWARD_TLS_KEY', options.keyFile)];
    if (options.caFile) {
      const ca = await readConfiguredFile('PGWARD_TLS_CA', options.caFile);
      try {
        new X509Certificate(ca);
      } catch (error) {
        throw new ConfigError('PGWARD_TLS_CA', `is not a PEM certificate (${(error as Error).message})`);
      }
    }
    try {
      return secureContext(cert, key);
    } catch (error) {
      throw new ConfigError('PGWARD_TLS_CERT', `and PGWARD_TLS_KEY do not make a usable certificate and key (${(error as Error).message})`);
    }
  }
  const generated = await ensureGenerated(options.dataDir, certificateNames(options.hosts), options.onGenerated ?? (() => undefined));
  return secureContext(generated.cert, generated.key);
}

interface Pair {
  readonly cert: string;
  readonly key: string;
}

async function readPair(certFile: string, keyFile: string): Promise<Pair | undefined> {
  try {
    return { cert: await readFile(certFile, 'utf8'), key: await readFile(keyFile, 'utf8') };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** PEM as files hold it: ending in a newline, so that concatenating them makes a bundle. */
const pemFile = (pem: string): string => (pem.endsWith('\n') ? pem : `${pem}\n`);

async function writePair(certFile: string, keyFile: string, pair: Pair): Promise<void> {
  await writeFile(keyFile, pemFile(pair.key), { mode: 0o600 });
  await writeFile(certFile, pemFile(pair.cert), { mode: 0o644 });
}

const lastsPast = (certificate: X509Certificate, days: number): boolean => Date.parse(certificate.validTo) > Date.now() + days * DAY_MS;

/** Whether `cert` is the CA's, carries every name, and is not near its end. */
function certificateFits(cert: string, ca: string, names: readonly string[]): boolean {
  const leaf = new X509Certificate(cert);
  const authority = new X509Certificate(ca);
  if (!leaf.checkIssued(authority) || !leaf.verify(authority.publicKey) || !lastsPast(leaf, RENEW_BEFORE_DAYS)) return false;
  return names.every((name) => (isIP(name) ? leaf.checkIP(name) !== undefined : leaf.checkHost(name, { subject: 'never' }) !== undefined));
}

async function ensureGenerated(dataDir: string, names: readonly string[], onGenerated: (what: string) => void): Promise<Pair> {
  await mkdir(dataDir, { recursive: true });
  const file = (name: keyof typeof GENERATED) => join(dataDir, GENERATED[name]);
  let ca = await readPair(file('caCert'), file('caKey'));
  if (!ca || !lastsPast(new X509Certificate(ca.cert), RENEW_BEFORE_DAYS)) {
    ca = await generateCa();
    await writePair(file('caCert'), file('caKey'), ca);
    onGenerated(`generated the proxy's CA certificate ${file('caCert')}: clients verify the proxy with it (GET /v1/proxy/ca.pem)`);
  }
  const current = await readPair(file('cert'), file('key'));
  if (current && certificateFits(current.cert, ca.cert, names)) return current;
  const issued = await issueCertificate(ca, names);
  await writePair(file('cert'), file('key'), issued);
  onGenerated(`issued the proxy's certificate ${file('cert')} for ${names.join(', ')}`);
  return issued;
}

async function generateCa(): Promise<Pair> {
  // A name of its own: trust stores look CAs up by subject, and two installations' CAs must not collide.
  const pems = await selfsigned.generate([{ name: 'commonName', value: `pgward proxy CA ${randomBytes(6).toString('hex')}` }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: new Date(Date.now() - BACKDATE_MS),
    notAfterDate: new Date(Date.now() + CA_DAYS * DAY_MS),
    extensions: [
      { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}

async function issueCertificate(ca: Pair, names: readonly string[]): Promise<Pair> {
  const pems = await selfsigned.generate([{ name: 'commonName', value: names[0]! }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: new Date(Date.now() - BACKDATE_MS),
    notAfterDate: new Date(Date.now() + CERT_DAYS * DAY_MS),
    ca,
    extensions: [
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: names.map((name) => (isIP(name) ? { type: 7 as const, ip: name } : { type: 2 as const, value: name })) },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}
