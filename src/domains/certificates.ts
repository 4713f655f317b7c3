import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createSecureContext, type SecureContext } from 'node:tls';
import { hostnameProblem } from '../events/domains.js';

/** A custom domain's certificate as PGWARD_DOMAIN_CERT_DIR holds it: `<dir>/<domain>/cert.pem` and `key.pem`. */
export interface DomainCertificate {
  /** When the certificate stops being valid (ISO 8601). */
  readonly expiresAt: string;
  readonly context: SecureContext;
}

/** A TLS server's SNICallback. */
export type SniCallback = (servername: string, callback: (error: Error | null, context?: SecureContext) => void) => void;

/** How long the proxy reuses a read certificate (or its absence) before reading the directory again. */
export const REREAD_MS = 30_000;

/**
 * The certificates of custom domains, read from a directory the operator (or an ACME client)
 * keeps: one folder per host name. A certificate that does not name its host, or whose key does
 * not match, counts as absent. Reads are cached for `rereadMs` (the proxy: 30 s, so a renewed
 * certificate is served within that without a restart; the API: not at all).
 */
export class DomainCertificates {
  private readonly cache = new Map<string, { readonly at: number; readonly value: Promise<DomainCertificate | undefined> }>();

  constructor(
    private readonly dir: string,
    private readonly onError: (domain: string, error: Error) => void = () => undefined,
    private readonly rereadMs = REREAD_MS,
  ) {}

  /** The certificate of `domain` (any case), or undefined when none is configured or it is unusable. */
  get(domain: string): Promise<DomainCertificate | undefined> {
    const name = domain.toLowerCase();
    // Only a well-formed host name becomes a path: no `..`, no slashes.
    if (hostnameProblem(name) !== undefined) return Promise.resolve(undefined);
    const known = this.cache.get(name);
    if (known && Date.now() - known.at < this.rereadMs) return known.value;
    const value = this.read(name);
    this.cache.set(name, { at: Date.now(), value });
    return value;
  }

  private async read(domain: string): Promise<DomainCertificate | undefined> {
    let cert: Buffer;
    let key: Buffer;
    try {
      [cert, key] = await Promise.all([readFile(join(this.dir, domain, 'cert.pem')), readFile(join(this.dir, domain, 'key.pem'))]);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') this.onError(domain, error as Error);
      return undefined;
    }
    try {
      const leaf = new X509Certificate(cert);
      if (leaf.checkHost(domain, { subject: 'never' }) === undefined) throw new Error(`the certificate does not name ${domain}`);
      return { expiresAt: new Date(leaf.validTo).toISOString(), context: createSecureContext({ cert, key, minVersion: 'TLSv1.2' }) };
    } catch (error) {
      this.onError(domain, error as Error);
      return undefined;
    }
  }

  /** A TLS server's SNICallback: the domain's certificate when there is one, else the default (`undefined`). */
  readonly sniCallback: SniCallback = (servername, callback) => {
    this.get(servername).then(
      (found) => callback(null, found?.context),
      () => callback(null, undefined),
    );
  };
}
