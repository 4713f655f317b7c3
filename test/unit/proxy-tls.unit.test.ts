import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import selfsigned from 'selfsigned';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { certificateNames, GENERATED, loadTls, publishedCaFile } from '../../proxy/tls.js';
import { ConfigError } from '../../src/config.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pgward-tls-unit-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const read = (name: keyof typeof GENERATED) => readFile(join(dir, GENERATED[name]), 'utf8');

async function generate(hosts: string[]): Promise<string[]> {
  const said: string[] = [];
  await loadTls({ dataDir: dir, hosts, onGenerated: (what) => said.push(what) });
  return said;
}

async function refusal(work: Promise<unknown>): Promise<ConfigError> {
  const error = await work.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(ConfigError);
  return error as ConfigError;
}

describe('the generated TLS material', () => {
  it('names the configured hosts and the loopback names, once each, leaving out wildcard listen addresses', () => {
    expect(certificateNames(['DB.example.com', '0.0.0.0'])).toEqual(['db.example.com', 'localhost', '127.0.0.1', '::1']);
    expect(certificateNames(['localhost', '10.1.2.3'])).toEqual(['localhost', '10.1.2.3', '127.0.0.1', '::1']);
  });

  it('is a CA and a certificate it signed for those names, the keys readable by the owner only', async () => {
    expect(await generate(['db.example.com', '10.1.2.3'])).toEqual([
      `generated the proxy's CA certificate ${join(dir, GENERATED.caCert)}: clients verify the proxy with it (GET /v1/proxy/ca.pem)`,
      `issued the proxy's certificate ${join(dir, GENERATED.cert)} for db.example.com, 10.1.2.3, localhost, 127.0.0.1, ::1`,
    ]);
    const ca = new X509Certificate(await read('caCert'));
    const cert = new X509Certificate(await read('cert'));
    expect(ca.ca).toBe(true);
    expect(cert.ca).toBe(false);
    expect(cert.checkIssued(ca) && cert.verify(ca.publicKey)).toBe(true);
    expect(cert.subjectAltName).toBe('DNS:db.example.com, IP Address:10.1.2.3, DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1');
    expect(Date.parse(cert.validFrom)).toBeLessThan(Date.now() - 30 * 60 * 1000);
    for (const key of [GENERATED.caKey, GENERATED.key]) expect((await stat(join(dir, key))).mode & 0o777).toBe(0o600);
    expect(await read('caCert')).toMatch(/^-----BEGIN CERTIFICATE-----\n[\s\S]+-----END CERTIFICATE-----\n$/);
  });

  it('is kept across starts, and the certificate alone is issued again when the names change', async () => {
    await generate(['db.example.com']);
    const [ca, cert] = [await read('caCert'), await read('cert')];
    expect(await generate(['db.example.com'])).toEqual([]);
    expect([await read('caCert'), await read('cert')]).toEqual([ca, cert]);
    expect(await generate(['db2.example.com'])).toEqual([`issued the proxy's certificate ${join(dir, GENERATED.cert)} for db2.example.com, localhost, 127.0.0.1, ::1`]);
    expect(await read('caCert')).toBe(ca);
    expect(new X509Certificate(await read('cert')).checkHost('db2.example.com')).toBe('db2.example.com');
  });

  it('replaces a self-signed certificate of an earlier version with one a new CA signs', async () => {
    const old = await selfsigned.generate([{ name: 'commonName', value: 'localhost' }], { keyType: 'ec', algorithm: 'sha256' });
    await writeFile(join(dir, GENERATED.cert), old.cert);
    await writeFile(join(dir, GENERATED.key), old.private);
    expect(await generate(['localhost'])).toHaveLength(2);
    expect(new X509Certificate(await read('cert')).checkIssued(new X509Certificate(await read('caCert')))).toBe(true);
  });
});

describe('the operator’s TLS files', () => {
  it('are refused at start naming the variable when unreadable or not what they should be', async () => {
    const missing = join(dir, 'nowhere.pem');
    expect((await refusal(loadTls({ certFile: missing, keyFile: missing, dataDir: dir, hosts: [] }))).message).toBe(`invalid configuration: PGWARD_TLS_CERT names a file that cannot be read: ${missing} (ENOENT)`);
    await generate(['localhost']);
    const [certFile, keyFile] = [join(dir, GENERATED.cert), join(dir, GENERATED.key)];
    await writeFile(join(dir, 'not-a-cert.pem'), 'hello');
    expect((await refusal(loadTls({ certFile, keyFile, caFile: join(dir, 'not-a-cert.pem'), dataDir: dir, hosts: [] }))).variable).toBe('PGWARD_TLS_CA');
    expect((await refusal(loadTls({ certFile, keyFile: join(dir, GENERATED.caKey), dataDir: dir, hosts: [] }))).variable).toBe('PGWARD_TLS_CERT');
    await expect(loadTls({ certFile, keyFile, caFile: join(dir, GENERATED.caCert), dataDir: dir, hosts: [] })).resolves.toBeDefined();
  });

  it('decide which CA the API publishes', () => {
    expect(publishedCaFile({ dataDir: '/data' })).toBe(join('/data', GENERATED.caCert));
    expect(publishedCaFile({ certFile: '/etc/proxy.pem', dataDir: '/data' })).toBeUndefined();
    expect(publishedCaFile({ certFile: '/etc/proxy.pem', caFile: '/etc/ca.pem', dataDir: '/data' })).toBe('/etc/ca.pem');
  });
});
