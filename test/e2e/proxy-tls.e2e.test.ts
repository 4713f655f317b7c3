/**
 * TLS with every driver (docs/proxy.md#tls): the CA that GET /v1/proxy/ca.pem serves verifies the
 * proxy's certificate, host name included, and each code block of that section runs as it stands
 * (placeholders replaced) with real clients: it connects with the served CA and fails with another.
 */
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { promisify } from 'node:util';
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GENERATED, loadTls } from '../../proxy/tls.js';
import { listenForAgents } from '../support/agent-mcp.js';
import { startGateway, type AgentSecrets, type TestGateway } from '../support/gateway.js';
import { missingTool } from '../support/tools.js';

const run = promisify(execFile);
const JDBC_JAR = '/usr/share/java/postgresql.jar';

interface Block {
  readonly title: string;
  readonly lang: 'sh' | 'python' | 'js' | 'java';
  readonly code: string;
  /** Why it cannot run on this machine, when it cannot. */
  readonly missing: string | undefined;
}

function documentedBlocks(): Block[] {
  const docs = readFileSync('docs/proxy.md', 'utf8');
  const start = docs.indexOf('\n## TLS\n');
  const section = docs.slice(start, docs.indexOf('\n## ', start + 1));
  return [...section.matchAll(/```(sh|python|js|java)\n([\s\S]*?)```/g)].map(([, lang, code]) => {
    const driver = /curl/.test(code!)
      ? { title: 'curl (fetching the CA)', missing: missingTool('curl') }
      : /psql/.test(code!)
        ? { title: 'psql', missing: missingTool('psql') }
        : /import psycopg2/.test(code!)
          ? { title: 'psycopg2', missing: missingTool('/usr/bin/python3', ['-c', 'import psycopg2']) }
          : /import psycopg/.test(code!)
            ? { title: 'psycopg 3', missing: missingTool('/usr/bin/python3', ['-c', 'import psycopg']) }
            : /from 'postgres'/.test(code!)
              ? { title: 'postgres.js', missing: undefined }
              : /from 'pg'/.test(code!)
                ? { title: `node-postgres (${/sslrootcert/.test(code!) ? 'connection string' : 'ssl.ca'})`, missing: undefined }
                : { title: 'JDBC', missing: missingTool('java', ['-version']) ?? (existsSync(JDBC_JAR) ? undefined : `${JDBC_JAR} (Debian libpostgresql-jdbc-java) is not installed`) };
    return { lang: lang as Block['lang'], code: code!, ...driver };
  });
}

const blocks = documentedBlocks();
const fetchBlock = blocks.find((block) => block.title.startsWith('curl'));
const connectBlocks = blocks.filter((block) => block !== fetchBlock);

let gateway: TestGateway;
let agent: AgentSecrets;
let apiUrl: string;
let servedCa: string;
let otherCa: string;
let work: string;

/** The block with its placeholders replaced by this gateway's addresses and the agent's credential. */
function filledIn(code: string): string {
  const url = new URL(agent.connection_string);
  return code
    .replaceAll('AGENT_USER', url.username)
    .replaceAll('AGENT_PASSWORD', url.password)
    .replaceAll('DATABASE_NAME', url.pathname.slice(1))
    .replaceAll('localhost:6432', `localhost:${url.port}`)
    .replaceAll('http://localhost:8080', apiUrl);
}

/** Runs a block in `work`, where pgward-ca.pem is `ca`. */
async function runBlock(block: Block, ca: string): Promise<{ stdout: string; stderr: string }> {
  await writeFile(join(work, 'pgward-ca.pem'), ca);
  const code = filledIn(block.code);
  const options = { cwd: work, timeout: 60_000 };
  switch (block.lang) {
    case 'sh':
      return run('bash', ['-euo', 'pipefail', '-c', code], options);
    case 'python':
      return run('/usr/bin/python3', ['-c', code], options);
    case 'js':
      await writeFile(join(work, 'connect.mjs'), code);
      return run(process.execPath, ['connect.mjs'], options);
    case 'java':
      await writeFile(join(work, 'Connect.java'), code);
      // C1 only: the JVM starts sooner, which is all this short program needs.
      return run('java', ['-XX:TieredStopAtLevel=1', '-cp', JDBC_JAR, 'Connect.java'], options);
  }
}

const failure = (promise: Promise<unknown>): Promise<string> =>
  promise.then(
    () => 'it connected',
    (error: { stderr?: string; message: string }) => `${error.stderr ?? ''} ${error.message}`,
  );

beforeAll(async () => {
  gateway = await startGateway('proxy_tls');
  agent = await gateway.register('tls');
  apiUrl = await listenForAgents(gateway);
  const served = await gateway.api.app.inject({ method: 'GET', url: '/v1/proxy/ca.pem' });
  servedCa = served.body;
  // An unrelated pgward installation's CA: trusting it must not verify this proxy.
  const elsewhere = await mkdtemp(join(tmpdir(), 'pgward-other-ca-'));
  await loadTls({ dataDir: elsewhere, hosts: ['127.0.0.1'] });
  otherCa = await readFile(join(elsewhere, GENERATED.caCert), 'utf8');
  await rm(elsewhere, { recursive: true, force: true });
  // The JavaScript blocks import pg and postgres: they resolve from the repository's node_modules.
  work = await mkdtemp(join(tmpdir(), 'pgward-tls-docs-'));
  await symlink(resolve('node_modules'), join(work, 'node_modules'));
});
afterAll(async () => {
  await gateway?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('GET /v1/proxy/ca.pem', () => {
  it('serves the CA certificate that signed the proxy’s, without authentication and without any key', async () => {
    const response = await gateway.api.app.inject({ method: 'GET', url: '/v1/proxy/ca.pem' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toBe('application/x-pem-file');
    expect(response.body).toMatch(/^-----BEGIN CERTIFICATE-----\n[A-Za-z0-9+/=\n]+-----END CERTIFICATE-----\n$/);
    const ca = new X509Certificate(response.body);
    expect(ca.ca).toBe(true);
    expect(ca.subject).toBe(ca.issuer);
    const client = new pg.Client({ connectionString: agent.connection_string, ssl: { ca: response.body } });
    await client.connect();
    const proxyCert = (client as unknown as { connection: { stream: TLSSocket } }).connection.stream.getPeerX509Certificate()!;
    await client.end();
    expect(proxyCert.ca).toBe(false);
    expect(proxyCert.checkIssued(ca) && proxyCert.verify(ca.publicKey)).toBe(true);
    expect(proxyCert.subjectAltName).toBe('IP Address:127.0.0.1, DNS:localhost, IP Address:0:0:0:0:0:0:0:1');
  });
});

describe('the documented TLS examples (docs/proxy.md#tls)', () => {
  it('cover each driver the docs name', () => {
    expect(blocks.map((block) => block.title)).toEqual([
      'curl (fetching the CA)',
      'psql',
      'psycopg2',
      'psycopg 3',
      'node-postgres (ssl.ca)',
      'node-postgres (connection string)',
      'postgres.js',
      'JDBC',
    ]);
  });

  it.skipIf(fetchBlock?.missing)(`curl fetches the CA the API serves${fetchBlock?.missing ? ` (skipped: ${fetchBlock.missing})` : ''}`, async () => {
    await runBlock(fetchBlock!, '');
    expect(await readFile(join(work, 'pgward-ca.pem'), 'utf8')).toBe(servedCa);
  });

  for (const block of connectBlocks) {
    it.skipIf(block.missing)(`${block.title}: connects with the served CA and refuses another CA${block.missing ? ` (skipped: ${block.missing})` : ''}`, async () => {
      const { stdout } = await runBlock(block, servedCa);
      expect(stdout.trim()).toBe(block.lang === 'python' ? '1 TLS: True' : '1');
      expect(await failure(runBlock(block, otherCa))).toMatch(/certificat/i);
    }, 90_000);
  }
});

describe('verification beyond the documented examples', () => {
  it('node-postgres checks the host name against the certificate’s names', async () => {
    const client = new pg.Client({ connectionString: agent.connection_string, ssl: { ca: servedCa, servername: 'db.elsewhere.example' } });
    expect(await failure(client.connect())).toMatch(/Hostname\/IP does not match certificate's altnames/);
    await client.end().catch(() => undefined);
  });

  it.skipIf(missingTool('psql'))('psql with sslmode=verify-full refuses a host name the certificate does not carry', async () => {
    const url = new URL(agent.connection_string);
    const conninfo = `host=db.elsewhere.example hostaddr=127.0.0.1 port=${url.port} dbname=${url.pathname.slice(1)} user=${url.username} password=${url.password} sslmode=verify-full sslrootcert=${join(work, 'pgward-ca.pem')}`;
    await writeFile(join(work, 'pgward-ca.pem'), servedCa);
    expect(await failure(run('psql', [conninfo, '-c', 'select 1']))).toMatch(/server certificate for "127.0.0.1" \(and 2 other names\) does not match host name "db.elsewhere.example"/);
  });

  it('node-postgres: a bare sslmode=require means verify-full against Node’s roots (it fails); uselibpqcompat=true gives libpq’s meaning', async () => {
    const bare = new pg.Client({ connectionString: `${agent.connection_string}?sslmode=require` });
    expect(await failure(bare.connect())).toMatch(/unable to verify the first certificate/);
    await bare.end().catch(() => undefined);
    const compat = new pg.Client({ connectionString: `${agent.connection_string}?uselibpqcompat=true&sslmode=require` });
    await compat.connect();
    expect((await compat.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
    await compat.end();
  });

  it('postgres.js with ssl.ca runs its prepared statements over a verified connection', async () => {
    const sql = postgres(agent.connection_string, { ssl: { ca: servedCa }, max: 1, onnotice: () => undefined });
    try {
      for (const id of [1, 2, 3]) expect((await sql`select id from orders where id = ${id}`)[0]?.id).toBe(id);
    } finally {
      await sql.end();
    }
  });
});
