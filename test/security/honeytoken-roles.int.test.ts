import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type TestApi } from '../support/api.js';

/**
 * docs/permissions.md: planting and removing honeytokens needs admin. A policy profile plants a
 * honeytoken by listing its id, so changing a profile's `honeytokens` is planting or removing:
 * a member, who may otherwise edit profiles, must not disarm a canary an admin set.
 */
let api: TestApi;
let owner: { orgId: string; apiKey: string };
let member = '';
let projectId = '';
let honeytokenId = '';
let policyId = '';

beforeAll(async () => {
  api = await startApi('honeytoken_roles');
  owner = await api.org('pro');
  projectId = await api.project(owner);
  honeytokenId = (await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/honeytokens`, payload: { kind: 'table', target: 'public.canary' } })).json().id;
  const policy = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/policies`, payload: { name: 'armed', honeytokens: [honeytokenId] } });
  expect(policy.statusCode, policy.body).toBe(201);
  policyId = (policy.json() as { id: string }).id;
  member = (await api.call(owner.apiKey, { method: 'POST', url: `/v1/orgs/${owner.orgId}/api-keys`, payload: { name: 'm', role: 'member' } })).json().api_key;
});
afterAll(async () => {
  await api?.stop();
});

describe('honeytokens on a policy profile', () => {
  it('a member cannot remove a honeytoken from a profile (403), and the profile stays armed', async () => {
    const url = `/v1/projects/${projectId}/policies/${policyId}`;
    const disarmed = await api.call(member, { method: 'PATCH', url, payload: { honeytokens: [] } });
    expect(disarmed.statusCode, disarmed.body).toBe(403);
    expect((await api.call(member, { method: 'GET', url })).json()).toMatchObject({ honeytokens: [honeytokenId] });
  });

  it('a member cannot plant one either, on create or update', async () => {
    const created = await api.call(member, { method: 'POST', url: `/v1/projects/${projectId}/policies`, payload: { name: 'member planted', honeytokens: [honeytokenId] } });
    expect(created.statusCode, created.body).toBe(403);
  });

  it('a member still edits the rest of a profile, also resending the same honeytokens', async () => {
    const url = `/v1/projects/${projectId}/policies/${policyId}`;
    expect((await api.call(member, { method: 'PATCH', url, payload: { max_rows: 10 } })).statusCode).toBe(200);
    expect((await api.call(member, { method: 'PATCH', url, payload: { max_rows: 20, honeytokens: [honeytokenId] } })).statusCode).toBe(200);
    expect((await api.call(member, { method: 'POST', url: `/v1/projects/${projectId}/policies`, payload: { name: 'plain' } })).statusCode).toBe(201);
  });

  it('an admin changes them', async () => {
    const url = `/v1/projects/${projectId}/policies/${policyId}`;
    expect((await api.call(owner.apiKey, { method: 'PATCH', url, payload: { honeytokens: [] } })).statusCode).toBe(200);
  });
});
