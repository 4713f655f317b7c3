/** Sandbox branches through app.inject() against real PostgreSQL: the copies are real databases on the upstream server. */
import type { LightMyRequestResponse } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startApi, type TestApi } from '../support/api.js';
import { admin, adminRows, freshDatabase, type TestDatabase } from '../support/pg.js';

let api: TestApi;
let upstream: TestDatabase;
let owner: { orgId: string; apiKey: string };
let stranger: { orgId: string; apiKey: string };
let projectId: string;
let databaseId: string;
const serverUrl = (): string => inject('pgUrl');
const NOCREATEDB_ROLE = `pgward_t_nocreatedb_${process.pid}`;

interface Branch {
  id: string;
  project_id: string;
  database_id: string;
  name: string;
  database_name: string;
  status: 'copying' | 'ready' | 'failed';
  method: 'template' | 'logical' | null;
  failure_reason: string | null;
  created_at: string;
  updated_at: string;
}

/** How the test server is reached, from its URL (a given one, or the embedded one). */
function serverLogin(): { host: string; port: number; user: string; password: string } {
  const url = new URL(serverUrl());
  return { host: url.hostname, port: Number(url.port || 5432), user: decodeURIComponent(url.username), password: decodeURIComponent(url.password) };
}

/** A project whose database is `database` on the test server, registered as `user`. */
async function projectOn(key: string, orgId: string, database: string, user?: string): Promise<{ projectId: string; databaseId: string }> {
  const login = serverLogin();
  const created = await api.call(key, {
    method: 'POST',
    url: '/v1/projects',
    payload: { name: 'Shop', org_id: orgId, database: { host: login.host, port: login.port, name: database, username: user ?? login.user, password: (user ? '' : login.password) || 'trust', ssl_mode: 'disable' } },
  });
  const body = created.json() as { project: { id: string }; database: { id: string } };
  return { projectId: body.project.id, databaseId: body.database.id };
}

beforeAll(async () => {
  api = await startApi('branches');
  upstream = await freshDatabase('branch_src');
  await admin(upstream.url, (client) => client.query(`create table orders (id int primary key, total numeric not null); insert into orders select g, g * 2 from generate_series(1, 100) g`));
  await admin(serverUrl(), (client) => client.query(`drop role if exists ${NOCREATEDB_ROLE}; create role ${NOCREATEDB_ROLE} login nocreatedb`));
  owner = await api.org('pro');
  stranger = await api.org('pro');
  ({ projectId, databaseId } = await projectOn(owner.apiKey, owner.orgId, upstream.name));
});
afterAll(async () => {
  await api?.stop();
  const leftovers = (await adminRows<{ datname: string }>(serverUrl(), `select datname from pg_database where datname like 'pgward_branch_%'`).catch(() => [])).filter((row) => known.has(row.datname));
  // Cleaned up whatever happened, then checked: every branch this file made was dropped by its delete.
  for (const { datname } of leftovers) await admin(serverUrl(), (client) => client.query(`drop database if exists ${client.escapeIdentifier(datname)} with (force)`));
  await upstream?.drop();
  await admin(serverUrl(), (client) => client.query(`drop role if exists ${NOCREATEDB_ROLE}`)).catch(() => undefined);
  expect(leftovers).toEqual([]);
});

/** Branch databases this file made; each must be dropped by the end. */
const known = new Set<string>();
const url = (project = projectId) => `/v1/projects/${project}/branches`;
const create = (payload: Record<string, unknown>, key = owner.apiKey, headers: Record<string, string> = {}, project = projectId) =>
  api.call(key, { method: 'POST', url: url(project), payload, headers });
const problem = (response: LightMyRequestResponse) => response.json() as { code: string; detail: string; errors?: { field: string }[] };

async function settled(id: string, project = projectId): Promise<Branch> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const branch = (await api.call(owner.apiKey, { method: 'GET', url: `${url(project)}/${id}` })).json() as Branch;
    if (branch.status !== 'copying' || Date.now() > deadline) return branch;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function branched(name: string, project = projectId, database = databaseId): Promise<Branch> {
  const response = await create({ database_id: database, name }, owner.apiKey, {}, project);
  expect(response.statusCode, response.body).toBe(202);
  const branch = response.json() as Branch;
  known.add(branch.database_name);
  return settled(branch.id, project);
}

const ordersIn = async (database: string): Promise<number> => Number((await adminRows<{ n: string }>(`${serverUrl().replace(/\/[^/]*$/, '')}/${database}`, 'select count(*) as n from orders'))[0]!.n);
const exists = async (database: string): Promise<boolean> => (await adminRows(serverUrl(), `select 1 from pg_database where datname = '${database}'`)).length === 1;

describe('sandbox branches', () => {
  it('copies a database with no other sessions by CREATE DATABASE … TEMPLATE: copying, then ready with the rows', async () => {
    const response = await create({ database_id: databaseId, name: 'rehearsal' });
    expect(response.statusCode).toBe(202);
    const created = response.json() as Branch;
    known.add(created.database_name);
    expect(created).toEqual({
      id: expect.stringMatching(/^brn_[a-z0-9]{26}$/),
      project_id: projectId,
      database_id: databaseId,
      name: 'rehearsal',
      database_name: `pgward_branch_${created.id.slice(4)}`,
      status: 'copying',
      method: null,
      failure_reason: null,
      created_at: created.created_at,
      updated_at: created.created_at,
    });
    expect(response.headers.etag).toBe('"0"');
    expect(response.headers.location).toBe(`/v1/projects/${projectId}/branches/${created.id}`);
    const ready = await settled(created.id);
    expect(ready).toMatchObject({ status: 'ready', method: 'template', failure_reason: null });
    expect(await ordersIn(created.database_name)).toBe(100);
    expect((await api.store.readStream(`branch-${created.id}`)).map((e) => e.type)).toEqual(['BranchCreated.v1', 'BranchReady.v1']);
    const fetched = await api.call(owner.apiKey, { method: 'GET', url: `${url()}/${created.id}` });
    expect(fetched.headers.etag).toBe('"1"');
  });

  it('copies a database other sessions use logically (pg_dump | psql), leaving those sessions alone', async () => {
    const busy = new pg.Client({ connectionString: upstream.url });
    await busy.connect();
    try {
      await busy.query('begin; insert into orders values (1000, 1)');
      const branch = await branched('while-busy');
      expect(branch).toMatchObject({ status: 'ready', method: 'logical' });
      // The copy is a snapshot: the uncommitted row is not in it.
      expect(await ordersIn(branch.database_name)).toBe(100);
      expect((await busy.query('select count(*)::int as n from orders')).rows).toEqual([{ n: 101 }]);
      await busy.query('rollback');
    } finally {
      await busy.end();
    }
  });

  it('copies logically a database whose name holds `=`, a quote and a backslash (read as a name, not a connection string)', async () => {
    const name = `pgward_t_odd host=nowhere 'q\\ ${process.pid}`;
    const server = serverUrl();
    await admin(server, (client) => client.query(`create database ${client.escapeIdentifier(name)}`));
    const odd = new pg.Client({ ...serverLogin(), database: name });
    await odd.connect();
    try {
      await odd.query('create table orders (id int primary key, total numeric not null); insert into orders select g, g from generate_series(1, 7) g');
      const { projectId: project, databaseId: database } = await projectOn(owner.apiKey, owner.orgId, name);
      const branch = await branched('odd', project, database);
      expect(branch).toMatchObject({ status: 'ready', method: 'logical' });
      expect(await ordersIn(branch.database_name)).toBe(7);
      expect((await api.call(owner.apiKey, { method: 'DELETE', url: `${url(project)}/${branch.id}` })).statusCode).toBe(204);
    } finally {
      await odd.end();
      await admin(server, (client) => client.query(`drop database if exists ${client.escapeIdentifier(name)} with (force)`));
    }
  });

  it('a registered user without CREATEDB: the branch fails with the server’s reason and leaves no database', async () => {
    const { projectId: project, databaseId: database } = await projectOn(owner.apiKey, owner.orgId, upstream.name, NOCREATEDB_ROLE);
    const branch = await branched('no-rights', project, database);
    expect(branch.status).toBe('failed');
    expect(branch.method).toBeNull();
    expect(branch.failure_reason).toMatch(/permission denied to create database/);
    expect(await exists(branch.database_name)).toBe(false);
    const deleted = await api.call(owner.apiKey, { method: 'DELETE', url: `${url(project)}/${branch.id}` });
    expect(deleted.statusCode).toBe(204);
  });

  it('refuses bad bodies with 400 naming the field, an unknown database with 404, and creates nothing', async () => {
    const before = await adminRows(serverUrl(), `select datname from pg_database where datname like 'pgward_branch_%'`);
    for (const [payload, field] of [
      [{ database_id: databaseId }, 'name'],
      [{ database_id: databaseId, name: '' }, 'name'],
      [{ database_id: databaseId, name: 'x'.repeat(101) }, 'name'],
      [{ database_id: databaseId, name: 'a\u0000b' }, 'name'],
      [{ name: 'x' }, 'database_id'],
      [{ database_id: 'db/../x', name: 'x' }, 'database_id'],
    ] as const) {
      const response = await create(payload);
      expect(response.statusCode).toBe(400);
      expect(problem(response).errors?.map((e) => e.field)).toEqual([field]);
    }
    expect((await create({ database_id: databaseId, name: 'x', method: 'template' })).statusCode).toBe(400);
    const unknown = await create({ database_id: 'db_nonexistent00000000000000', name: 'x' });
    expect(unknown.statusCode).toBe(404);
    expect(problem(unknown).code).toBe('NOT_FOUND');
    expect(await adminRows(serverUrl(), `select datname from pg_database where datname like 'pgward_branch_%'`)).toEqual(before);
  });

  it('a name taken on the database is 409 RESOURCE_EXISTS', async () => {
    await branched('taken');
    const again = await create({ database_id: databaseId, name: 'taken' });
    expect(again.statusCode).toBe(409);
    expect(problem(again).code).toBe('RESOURCE_EXISTS');
  });

  it('concurrent creates of one name: exactly one is 202, the others 409 RESOURCE_EXISTS; once deleted the name is free again', async () => {
    const responses = await Promise.all(Array.from({ length: 5 }, () => create({ database_id: databaseId, name: 'contested' })));
    expect(responses.map((r) => r.statusCode).sort()).toEqual([202, 409, 409, 409, 409]);
    const winner = responses.find((r) => r.statusCode === 202)!.json() as Branch;
    known.add(winner.database_name);
    await settled(winner.id);
    expect((await api.call(owner.apiKey, { method: 'DELETE', url: `${url()}/${winner.id}` })).statusCode).toBe(204);
    expect((await branched('contested')).status).toBe('ready');
  });

  it('another organization’s branches answer 404 to every operation, and its databases cannot be branched', async () => {
    const branch = await branched('private');
    for (const [method, path] of [
      ['GET', `${url()}/${branch.id}`],
      ['DELETE', `${url()}/${branch.id}`],
      ['GET', url()],
    ] as const) {
      const response = await api.call(stranger.apiKey, { method, url: path });
      expect(response.statusCode, `${method} ${path}`).toBe(404);
    }
    const theirs = await api.project(stranger, 'Theirs');
    const crossed = await create({ database_id: databaseId, name: 'crossed' }, stranger.apiKey, {}, theirs);
    expect(crossed.statusCode).toBe(404);
    expect(await exists(branch.database_name)).toBe(true);
  });

  it('an Idempotency-Key replays the same branch (one copy); with another body it is 409 IDEMPOTENCY_KEY_REUSED', async () => {
    const first = await create({ database_id: databaseId, name: 'idem' }, owner.apiKey, { 'idempotency-key': 'brn-1' });
    const again = await create({ database_id: databaseId, name: 'idem' }, owner.apiKey, { 'idempotency-key': 'brn-1' });
    expect(first.statusCode).toBe(202);
    expect(again.json()).toEqual(first.json());
    known.add((first.json() as Branch).database_name);
    const other = await create({ database_id: databaseId, name: 'idem-2' }, owner.apiKey, { 'idempotency-key': 'brn-1' });
    expect(other.statusCode).toBe(409);
    expect(problem(other).code).toBe('IDEMPOTENCY_KEY_REUSED');
    await settled((first.json() as Branch).id);
    const listed = (await api.call(owner.apiKey, { method: 'GET', url: `${url()}?page_size=100` })).json() as { branches: Branch[] };
    expect(listed.branches.filter((b) => b.name.startsWith('idem')).length).toBe(1);
  });

  it('lists in pages; delete honours If-Match, drops the database, and answers 404 after', async () => {
    const seen: string[] = [];
    let token = '';
    do {
      const page = (await api.call(owner.apiKey, { method: 'GET', url: `${url()}?page_size=2${token ? `&page_token=${token}` : ''}` })).json() as { branches: Branch[]; next_page_token: string };
      expect(page.branches.length).toBeLessThanOrEqual(2);
      seen.push(...page.branches.map((b) => b.id));
      token = page.next_page_token;
    } while (token);
    expect(seen).toEqual([...seen].sort());
    expect(seen.length).toBeGreaterThanOrEqual(5);
    for (const id of seen) {
      const branch = (await api.call(owner.apiKey, { method: 'GET', url: `${url()}/${id}` })).json() as Branch;
      const stale = await api.call(owner.apiKey, { method: 'DELETE', url: `${url()}/${id}`, headers: { 'if-match': '"9"' } });
      expect(stale.statusCode).toBe(412);
      if (branch.status === 'ready') expect(await exists(branch.database_name)).toBe(true);
      const deleted = await api.call(owner.apiKey, { method: 'DELETE', url: `${url()}/${id}`, headers: { 'if-match': '"1"' } });
      expect(deleted.statusCode).toBe(204);
      expect(await exists(branch.database_name)).toBe(false);
      expect((await api.call(owner.apiKey, { method: 'GET', url: `${url()}/${id}` })).statusCode).toBe(404);
    }
    expect(await ordersIn(upstream.name)).toBe(100);
  });
});
