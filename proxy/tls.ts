import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createSecureContext, type SecureContext } from 'node:tls';
import selfsigned from 'selfsigned';
import { ConfigError, readConfiguredFile } from '../src/config.js';

/**
 * The proxy's TLS material: PGWARD_TLS_CERT and PGWARD_TLS_KEY (PEM files) when set, else a
 * self-signed pair generated once into the data directory (key mode 0600), `onGenerated` told. A
 * generated pair is safe wherever it runs: it proves nothing to a client that verifies, and each
 * proxy may have its own.
 */
export async function loadTls(options: { certFile?: string; keyFile?: string; dataDir: string; host: string; onGenerated?: (certFile: string) => void }): Promise<SecureContext> {
  if (options.certFile && options.keyFile) {
    const cert = await readConfiguredFile('PGWARD_TLS_CERT', options.certFile);
    const key = await readConfiguredFile('PGWARD_TLS_KEY', options.keyFile);
    try {
      return createSecureContext({ cert, key, minVersion: 'TLSv1.2' });
    } catch (error) {
      throw new ConfigError('PGWARD_TLS_CERT', `and PGWARD_TLS_KEY are not a PEM certificate and its private key: ${(error as Error).message}`);
    }
  }
  const certFile = join(options.dataDir, 'proxy-cert.pem');
  const keyFile = join(options.dataDir, 'proxy-key.pem');
  if (!existsSync(certFile) || !existsSync(keyFile)) {
    const pems = await selfsigned.generate([{ name: 'commonName', value: options.host }], {
      keyType: 'ec',
      curve: 'P-256',
      algorithm: 'sha256',
      notAfterDate: new Date(Date.now() + 825 * 24 * 3600 * 1000),
      extensions: [{ name: 'subjectAltName', altNames: [{ type: 2, value: options.host }, { type: 2, value: 'localhost' }, { type: 7, ip: '127.0.0.1' }] }],
    });
    await mkdir(options.dataDir, { recursive: true });
    await writeFile(keyFile, pems.private, { mode: 0o600 });
    await writeFile(certFile, pems.cert, { mode: 0o644 });
    options.onGenerated?.(certFile);
  }
  return createSecureContext({ cert: await readFile(certFile), key: await readFile(keyFile), minVersion: 'TLSv1.2' });
}
