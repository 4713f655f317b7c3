import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approval, approvalStream } from '../../commands/approvals/approval.js';
import { sweepExpiredApprovals } from '../../commands/approvals/expiry-sweep.js';
import { handle } from '../../commands/handle.js';
import { rebuildAndVerify, projectionStatus } from '../../projections/maintenance.js';
import { approvalsProjection } from '../../projections/approvals.js';
import { newId } from '../../src/ids.js';
import { startApi, type TestApi } from '../support/api.js';

const ISSUER = 'https://auth.pgward.test/api/auth';
const AUDIENCE = 'pgward-api';

let api: TestApi;
let jwks: Server;
let signer: Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];
let owner: { orgId: string; apiKey: string };
let projectId: string;
let policyId: string;
let agent: { credential_id: string; mcp_token: string };
let member: string;
let viewer: string;

async function jwt(claims: Record<string, unknown>): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid: 'k1' }).setIssuer(ISSUER).setAudience(AUDIENCE).setIssuedAt().setExpirationTime('5m').sign(signer);
}

async function apiKey(role: string): Promise<string> {
  return ((await api.call(owner.apiKey, { method: 'POST', url: `/v1/orgs/${owner.orgId}/api-keys`, payload: { name: role, role } })).json() as { api_key: string }).api_key;
}

/** A held statement, as the proxy records one. */
async function held(over: { credentialId?: string | null; expiresAt?: string; sql?: string } = {}): Promise<string> {
  const approvalId = newId('apr_');
  const sql = over.sql ?? 'update orders set amount = 0 where id = 1';
  await handle(api.store, approvalStream(approvalId), approval, {
    kind: 'request',
    request: {
      approval_id: approvalId, project_id: projectId, database_id: databaseId, policy_profile_id: policyId,
      credential_id: over.credentialId === undefined ? agent.credential_id : over.credentialId, session_id: 'px.1.7', region: 'local',
      sql, normalized_sql: sql, statement_kind: 'update', target_tables: ['public.orders'], estimated_rows: '1',
      expires_at: over.expiresAt ?? new Date(Date.now() + 3_600_000).toISOString(), source: 'wire', policy_version: 1, binding: 'c'.repeat(64),
      hold_rule: 'approval.held_kind', hold_reason: "it runs a statement of kind update, which this credential's policy holds for approval (rule approval.held_kind)",
    },
  }, { correlationId: 'test', actor: 'proxy:test' });
  return approvalId;
}
let databaseId: string;

const url = (suffix = '') => `/v1/projects/${projectId}/approvals${suffix}`;

beforeAll(async () => {
  const pair = await generateKeyPair('ES256');
  signer = pair.privateKey;
  const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  jwks = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] })));
  await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
  api = await startApi('approvals', { PGWARD_JWKS_URL: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks`, PGWARD_JWT_ISSUER: ISSUER, PGWARD_JWT_AUDIENCE: AUDIENCE });
  owner = await api.org('pro');
  projectId = await api.project(owner, 'Shop');
  databaseId = ((await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects/${projectId}/databases` })).json() as { databases: { id: string }[] }).databases[0]!.id;
  policyId = ((await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/policies`, payload: { name: 'held', read_only: false, allowed_tables: ['public.*'], approval: { held_kinds: ['update'] } } })).json() as { id: string }).id;
  const registered = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/agents`, payload: { name: 'writer', policy_profile_id: policyId } });
  const secrets = registered.json() as { credential: { id: string }; mcp_token: string };
  agent = { credential_id: secrets.credential.id, mcp_token: secrets.mcp_token };
  member = await apiKey('member');
  viewer = await apiKey('viewer');
});
afterAll(async () => {
  await api?.stop();
  await new Promise((resolve) => jwks?.close(resolve));
});

describe('approval requests over REST', () => {
  it('approves a pending request once, naming the key; a second decision is 409 INVALID_STATE and changes nothing', async () => {
    const id = await held();
    const got = await api.call(viewer, { method: 'GET', url: url(`/${id}`) });
    expect(got.statusCode).toBe(200);
    expect(got.headers.etag).toBe('"0"');
    expect(got.json()).toMatchObject({ id, project_id: projectId, policy_profile_id: policyId, credential_id: agent.credential_id, status: 'pending', estimated_rows: 1, decided_at: null, decided_by: null, reason: '', statement_kind: 'update', target_tables: ['public.orders'] });
    const approved = await api.call(member, { method: 'POST', url: url(`/${id}/approve`), payload: { reason: 'ticket 12' } });
    expect(approved.statusCode).toBe(200);
    expect(approved.headers.etag).toBe('"1"');
    const keyId = ((await api.call(member, { method: 'GET', url: '/v1/me' })).json() as { key_id: string }).key_id;
    expect(approved.json()).toMatchObject({ status: 'approved', decided_by: `api_key:${keyId}`, reason: 'ticket 12' });
    for (const verdict of ['approve', 'reject']) {
      const again = await api.call(owner.apiKey, { method: 'POST', url: url(`/${id}/${verdict}`), payload: { reason: 'no' } });
      expect(again.statusCode).toBe(409);
      expect(again.json()).toMatchObject({ code: 'INVALID_STATE', detail: `approval request ${id} was approved already; it cannot be ${verdict === 'approve' ? 'approved' : 'rejected'}` });
    }
    expect((await api.store.readStream(approvalStream(id))).map((e) => e.type)).toEqual(['ApprovalRequested.v1', 'ApprovalApproved.v1']);
  });

  it('rejects with a reason, decided by a JWT user; a body without one is fine; a reason over 500 characters is 400', async () => {
    const id = await held();
    const tooLong = await api.call(member, { method: 'POST', url: url(`/${id}/reject`), payload: { reason: 'x'.repeat(501) } });
    expect(tooLong.statusCode).toBe(400);
    expect(tooLong.json()).toMatchObject({ code: 'INVALID_INPUT', errors: [{ field: 'reason' }] });
    const user = await jwt({ sub: 'usr_rita', org_id: owner.orgId, role: 'member' });
    const rejected = await api.call(user, { method: 'POST', url: url(`/${id}/reject`), payload: { reason: 'not during the sale' } });
    expect(rejected.statusCode).toBe(200);
    expect(rejected.json()).toMatchObject({ status: 'rejected', decided_by: 'user:usr_rita', reason: 'not during the sale' });
    const bare = await held();
    const bareApproved = await api.call(member, { method: 'POST', url: url(`/${bare}/approve`) });
    expect(bareApproved.json(), bareApproved.body).toMatchObject({ status: 'approved', reason: '' });
  });

  it('only a human of role member or above decides: a viewer is 403, an agent token 401, and the request stays pending', async () => {
    const id = await held();
    const byViewer = await api.call(viewer, { method: 'POST', url: url(`/${id}/approve`), payload: {} });
    expect(byViewer.statusCode).toBe(403);
    const byViewerJwt = await api.call(await jwt({ sub: 'usr_v', org_id: owner.orgId, role: 'viewer' }), { method: 'POST', url: url(`/${id}/approve`), payload: {} });
    expect(byViewerJwt.statusCode).toBe(403);
    const byAgent = await api.call(agent.mcp_token, { method: 'POST', url: url(`/${id}/approve`), payload: {} });
    expect(byAgent.statusCode).toBe(401);
    expect((await api.call(viewer, { method: 'GET', url: url(`/${id}`) })).json()).toMatchObject({ status: 'pending' });
  });

  it('honours If-Match, and answers another organization’s and an unknown request with 404', async () => {
    const id = await held();
    const stale = await api.call(member, { method: 'POST', url: url(`/${id}/approve`), headers: { 'if-match': '"7"' }, payload: {} });
    expect(stale.statusCode).toBe(412);
    const other = await api.org('pro');
    const otherProject = await api.project(other, 'Other');
    expect((await api.call(other.apiKey, { method: 'GET', url: url(`/${id}`) })).statusCode).toBe(404);
    expect((await api.call(other.apiKey, { method: 'POST', url: url(`/${id}/approve`), payload: {} })).statusCode).toBe(404);
    expect((await api.call(other.apiKey, { method: 'GET', url: `/v1/projects/${otherProject}/approvals/${id}` })).statusCode).toBe(404);
    expect((await api.call(owner.apiKey, { method: 'GET', url: url('/apr_nothere') })).statusCode).toBe(404);
  });

  it('lists by id with status and credential filters and pages', async () => {
    const ids = [await held({ credentialId: null }), await held({ credentialId: null }), await held({ credentialId: null })].sort();
    const listAll = async () => (await api.call(viewer, { method: 'GET', url: url('?page_size=100') })).json() as { approvals: { id: string; status: string; credential_id: string | null }[] };
    // held() appends to the store; the listing reads the read model, which takes them a moment later (longer on a loaded machine).
    let all = await listAll();
    for (const deadline = Date.now() + 10_000; !ids.every((id) => all.approvals.some((a) => a.id === id)) && Date.now() < deadline; all = await listAll()) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(all.approvals.map((a) => a.id)).toEqual(expect.arrayContaining(ids));
    expect(all.approvals.map((a) => a.id)).toEqual([...all.approvals.map((a) => a.id)].sort());
    const unattributed = (await api.call(viewer, { method: 'GET', url: url(`?status=pending&page_size=2`) })).json() as { approvals: { id: string; status: string }[]; next_page_token: string };
    expect(unattributed.approvals.every((a) => a.status === 'pending')).toBe(true);
    expect(unattributed.next_page_token).not.toBe('');
    const next = (await api.call(viewer, { method: 'GET', url: url(`?status=pending&page_size=100&page_token=${unattributed.next_page_token}`) })).json() as { approvals: { id: string }[] };
    expect(next.approvals[0]!.id > unattributed.approvals[1]!.id).toBe(true);
    const mine = (await api.call(viewer, { method: 'GET', url: url(`?credential_id=${agent.credential_id}&page_size=100`) })).json() as { approvals: { id: string; credential_id: string }[] };
    expect(mine.approvals.length).toBeGreaterThan(0);
    expect(mine.approvals.every((a) => a.credential_id === agent.credential_id)).toBe(true);
    expect(mine.approvals.map((a) => a.id).some((id) => ids.includes(id))).toBe(false);
    expect((await api.call(viewer, { method: 'GET', url: url('?status=maybe') })).statusCode).toBe(400);
  });

  it('expires a pending request past its expiry on event time once; it can then not be decided', async () => {
    const id = await held({ expiresAt: new Date(Date.now() + 1_000).toISOString() });
    const early = await sweepExpiredApprovals(api.store, api.pool, new Date(), () => undefined);
    expect(early).toBe(0);
    const expired: string[] = [];
    const later = new Date(Date.now() + 5_000);
    // The sweep reads its candidates from the read model: wait until it has the request.
    for (let tries = 0; expired.length === 0 && tries < 100; tries++) {
      await sweepExpiredApprovals(api.store, api.pool, later, (row) => expired.push(row.approval_id));
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await sweepExpiredApprovals(api.store, api.pool, later, (row) => expired.push(row.approval_id));
    expect(expired).toEqual([id]);
    const row = (await api.call(viewer, { method: 'GET', url: url(`/${id}`) })).json() as { status: string; reason: string; expires_at: string };
    expect(row).toMatchObject({ status: 'expired', reason: `expired undecided at ${row.expires_at}` });
    const late = await api.call(member, { method: 'POST', url: url(`/${id}/approve`), payload: {} });
    expect(late.statusCode).toBe(409);
    expect(late.json()).toMatchObject({ code: 'INVALID_STATE', detail: `approval request ${id} expired undecided; it cannot be approved` });
  });

  it('the management MCP reaches the approval operations', async () => {
    const id = await held();
    await api.app.listen({ port: 0, host: '127.0.0.1' });
    const client = new Client({ name: 'approvals-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${(api.app.server.address() as AddressInfo).port}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${member}` } } }));
    try {
      const found = (await client.callTool({ name: 'search_endpoints', arguments: { query: 'approve a held statement', limit: 5 } })) as CallToolResult;
      expect(JSON.stringify(found.structuredContent)).toContain('approveApproval');
      const called = (await client.callTool({ name: 'call_endpoint', arguments: { operation_id: 'approveApproval', path_params: { project_id: projectId, approval_id: id }, body: { reason: 'via MCP' } } })) as CallToolResult;
      expect(called.structuredContent).toMatchObject({ status: 200, body: { id, status: 'approved', reason: 'via MCP' } });
      const again = (await client.callTool({ name: 'call_endpoint', arguments: { operation_id: 'rejectApproval', path_params: { project_id: projectId, approval_id: id }, body: {} } })) as CallToolResult;
      expect(JSON.stringify(again)).toContain('INVALID_STATE');
    } finally {
      await client.close();
    }
  });

  it('rebuilds the approvals read model from position 0 byte for byte (rebuild --verify): every status, expiry on event time included', async () => {
    const failing = await held();
    await handle(api.store, approvalStream(failing), approval, { kind: 'fail', sqlstate: '57P01', message: 'the session ended while the statement waited' }, { correlationId: 'test', actor: 'proxy:test' });
    for (let tries = 0; !(await projectionStatus(api.store, api.pool, [approvalsProjection]))[0]!.caught_up && tries < 200; tries++) await new Promise((resolve) => setTimeout(resolve, 25));
    const statuses = (await api.pool.query<{ status: string }>('select distinct status from rm.approvals order by status')).rows.map((r) => r.status);
    expect(statuses).toEqual(['approved', 'expired', 'failed', 'pending', 'rejected']);
    const result = await rebuildAndVerify(api.store, api.pool, approvalsProjection);
    expect(result.identical).toBe(true);
    expect(result.live.approvals!.rows).toBeGreaterThanOrEqual(10);
  });
});
