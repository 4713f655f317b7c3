/**
 * A custom domain's certificate served by SNI: psql with sslmode=verify-full and the domain as its
 * host (hostaddr on loopback) verifies the proxy with the domain's own CA; names without a
 * certificate get the proxy's default one. The API reports the certificate's end as tls_cert_expiry.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeDomainCertificate, type IssuedDomainCertificate } from '../support/domain-certs.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { missingTool } from '../support/tools.js';

const run = promisify(execFile);
const DOMAIN = 'db.customer.test';
let gateway: TestGateway;
let agent: AgentSecrets;
let certDir: string;
let issued: IssuedDomainCertificate;
let caFile: string;

const failure = (promise: Promise<unknown>): Promise<string> => promise.then(() => 'it connected', (error: { stderr?: string; message: string }) => `${error.stderr ?? ''} ${error.message}`);

beforeAll(async () => {
  certDir = await mkdtemp(join(tmpdir(), 'pgward-domain-tls-'));
  issued = await writeDomainCertificate(certDir, [DOMAIN]);
  caFile = join(certDir, 'domain-ca.pem');
  await writeFile(caFile, issued.ca);
  gateway = await startGateway('domain_tls', undefined, 60_000, { PGWARD_DOMAIN_CERT_DIR: certDir });
  agent = await gateway.register('tls');
});
afterAll(async () => {
  await gateway?.stop();
  if (certDir) await rm(certDir, { recursive: true, force: true });
});

function conninfo(host: string): string {
  const url = new URL(agent.connection_string);
  return `host=${host} hostaddr=127.0.0.1 port=${url.port} dbname=${url.pathname.slice(1)} user=${url.username} password=${url.password} sslmode=verify-full sslrootcert=${caFile}`;
}

async function peerCertificate(servername: string, ca: string): Promise<string> {
  const client = new pg.Client({ connectionString: agent.connection_string, ssl: { ca, servername } });
  await client.connect();
  const cert = (client as unknown as { connection: { stream: TLSSocket } }).connection.stream.getPeerX509Certificate()!;
  await client.end();
  return cert.subjectAltName ?? '';
}

describe('custom domain certificates by SNI', () => {
  it.skipIf(missingTool('psql'))('psql with sslmode=verify-full and the domain as host verifies the proxy with the domain’s CA; another name does not', async () => {
    const { stdout } = await run('psql', [conninfo(DOMAIN), '-Atc', 'select count(*) from orders']);
    expect(stdout.trim()).toBe('1000');
    // localhost has no certificate of its own: the proxy's default one, which the domain's CA did not sign.
    expect(await failure(run('psql', [conninfo('localhost'), '-Atc', 'select 1']))).toMatch(/certificate verify failed/);
  });

  it('node-postgres sees the domain’s certificate for its name and the default one for others', async () => {
    expect(await peerCertificate(DOMAIN, issued.ca)).toBe(`DNS:${DOMAIN}`);
    const served = (await gateway.api.app.inject({ method: 'GET', url: '/v1/proxy/ca.pem' })).body;
    expect(await peerCertificate('localhost', served)).toContain('DNS:localhost');
    // A name that is no host name never becomes a path in the certificate directory.
    expect(await failure(peerCertificate('../domain-ca.pem', issued.ca))).toMatch(/certificate|altnames|Hostname/i);
  });

  it('the API reports the certificate’s end as the domain’s tls_cert_expiry', async () => {
    const { api, owner, projectId } = gateway;
    const created = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/domains`, payload: { domain: DOMAIN } });
    expect(created.statusCode).toBe(201);
    expect((created.json() as { tls_cert_expiry: string | null }).tls_cert_expiry).toBe(issued.expiresAt);
  });
});
