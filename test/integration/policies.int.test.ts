import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type TestApi } from '../support/api.js';

let api: TestApi;
let owner: { orgId: string; apiKey: string };
let projectId: string;

beforeAll(async () => {
  api = await startApi('policies');
  owner = await api.org('pro');
  projectId = await api.project(owner, 'Shop');
});
afterAll(async () => {
  await api?.stop();
});

const url = () => `/v1/projects/${projectId}/policies`;

describe('policy profiles', () => {
  it('creates a profile with safe defaults: read-only, no table allowed, best-effort audit', async () => {
    const response = await api.call(owner.apiKey, { method: 'POST', url: url(), payload: { name: 'read orders', allowed_tables: ['public.orders', 'analytics.*'] } });
    expect(response.statusCode).toBe(201);
    expect(response.headers.etag).toBe('"0"');
    const body = response.json() as Record<string, unknown>;
    expect(body).toMatchObject({
      project_id: projectId,
      name: 'read orders',
      read_only: true,
      allowed_tables: ['public.orders', 'analytics.*'],
      masked_columns: {},
      max_rows: null,
      queries_per_day: 0,
      bytes_per_month: 0,
      approval: { held_kinds: [], row_threshold: null, expiry_seconds: 3600, tables: [], auto_approve: {} },
      honeytokens: [],
      audit_mode: 'best_effort',
      allow_catalog: false,
      version: 1,
    });
    expect(body.id).toMatch(/^pol_[a-z0-9]{26}$/);
    const fetched = await api.call(owner.apiKey, { method: 'GET', url: `${url()}/${body.id as string}` });
    expect(fetched.json()).toEqual(body);
  });

  it('refuses malformed tables, columns and masks, naming each field', async () => {
    const response = await api.call(owner.apiKey, {
      method: 'POST',
      url: url(),
      payload: { name: 'bad', allowed_tables: ['orders', 'public.orders'], masked_columns: { 'public.customers': 'redact', 'public.customers.email': 'scramble' }, max_rows: 0 },
    });
    expect(response.statusCode).toBe(400);
    const fields = (response.json() as { errors: { field: string }[] }).errors.map((e) => e.field).sort();
    expect(fields).toEqual(['allowed_tables.0', 'masked_columns.public.customers', 'masked_columns.public.customers.email', 'max_rows']);
  });

  it('keeps approval rules as given: held kinds, row threshold, tables, per-table auto-approve ceilings, expiry, tolerance (0 when not given)', async () => {
    const approval = { held_kinds: ['update', 'delete'], row_threshold: 100, expiry_seconds: 600, tables: ['public.orders', 'audit.*'], auto_approve: { 'public.orders': { max_rows: 5 } }, row_tolerance_percent: 10 };
    const response = await api.call(owner.apiKey, { method: 'POST', url: url(), payload: { name: 'approvals kept', read_only: false, approval } });
    expect(response.statusCode).toBe(201);
    expect((response.json() as { approval: unknown }).approval).toEqual(approval);
    const plain = await api.call(owner.apiKey, { method: 'POST', url: url(), payload: { name: 'approvals defaulted', read_only: false, approval: { held_kinds: ['update'] } } });
    expect((plain.json() as { approval: unknown }).approval).toEqual({ held_kinds: ['update'], row_threshold: null, expiry_seconds: 3600, tables: [], auto_approve: {}, row_tolerance_percent: 0 });
  });

  it('refuses malformed approval rules strictly, naming each field, and saves nothing', async () => {
    const before = await api.call(owner.apiKey, { method: 'GET', url: url() });
    const response = await api.call(owner.apiKey, {
      method: 'POST',
      url: url(),
      payload: {
        name: 'bad approvals',
        approval: {
          held_kinds: ['update', 'updates', 'update'],
          row_threshold: -1,
          expiry_seconds: 0,
          tables: ['orders', 'public.orders', 'public.orders'],
          auto_approve: { 'public.*': { max_rows: 5 }, 'public.orders': { max_rows: 0 }, 'public.items': { max_rows: 1.5 }, 'public.x': { max_rows: 3, ddl: true } },
          row_tolerance_percent: 101,
          hold_everything: true,
        },
      },
    });
    expect(response.statusCode).toBe(400);
    const fields = [...new Set((response.json() as { errors: { field: string }[] }).errors.map((e) => e.field))].sort();
    expect(fields).toEqual([
      'approval',
      'approval.auto_approve.public.*',
      'approval.auto_approve.public.items.max_rows',
      'approval.auto_approve.public.orders.max_rows',
      'approval.auto_approve.public.x',
      'approval.expiry_seconds',
      'approval.held_kinds.1',
      'approval.row_threshold',
      'approval.row_tolerance_percent',
      'approval.tables',
      'approval.tables.0',
    ]);
    const twice = await api.call(owner.apiKey, { method: 'POST', url: url(), payload: { name: 'bad approvals', approval: { held_kinds: ['update', 'update'] } } });
    expect((twice.json() as { errors: { field: string; message: string }[] }).errors).toEqual([{ field: 'approval.held_kinds', message: 'lists a statement kind twice' }]);
    expect((await api.call(owner.apiKey, { method: 'GET', url: url() })).json()).toEqual(before.json());
  });

  it('versions every change and honours If-Match', async () => {
    const created = await api.call(owner.apiKey, { method: 'POST', url: url(), payload: { name: 'masks' } });
    const id = (created.json() as { id: string }).id;
    const patched = await api.call(owner.apiKey, {
      method: 'PATCH',
      url: `${url()}/${id}`,
      headers: { 'if-match': '"0"' },
      payload: { masked_columns: { 'public.customers.email': 'partial' }, max_rows: 100, bytes_per_month: 5_000_000_000 },
    });
    expect(patched.statusCode).toBe(200);
    expect(patched.json()).toMatchObject({ version: 2, max_rows: 100, bytes_per_month: 5_000_000_000, masked_columns: { 'public.customers.email': 'partial' } });
    const stale = await api.call(owner.apiKey, { method: 'PATCH', url: `${url()}/${id}`, headers: { 'if-match': '"0"' }, payload: { name: 'x' } });
    expect(stale.statusCode).toBe(412);
    expect((await api.store.readStream(`policy-${id}`)).map((e) => e.type)).toEqual(['PolicyProfileCreated.v1', 'PolicyProfileUpdated.v1']);
  });

  it('refuses a second profile with the same name in the project (409 RESOURCE_EXISTS)', async () => {
    expect((await api.call(owner.apiKey, { method: 'POST', url: url(), payload: { name: 'unique' } })).statusCode).toBe(201);
    const taken = await api.call(owner.apiKey, { method: 'POST', url: url(), payload: { name: 'unique' } });
    expect(taken.statusCode).toBe(409);
    expect((taken.json() as { code: string }).code).toBe('RESOURCE_EXISTS');
  });

  it('deletes an unused profile; it then reads as missing', async () => {
    const created = await api.call(owner.apiKey, { method: 'POST', url: url(), payload: { name: 'temporary' } });
    const id = (created.json() as { id: string }).id;
    expect((await api.call(owner.apiKey, { method: 'DELETE', url: `${url()}/${id}` })).statusCode).toBe(204);
    expect((await api.call(owner.apiKey, { method: 'GET', url: `${url()}/${id}` })).statusCode).toBe(404);
    expect((await api.call(owner.apiKey, { method: 'DELETE', url: `${url()}/${id}` })).statusCode).toBe(404);
  });

  it('refuses to delete a profile a live credential uses (409 CONFLICT), and allows it once the credential is revoked', async () => {
    const created = await api.call(owner.apiKey, { method: 'POST', url: url(), payload: { name: 'in use' } });
    const id = (created.json() as { id: string }).id;
    const agent = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/agents`, payload: { name: 'bot', policy_profile_id: id } });
    expect(agent.statusCode).toBe(201);
    const agentId = (agent.json() as { credential: { id: string } }).credential.id;
    const refused = await api.call(owner.apiKey, { method: 'DELETE', url: `${url()}/${id}` });
    expect(refused.statusCode).toBe(409);
    expect((refused.json() as { code: string }).code).toBe('CONFLICT');
    expect((await api.call(owner.apiKey, { method: 'DELETE', url: `/v1/projects/${projectId}/agents/${agentId}` })).statusCode).toBe(204);
    expect((await api.call(owner.apiKey, { method: 'DELETE', url: `${url()}/${id}` })).statusCode).toBe(204);
  });
});
