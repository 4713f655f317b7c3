/**
 * A self-hosted data plane as docs/self-host.md lays it out, in real processes: `pgward serve`
 * (the control plane, state in PostgreSQL), and a second `pgward serve --role proxy --enroll
 * <token> --control-plane <url>` with no state database of its own. An agent logs in to the
 * second proxy with psql and node-postgres; its decisions reach the control plane's audit trail,
 * whose chain verifies. Revoking the token ends the agent's live session and refuses new logins.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateAnchorKey } from '../../src/crypto/checkpoint.js';
import { freePort } from '../support/free-port.js';
import { freshDatabase, upstreamLogin, type TestDatabase } from '../support/pg.js';
import { pgwardCli, startPgward, verifyAudit, waitFor, type PgwardProcess } from '../support/pgward-process.js';

let dir: string;
let upstream: TestDatabase;
let state: TestDatabase;
let env: NodeJS.ProcessEnv;
const running: PgwardProcess[] = [];

async function start(args: readonly string[], processEnv: NodeJS.ProcessEnv): Promise<PgwardProcess & { proxyPort: number }> {
  const httpPort = await freePort();
  const proxyPort = await freePort();
  const started = await startPgward(args, { ...processEnv, PGWARD_HTTP_PORT: String(httpPort), PGWARD_PROXY_PORT: String(proxyPort) }, httpPort);
  running.push(started);
  return { ...started, proxyPort };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pgward-self-host-'));
  await chmod(dir, 0o755);
  upstream = await freshDatabase('self_host_upstream');
  state = await freshDatabase('self_host_state');
  const client = new pg.Client({ connectionString: upstream.url });
  await client.connect();
  await client.query("create table public.items (id int primary key, label text not null); insert into public.items select i, 'item-' || i from generate_series(1, 5) i");
  await client.end();
  const anchorKey = join(dir, 'anchor.pem');
  await writeFile(anchorKey, generateAnchorKey(), { mode: 0o600 });
  const { PGWARD_STATE_URL: _s, EVENTSTORE_URL: _e, NATS_URL: _n, PGWARD_MASTER_KEY: _k, ...rest } = process.env;
  env = { ...rest, PGWARD_DATA_DIR: join(dir, 'control'), PGWARD_STATE_URL: state.url, PGWARD_MASTER_KEY: randomBytes(32).toString('base64'), PGWARD_AUDIT_ANCHOR_KEY: anchorKey, PGWARD_PUBLIC_HOST: '127.0.0.1', PGWARD_LOG_LEVEL: 'warn' };
});

afterAll(async () => {
  await Promise.all(running.map((p) => p.stop()));
  await upstream?.drop();
  await state?.drop();
  await rm(dir, { recursive: true, force: true });
});

describe('a self-hosted data plane enrolled with a control plane', () => {

  it('serves an agent through the enrolled proxy, its decisions land in the control plane’s verified audit trail, and a revoke stops it', async () => {
    const control = await start(['serve', '--role', 'api', '--role', 'projector', '--role', 'ingest', '--role', 'proxy'], env);
    const created = pgwardCli(['admin', 'create-org', '--name', 'Self-host org', '--plan', 'scale'], env);
    expect(created.status, created.stderr).toBe(0);
    const { org_id: orgId, api_key: apiKey } = JSON.parse(created.stdout) as { org_id: string; api_key: string };
    const call = async (method: string, path: string, payload?: object): Promise<Record<string, unknown>> => {
      const response = await fetch(`${control.httpUrl}${path}`, { method, headers: { authorization: `Bearer ${apiKey}`, ...(payload ? { 'content-type': 'application/json' } : {}) }, ...(payload ? { body: JSON.stringify(payload) } : {}) });
      const body = await response.text();
      if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${body}`);
      return JSON.parse(body) as Record<string, unknown>;
    };
    const upstreamAs = upstreamLogin(upstream);
    const database = { host: upstreamAs.host, port: upstreamAs.port, name: upstreamAs.database, username: upstreamAs.user, password: upstreamAs.password, ssl_mode: 'disable' };
    const { project } = (await call('POST', '/v1/projects', { name: 'on-prem', org_id: orgId, self_hosted: true, database })) as { project: { id: string } };
    const policy = (await call('POST', `/v1/projects/${project.id}/policies`, { name: 'reader', read_only: true, allowed_tables: ['public.items'] })) as { id: string };
    const agent = (await call('POST', `/v1/projects/${project.id}/agents`, { name: 'bot', policy_profile_id: policy.id })) as { connection_string: string };
    const enrollment = (await call('POST', `/v1/projects/${project.id}/self-host-enrollments`, { description: 'rack 4', region_label: 'on-prem-1' })) as { id: string; token: string };

    const unknown = pgwardCli(['serve', '--role', 'proxy', '--enroll', `pgw_enr_${'x'.repeat(43)}`, '--control-plane', control.httpUrl], { PATH: process.env.PATH, PGWARD_DATA_DIR: join(dir, 'unknown'), PGWARD_PROXY_PORT: String(await freePort()), PGWARD_HTTP_PORT: String(await freePort()) });
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toBe('pgward: the control plane refused the enrollment token: the enrollment token is unknown\n');

    const dataPlane = await start(['serve', '--role', 'proxy', '--enroll', enrollment.token, '--control-plane', control.httpUrl], {
      PATH: process.env.PATH,
      PGWARD_DATA_DIR: join(dir, 'data-plane'),
      PGWARD_LOG_LEVEL: 'info',
    });
    const login = new URL(agent.connection_string);
    login.host = `127.0.0.1:${dataPlane.proxyPort}`;
    login.searchParams.set('sslmode', 'disable');

    const psql = spawnSync('psql', [login.toString(), '-XAtc', 'select label from items order by id limit 2'], { encoding: 'utf8', timeout: 20_000 });
    expect(psql.stderr).toBe('');
    expect(psql.stdout).toBe('item-1\nitem-2\n');
    const live = new pg.Client({ connectionString: login.toString() });
    await live.connect();
    expect((await live.query('select count(*)::int as n from items')).rows).toEqual([{ n: 5 }]);
    expect((await live.query('select label from items where id = $1', [3])).rows).toEqual([{ label: 'item-3' }]);
    const refused = await live.query('delete from items').then(() => 'ran', (error: { code?: string }) => error.code);
    expect(refused).toBe('42501');

    const stateClient = new pg.Client({ connectionString: state.url });
    await stateClient.connect();
    try {
      const entries = await waitFor(
        'the data plane’s four statements in the control plane’s audit trail',
        async () => (await stateClient.query<{ event: string; proxy_id: string; sql: string }>('select event, proxy_id, sql from rm.audit_entries where project_id = $1 order by seq', [project.id])).rows,
        (rows) => rows.length >= 4,
        20_000,
      );
      expect(entries.map((e) => [e.event, e.sql])).toEqual([
        ['query', 'select label from items order by id limit 2'],
        ['query', 'select count(*)::int as n from items'],
        ['query', 'select label from items where id = $1'],
        ['blocked', 'delete from items'],
      ]);
      expect(entries.every((e) => e.proxy_id.startsWith(`${enrollment.id}:`))).toBe(true);
    } finally {
      await stateClient.end();
    }
    const audit = verifyAudit(project.id, env);
    expect(audit).toMatchObject({ ok: true, entries: 4, events: 4 });

    const ended = new Promise<string>((resolve) => live.on('error', (error: Error & { code?: string }) => resolve(`${error.code}: ${error.message}`)));
    await call('POST', `/v1/projects/${project.id}/self-host-enrollments/${enrollment.id}/revoke`);
    expect(await ended).toMatch(/^57P01: terminating connection: its enrollment token was revoked/);
    const health = await waitFor('the data plane to report it refuses agents', () => fetch(`${dataPlane.httpUrl}/healthz`).then((r) => r.json() as Promise<{ parts: Record<string, { ok: boolean; detail: string }> }>), (body) => body.parts.control_plane?.ok === false, 10_000);
    expect(health.parts.control_plane!.detail).toMatch(/^refusing agents: its enrollment token was revoked/);
    const after = spawnSync('psql', [login.toString(), '-XAtc', 'select 1'], { encoding: 'utf8', timeout: 20_000 });
    expect(after.status).not.toBe(0);
    expect(after.stderr).toMatch(/this pgward data plane no longer serves: its enrollment token was revoked/);
    // Read from its stdout pipe by this process's event loop, which spawnSync above held.
    await waitFor('the data plane to log that it refuses agents', () => dataPlane.output(), (output) => /this data plane no longer serves agents/.test(output), 10_000);
    const again = pgwardCli(['serve', '--role', 'proxy', '--enroll', enrollment.token, '--control-plane', control.httpUrl], { PATH: process.env.PATH, PGWARD_DATA_DIR: join(dir, 'again'), PGWARD_PROXY_PORT: String(await freePort()), PGWARD_HTTP_PORT: String(await freePort()) });
    expect(again.status).toBe(1);
    expect(again.stderr).toMatch(/^pgward: the control plane ended this data plane’s channel \(revoked\): the enrollment token pgw_enr_.{4}… was revoked at /);
  }, 90_000);
});
