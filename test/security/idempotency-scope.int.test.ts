import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type TestApi } from '../support/api.js';

/**
 * Idempotency-Key replays are per caller (docs/http-api.md). Two callers of one organization that
 * happen to pick the same key value are two requests: each creates its own resource, and neither
 * is answered with the other's.
 */
let api: TestApi;
let owner: { orgId: string; apiKey: string };
let second = '';
let projectId = '';

beforeAll(async () => {
  api = await startApi('idempotency_scope');
  owner = await api.org('pro');
  projectId = await api.project(owner);
  second = (await api.call(owner.apiKey, { method: 'POST', url: `/v1/orgs/${owner.orgId}/api-keys`, payload: { name: 'ci', role: 'admin' } })).json().api_key;
});
afterAll(async () => {
  await api?.stop();
});

describe('the same Idempotency-Key value from two callers of one organization', () => {
  it('creates two databases, each answered with its own', async () => {
    const url = `/v1/projects/${projectId}/databases`;
    const body = (host: string) => ({ host, port: 5432, name: 'postgres', username: 'postgres', password: 'pw' });
    const first = await api.call(owner.apiKey, { method: 'POST', url, headers: { 'idempotency-key': 'add-db' }, payload: body('first.example') });
    expect(first.statusCode, first.body).toBe(201);
    const other = await api.call(second, { method: 'POST', url, headers: { 'idempotency-key': 'add-db' }, payload: body('second.example') });
    expect(other.statusCode, other.body).toBe(201);
    expect(other.json()).toMatchObject({ host: 'second.example' });
    expect((other.json() as { id: string }).id).not.toBe((first.json() as { id: string }).id);
    const listed = (await api.call(owner.apiKey, { method: 'GET', url })).json() as { databases: { host: string }[] };
    expect(listed.databases.map((d) => d.host).sort()).toEqual(['127.0.0.1', 'first.example', 'second.example']);
    // Each caller's retry still replays its own response.
    const retry = await api.call(second, { method: 'POST', url, headers: { 'idempotency-key': 'add-db' }, payload: body('second.example') });
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.json()).toEqual(other.json());
  });
});
