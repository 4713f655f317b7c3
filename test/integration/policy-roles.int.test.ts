import { randomBytes } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScramVerifier } from '../../src/crypto/scram.js';
import { openSecret, parseKeyring } from '../../src/crypto/seal.js';
import { decodeEvent } from '../../src/events/catalog.js';
import { policyRoleName } from '../../src/provisioning/policy-role.js';
import { startApi, type TestApi } from '../support/api.js';
import { admin, freshDatabase, type TestDatabase } from '../support/pg.js';

let api: TestApi;
let upstream: TestDatabase;
let owner: { orgId: string; apiKey: string };
let projectId: string;
let databaseId: string;
const noCreateRole = `pgward_t_nocreaterole_${randomBytes(4).toString('hex')}`;
const noCreateRolePassword = randomBytes(12).toString('hex');
const provisioned = new Set<string>();

/** The login of the role last provisioned for `policyId`, its password opened from its event as the proxy would. */
async function roleLogin(policyId: string): Promise<{ user: string; password: string }> {
  const recorded = (await api.store.readStream(`policy-${policyId}`)).map(decodeEvent).filter((event) => event.type === 'PolicyRoleProvisioned.v1').at(-1);
  if (recorded?.type !== 'PolicyRoleProvisioned.v1') throw new Error(`no role provisioned for ${policyId}`);
  return { user: recorded.data.role_name, password: openSecret(recorded.data.password, parseKeyring(api.masterKey), recorded.data.role_name) };
}

/** What the last of `statements` does when they run one by one, directly on the upstream as the role provisioned for `policyId`: its rows, or the first SQLSTATE. */
async function runAs(policyId: string, ...statements: string[]): Promise<{ rows?: unknown[]; code?: string }> {
  const login = await roleLogin(policyId);
  const url = new URL(upstream.url);
  url.username = login.user;
  url.password = login.password;
  return admin(url.toString(), async (client) => {
    let rows: unknown[] = [];
    for (const sql of statements) {
      try {
        rows = (await client.query(sql)).rows;
      } catch (error) {
        return { code: (error as { code?: string }).code };
      }
    }
    return { rows };
  });
}

async function policyWith(payload: Record<string, unknown>): Promise<string> {
  const response = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/policies`, payload });
  expect(response.statusCode).toBe(201);
  return (response.json() as { id: string }).id;
}

async function provision(policyId: string, database = databaseId, key = owner.apiKey): Promise<LightMyRequestResponse> {
  const response = await api.call(key, { method: 'POST', url: `/v1/projects/${projectId}/policies/${policyId}/provision`, payload: { database_id: database } });
  if (response.statusCode === 200) provisioned.add((response.json() as { role_name: string }).role_name);
  return response;
}

const problem = (response: LightMyRequestResponse) => response.json() as { code: string; detail: string; errors?: { field: string }[] };
const streamTypes = async (policyId: string) => (await api.store.readStream(`policy-${policyId}`)).map((e) => e.type);

beforeAll(async () => {
  api = await startApi('policy_roles');
  upstream = await freshDatabase('policy_roles_up');
  await admin(upstream.url, (client) =>
    client.query(`create table orders (id int primary key, total numeric not null); insert into orders select g, g from generate_series(1, 10) g;
      create table customers (id int primary key, email text not null); insert into customers values (1, 'a@example.com');
      create schema analytics; create table analytics.events (id int); create view analytics.daily as select 1 as n;`),
  );
  await admin(upstream.url, (client) => client.query(`create role ${noCreateRole} login password '${noCreateRolePassword}'`));
  owner = await api.org('pro');
  const target = new URL(upstream.url);
  const created = await api.call(owner.apiKey, {
    method: 'POST',
    url: '/v1/projects',
    payload: { name: 'provisioned', org_id: owner.orgId, database: { host: target.hostname, port: Number(target.port || 5432), name: upstream.name, username: decodeURIComponent(target.username), password: decodeURIComponent(target.password) || 'trust', ssl_mode: 'disable' } },
  });
  const body = created.json() as { project: { id: string }; database: { id: string } };
  projectId = body.project.id;
  databaseId = body.database.id;
});
afterAll(async () => {
  await api?.stop();
  await upstream?.drop();
  await admin(new URL('/postgres', upstream.url).toString(), async (client) => {
    for (const role of [...provisioned, noCreateRole]) await client.query(`drop role if exists ${pg.escapeIdentifier(role)}`);
  });
});

describe('provisioning a policy’s upstream role', () => {
  it('makes a login role that may SELECT exactly the allowed tables, read-only by default, and records it with its password sealed', async () => {
    const policyId = await policyWith({ name: 'reader', read_only: true, allowed_tables: ['public.orders', 'analytics.*', 'public.ghost'] });
    const response = await provision(policyId);
    expect(response.statusCode).toBe(200);
    const role = response.json() as { role_name: string };
    expect(role).toEqual({
      policy_id: policyId,
      database_id: databaseId,
      role_name: expect.stringMatching(/^pgward_[0-9a-f]{24}$/),
      tables: ['analytics.daily', 'analytics.events', 'public.orders'],
      missing_tables: ['public.ghost'],
    });
    expect(await streamTypes(policyId)).toEqual(['PolicyProfileCreated.v1', 'PolicyRoleProvisioned.v1']);
    const recorded = decodeEvent((await api.store.readStream(`policy-${policyId}`)).at(-1)!);
    if (recorded.type !== 'PolicyRoleProvisioned.v1') throw new Error(recorded.type);
    expect(JSON.stringify(recorded.data)).not.toMatch(/"password":"[^{]/);
    const password = openSecret(recorded.data.password, parseKeyring(api.masterKey), role.role_name);
    const stored = await admin(upstream.url, (client) =>
      client.query<{ rolpassword: string; rolsuper: boolean; rolcreaterole: boolean; rolinherit: boolean; config: string[] }>(
        'select a.rolpassword, a.rolsuper, a.rolcreaterole, a.rolinherit, r.rolconfig as config from pg_authid a join pg_roles r using (oid) where a.rolname = $1',
        [role.role_name],
      ),
    );
    const [, iterations, salt] = /^SCRAM-SHA-256\$(\d+):([^$]+)\$/.exec(stored.rows[0]!.rolpassword)!;
    const verifier = createScramVerifier(password, { iterations: Number(iterations), salt: Buffer.from(salt!, 'base64') });
    expect(stored.rows[0]!.rolpassword).toBe(`SCRAM-SHA-256$${iterations}:${salt}$${verifier.stored_key}:${verifier.server_key}`);
    expect(stored.rows[0]).toMatchObject({ rolsuper: false, rolcreaterole: false, rolinherit: false, config: ['default_transaction_read_only=on'] });
  });

  it('the provisioned role really cannot write, or read a table that is not allowed', async () => {
    const policyId = await policyWith({ name: 'enforced', read_only: true, allowed_tables: ['public.orders'] });
    expect((await provision(policyId)).statusCode).toBe(200);
    expect(await runAs(policyId, 'select count(*)::int as n from orders')).toEqual({ rows: [{ n: 10 }] });
    expect(await runAs(policyId, 'show default_transaction_read_only')).toEqual({ rows: [{ default_transaction_read_only: 'on' }] });
    expect(await runAs(policyId, 'insert into orders values (11, 1)')).toEqual({ code: '25006' });
    expect(await runAs(policyId, 'begin read write', 'insert into orders values (11, 1)')).toEqual({ code: '42501' });
    expect(await runAs(policyId, 'set default_transaction_read_only = off', 'update orders set total = 0')).toEqual({ code: '42501' });
    expect(await runAs(policyId, 'set default_transaction_read_only = off', 'create table mine (x int)')).toEqual({ code: '42501' });
    expect(await runAs(policyId, 'select * from customers')).toEqual({ code: '42501' });
    expect(await runAs(policyId, 'select * from analytics.events')).toEqual({ code: '42501' });
    expect(await admin(upstream.url, (client) => client.query('select count(*)::int as n, sum(total)::int as s from orders'))).toMatchObject({ rows: [{ n: 10, s: 55 }] });
  });

  it('provisioning again after a policy change replaces the grants: same role, only the new tables', async () => {
    const policyId = await policyWith({ name: 'moving', read_only: true, allowed_tables: ['public.orders'] });
    const first = (await provision(policyId)).json() as { role_name: string };
    const patched = await api.call(owner.apiKey, { method: 'PATCH', url: `/v1/projects/${projectId}/policies/${policyId}`, payload: { allowed_tables: ['public.customers'] } });
    expect(patched.statusCode).toBe(200);
    const second = await provision(policyId);
    expect(second.json()).toMatchObject({ role_name: first.role_name, tables: ['public.customers'], missing_tables: [] });
    expect(await runAs(policyId, 'select count(*)::int as n from customers')).toEqual({ rows: [{ n: 1 }] });
    expect(await runAs(policyId, 'select count(*) from orders')).toEqual({ code: '42501' });
    expect(await streamTypes(policyId)).toEqual(['PolicyProfileCreated.v1', 'PolicyRoleProvisioned.v1', 'PolicyProfileUpdated.v1', 'PolicyRoleProvisioned.v1']);
  });

  it('refuses a write-capable policy (409 INVALID_STATE) and records nothing', async () => {
    const policyId = await policyWith({ name: 'writer', read_only: false, allowed_tables: ['public.orders'] });
    const response = await provision(policyId);
    expect(response.statusCode).toBe(409);
    expect(problem(response).code).toBe('INVALID_STATE');
    expect(await streamTypes(policyId)).toEqual(['PolicyProfileCreated.v1']);
  });

  it('answers 409 INVALID_STATE naming CREATEROLE when the registered user cannot create roles, and creates and records nothing', async () => {
    const target = new URL(upstream.url);
    const registered = await api.call(owner.apiKey, {
      method: 'POST',
      url: `/v1/projects/${projectId}/databases`,
      payload: { host: target.hostname, port: Number(target.port || 5432), name: upstream.name, username: noCreateRole, password: noCreateRolePassword, ssl_mode: 'disable' },
    });
    expect(registered.statusCode).toBe(201);
    const weakDatabase = (registered.json() as { id: string }).id;
    const policyId = await policyWith({ name: 'unprivileged', read_only: true, allowed_tables: ['public.orders'] });
    const response = await provision(policyId, weakDatabase);
    expect(response.statusCode).toBe(409);
    expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(problem(response).code).toBe('INVALID_STATE');
    expect(problem(response).detail).toBe(`the registered database user ${noCreateRole} cannot create roles (it needs CREATEROLE); the policy is still enforced by the proxy`);
    expect(await streamTypes(policyId)).toEqual(['PolicyProfileCreated.v1']);
    const roles = await admin(upstream.url, (client) => client.query('select 1 from pg_roles where rolname = $1', [policyRoleName(policyId, weakDatabase)]));
    expect(roles.rowCount).toBe(0);
  });

  it('answers 400 naming database_id for a database not of this project, and 403 to a member', async () => {
    const policyId = await policyWith({ name: 'nowhere', read_only: true });
    expect(problem(await provision(policyId, 'db_00000000000000000000000000')).errors?.map((e) => e.field)).toEqual(['database_id']);
    const member = await api.call(owner.apiKey, { method: 'POST', url: `/v1/orgs/${owner.orgId}/api-keys`, payload: { name: 'member', role: 'member' } });
    expect(problem(await provision(policyId, databaseId, (member.json() as { api_key: string }).api_key)).code).toBe('FORBIDDEN');
  });
});
