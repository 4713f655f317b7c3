import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openSecret, parseKeyring } from '../../src/crypto/seal.js';
import { startApi, type TestApi } from '../support/api.js';

let api: TestApi;
let owner: { orgId: string; apiKey: string };
const pgUrl = new URL(inject('pgUrl'));
/** The test server's own password (the embedded one has one; the machine's server trusts). */
const serverPassword = decodeURIComponent(pgUrl.password) || 'unused-with-trust';

beforeAll(async () => {
  api = await startApi('databases');
  owner = await api.org('pro');
});
afterAll(async () => {
  await api?.stop();
});

async function project(password: string, port = Number(pgUrl.port || 5432)) {
  const response = await api.call(owner.apiKey, {
    method: 'POST',
    url: '/v1/projects',
    payload: { name: 'db test', org_id: owner.orgId, database: { host: pgUrl.hostname, port, name: api.database.name, username: decodeURIComponent(pgUrl.username || 'postgres'), password, ssl_mode: 'disable' } },
  });
  expect(response.statusCode).toBe(201);
  return response.json() as { project: { id: string }; database: Record<string, unknown> & { id: string } };
}

describe('databases', () => {
  it('stores the password sealed under the master key, bound to the database id, and never returns it', async () => {
    const created = await project('never-shown-pw');
    expect(JSON.stringify(created)).not.toContain('never-shown-pw');
    expect(created.database).toMatchObject({ ssl_mode: 'disable', role: 'primary', pool_config: { mode: 'transaction', max_connections: 10 }, cache_config: { enabled: true, ttl_seconds: 60, max_entries: 10000, swr_seconds: 30 }, query_timeout_ms: 0, auto_read_routing: false, pool_region: '' });
    const [, registered] = await api.store.readStream(`project-${created.project.id}`);
    const text = Buffer.from(registered!.data).toString();
    expect(text).not.toContain('never-shown-pw');
    const sealed = (JSON.parse(text) as { password: Parameters<typeof openSecret>[0] }).password;
    expect(sealed.alg).toBe('AES-256-GCM');
    const { rows } = await api.pool.query('select password_sealed from rm.databases where database_id = $1', [created.database.id]);
    expect(rows[0].password_sealed).toEqual(sealed);
    expect(() => openSecret(sealed, parseKeyring(Buffer.alloc(32, 7).toString('base64')), created.database.id)).toThrow();
    const fetched = await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects/${created.project.id}/databases/${created.database.id}` });
    expect(fetched.body).not.toContain('password');
  });

  it('tests the connection: the server version when it answers, the reason when it does not', async () => {
    const good = await project(serverPassword);
    const ok = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${good.project.id}/databases/${good.database.id}/test` });
    expect(ok.json()).toMatchObject({ ok: true, error: null });
    expect((ok.json() as { server_version: string }).server_version).toMatch(/^\d+/);
    const bad = await project('pw', 1);
    const refused = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${bad.project.id}/databases/${bad.database.id}/test` });
    expect(refused.json()).toMatchObject({ ok: false, server_version: null });
    expect((refused.json() as { error: string }).error).toMatch(/ECONNREFUSED/);
  });

  it('gets and changes a replica under its ETag; a replica change leaves the database’s ETag alone', async () => {
    const created = await project('pw');
    const base = `/v1/projects/${created.project.id}/databases/${created.database.id}`;
    const dbEtag = (await api.call(owner.apiKey, { method: 'GET', url: base })).headers.etag;
    const added = await api.call(owner.apiKey, { method: 'POST', url: `${base}/replicas`, payload: { host: 'replica.internal', port: 5433 } });
    const id = (added.json() as { id: string }).id;
    const fetched = await api.call(owner.apiKey, { method: 'GET', url: `${base}/replicas/${id}` });
    expect(fetched.statusCode).toBe(200);
    expect(fetched.json()).toEqual(added.json());
    const etag = fetched.headers.etag as string;
    expect(etag).toMatch(/^"\d+"$/);
    const changed = await api.call(owner.apiKey, { method: 'PATCH', url: `${base}/replicas/${id}`, headers: { 'if-match': etag }, payload: { port: 5434, ssl_mode: 'require' } });
    expect(changed.statusCode).toBe(200);
    expect(changed.json()).toMatchObject({ id, host: 'replica.internal', port: 5434, ssl_mode: 'require' });
    expect(changed.headers.etag).not.toBe(etag);
    const stale = await api.call(owner.apiKey, { method: 'PATCH', url: `${base}/replicas/${id}`, headers: { 'if-match': etag }, payload: { port: 5435 } });
    expect(stale.statusCode).toBe(412);
    expect(stale.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect((stale.json() as { code: string }).code).toBe('PRECONDITION_FAILED');
    const empty = await api.call(owner.apiKey, { method: 'PATCH', url: `${base}/replicas/${id}`, payload: {} });
    expect(empty.statusCode).toBe(400);
    const unknown = await api.call(owner.apiKey, { method: 'PATCH', url: `${base}/replicas/${id}`, payload: { password: 'x' } });
    expect(unknown.statusCode).toBe(400);
    const spaced = await api.call(owner.apiKey, { method: 'PATCH', url: `${base}/replicas/${id}`, payload: { host: 'a b' } });
    expect(spaced.statusCode).toBe(400);
    expect((await api.call(owner.apiKey, { method: 'GET', url: `${base}/replicas/${id}` })).json()).toMatchObject({ port: 5434, ssl_mode: 'require' });
    // The database's ETag is its own: adding or changing a replica does not move it.
    expect((await api.call(owner.apiKey, { method: 'PATCH', url: base, headers: { 'if-match': dbEtag as string }, payload: { query_timeout_ms: 1000 } })).statusCode).toBe(200);
    const listed = await api.call(owner.apiKey, { method: 'GET', url: `${base}/replicas` });
    expect((listed.json() as { replicas: unknown[] }).replicas).toEqual([expect.objectContaining({ id, port: 5434, ssl_mode: 'require' })]);
    expect((await api.call(owner.apiKey, { method: 'DELETE', url: `${base}/replicas/${id}` })).statusCode).toBe(204);
    const gone = await api.call(owner.apiKey, { method: 'GET', url: `${base}/replicas/${id}` });
    expect(gone.statusCode).toBe(404);
    expect((gone.json() as { code: string }).code).toBe('NOT_FOUND');
    expect((await api.call(owner.apiKey, { method: 'PATCH', url: `${base}/replicas/${id}`, payload: { port: 5 } })).statusCode).toBe(404);
    const other = await project('pw');
    expect((await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects/${other.project.id}/databases/${other.database.id}/replicas/${id}` })).statusCode).toBe(404);
  });

  it('adds and removes replicas, and keeps the last database of a project', async () => {
    const created = await project('pw');
    const base = `/v1/projects/${created.project.id}/databases/${created.database.id}`;
    const replica = await api.call(owner.apiKey, { method: 'POST', url: `${base}/replicas`, payload: { host: 'replica.internal', port: 5433 } });
    expect(replica.statusCode).toBe(201);
    const id = (replica.json() as { id: string }).id;
    const listed = await api.call(owner.apiKey, { method: 'GET', url: `${base}/replicas` });
    expect((listed.json() as { replicas: { id: string; ssl_mode: string }[] }).replicas).toEqual([expect.objectContaining({ id, ssl_mode: 'prefer' })]);
    expect((await api.call(owner.apiKey, { method: 'DELETE', url: `${base}/replicas/${id}` })).statusCode).toBe(204);
    expect((await api.call(owner.apiKey, { method: 'DELETE', url: `${base}/replicas/${id}` })).statusCode).toBe(404);
    const last = await api.call(owner.apiKey, { method: 'DELETE', url: base });
    expect(last.statusCode).toBe(409);
    expect((last.json() as { code: string }).code).toBe('CONFLICT');
  });
});
