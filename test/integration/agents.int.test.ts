import { createRequire } from 'node:module';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sweepExpiredCredentials } from '../../commands/credentials/expiry-sweep.js';
import { credentialsProjection } from '../../projections/credentials.js';
import { awaitCaughtUp } from '../../projections/maintenance.js';
import { countLiveCredentialsUsingPolicy, findCredentialByTokenHash } from '../../queries/credentials.js';
import { parseClientFirst, serverFirst, verifyClientFinal } from '../../src/crypto/scram.js';
import { matchesHash, sha256Hex } from '../../src/crypto/tokens.js';
import type { ScramVerifier } from '../../src/events/fields.js';
import { startApi, type TestApi } from '../support/api.js';

interface PgScramClient {
  response: string;
}
interface PgSasl {
  startSession(mechanisms: string[]): PgScramClient;
  continueSession(session: PgScramClient, password: string, serverData: string): Promise<void>;
  finalizeSession(session: PgScramClient, serverData: string): void;
}
/** node-postgres's SCRAM client: the peer that knows the password, so the verifier is not checked against itself. */
const sasl = createRequire(import.meta.url)('pg/lib/crypto/sasl.js') as PgSasl;

async function authenticates(password: string, verifier: ScramVerifier): Promise<boolean> {
  const client = sasl.startSession(['SCRAM-SHA-256']);
  const { message, session } = serverFirst(parseClientFirst(client.response), verifier);
  await sasl.continueSession(client, password, message);
  const result = verifyClientFinal(session, client.response);
  if (result.ok) sasl.finalizeSession(client, result.serverFinal);
  return result.ok;
}

interface AgentCredential {
  id: string;
  project_id: string;
  policy_profile_id: string;
  name: string;
  pg_username: string;
  status: string;
  principal_type: string;
  auth_method: string;
  last_used_at: string | null;
  expires_at: string | null;
  expired: boolean;
  ip_rules: { allow: { cidr: string; label?: string }[]; deny: { cidr: string; label?: string }[] };
  created_at: string;
  updated_at: string;
}
interface Secrets {
  credential: AgentCredential;
  connection_string: string;
  mcp_url: string;
  mcp_token: string;
}
interface StoredRow {
  name: string;
  scram: ScramVerifier;
  token_hash: string;
  token_prefix: string;
  secret_version: number;
  expired_at: string | null;
}

let api: TestApi;
let owner: { orgId: string; apiKey: string };
let projectId: string;
let policyId: string;

function problem(response: LightMyRequestResponse) {
  expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
  const body = response.json() as { code: string; status: number; detail: string; request_id: string; errors?: { field: string }[] };
  expect(body.request_id).toBe(response.headers['x-request-id']);
  expect(body.status).toBe(response.statusCode);
  return body;
}

const agents = (project = projectId) => `/v1/projects/${project}/agents`;
const agent = (id: string, project = projectId) => `${agents(project)}/${id}`;

async function createProject(org: { orgId: string; apiKey: string }): Promise<string> {
  const database = { host: '127.0.0.1', port: 5432, name: 'shop db', username: 'postgres', password: 'upstream-pw' };
  const response = await api.call(org.apiKey, { method: 'POST', url: '/v1/projects', payload: { name: 'Shop', org_id: org.orgId, database } });
  expect(response.statusCode).toBe(201);
  return (response.json() as { project: { id: string } }).project.id;
}

let policyCounter = 0;

async function createPolicy(org: { apiKey: string }, project: string): Promise<string> {
  const name = `read orders ${++policyCounter}`;
  const response = await api.call(org.apiKey, { method: 'POST', url: `/v1/projects/${project}/policies`, payload: { name, read_only: true, allowed_tables: ['public.orders'] } });
  expect(response.statusCode).toBe(201);
  return (response.json() as { id: string }).id;
}

async function register(body: Record<string, unknown> = {}, key = owner.apiKey, project = projectId): Promise<Secrets> {
  const response = await api.call(key, { method: 'POST', url: agents(project), payload: { name: 'reporting agent', policy_profile_id: policyId, ...body } });
  expect(response.statusCode).toBe(201);
  return response.json() as Secrets;
}

const patch = (id: string, status: string, headers: Record<string, string> = {}) => api.call(owner.apiKey, { method: 'PATCH', url: agent(id), headers, payload: { status } });
const rotate = (id: string) => api.call(owner.apiKey, { method: 'POST', url: `${agent(id)}/rotate` });
const revoke = (id: string) => api.call(owner.apiKey, { method: 'DELETE', url: agent(id) });
const get = (id: string) => api.call(owner.apiKey, { method: 'GET', url: agent(id) });

async function events(id: string): Promise<string[]> {
  return (await api.store.readStream(`credential-${id}`)).map((e) => e.type.replace(/\.v\d+$/, ''));
}

async function storedRow(id: string): Promise<StoredRow & { text: string }> {
  const { rows } = await api.pool.query<{ row: StoredRow; text: string }>('select to_jsonb(c) as row, to_jsonb(c)::text as text from rm.credentials c where credential_id = $1', [id]);
  return { ...rows[0]!.row, text: rows[0]!.text };
}

function passwordOf(secrets: Secrets): string {
  return decodeURIComponent(new URL(secrets.connection_string).password);
}

/** Every form a secret or its verifier could take in a body. */
function secretForms(secrets: Secrets, row: StoredRow): string[] {
  return [passwordOf(secrets), secrets.mcp_token, row.scram.stored_key, row.scram.server_key, row.scram.salt, row.token_hash];
}

beforeAll(async () => {
  api = await startApi('agents');
  owner = await api.org('pro');
  projectId = await createProject(owner);
  policyId = await createPolicy(owner, projectId);
});
afterAll(async () => {
  await api?.stop();
});

describe('register', () => {
  it('returns the secrets once, with exactly the AgentCredential fields of spec §2.1 and the credential’s own IP rules (issue 23)', async () => {
    const secrets = await register();
    const { credential } = secrets;
    expect(Object.keys(credential).sort()).toEqual(
      ['auth_method', 'created_at', 'expired', 'expires_at', 'id', 'ip_rules', 'last_used_at', 'name', 'pg_username', 'policy_profile_id', 'principal_type', 'project_id', 'status', 'updated_at'],
    );
    expect(credential.ip_rules).toEqual({ allow: [], deny: [] });
    expect(credential).toMatchObject({
      project_id: projectId,
      policy_profile_id: policyId,
      name: 'reporting agent',
      pg_username: credential.id,
      status: 'active',
      principal_type: 'agent',
      auth_method: 'scram-sha-256',
      last_used_at: null,
      expires_at: null,
      expired: false,
    });
    expect(credential.id).toMatch(/^agt_[a-z2-7]{26}$/);
    const password = passwordOf(secrets);
    expect(password).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(secrets.connection_string).toBe(`postgresql://${credential.id}:${password}@gateway.test:6432/shop%20db`);
    expect(secrets.mcp_url).toBe('http://gateway.test:8080/mcp');
    expect(secrets.mcp_token).toMatch(/^pgw_agt_[A-Za-z0-9_-]{43}$/);
    expect(await events(credential.id)).toEqual(['CredentialRegistered']);
  });

  it('stores only a verifier the password authenticates against and a hash the token matches', async () => {
    const secrets = await register();
    const row = await storedRow(secrets.credential.id);
    expect(row.scram.iterations).toBe(4096);
    expect(await authenticates(passwordOf(secrets), row.scram)).toBe(true);
    expect(await authenticates(`${passwordOf(secrets)}x`, row.scram)).toBe(false);
    expect(matchesHash(secrets.mcp_token, row.token_hash)).toBe(true);
    expect(row.token_prefix).toBe(secrets.mcp_token.slice(0, 12));
    expect(row.text).not.toContain(passwordOf(secrets));
    expect(row.text).not.toContain(secrets.mcp_token);
    const stored = await api.store.readStream(`credential-${secrets.credential.id}`);
    const payload = Buffer.from(stored[0]!.data).toString('utf8');
    expect(payload).not.toContain(passwordOf(secrets));
    expect(payload).not.toContain(secrets.mcp_token);
  });

  it('honours principal_type and a future expires_at given with an offset', async () => {
    const at = new Date(Date.now() + 86_400_000);
    const { credential } = await register({ principal_type: 'human', expires_at: at.toISOString().replace('Z', '+00:00') });
    expect(credential.principal_type).toBe('human');
    expect(credential.expires_at).toBe(at.toISOString());
    expect(credential.expired).toBe(false);
  });

  it('answers 400 naming expires_at when it is not in the future, and registers nothing', async () => {
    for (const expiresAt of [new Date(Date.now() - 1000).toISOString(), '2020-01-01T00:00:00Z']) {
      const response = await api.call(owner.apiKey, { method: 'POST', url: agents(), payload: { name: 'late', policy_profile_id: policyId, expires_at: expiresAt } });
      expect(response.statusCode).toBe(400);
      const body = problem(response);
      expect(body.code).toBe('INVALID_INPUT');
      expect(body.errors![0]!.field).toBe('expires_at');
    }
    const { rows } = await api.pool.query(`select count(*)::int as n from pgward.events where type = 'CredentialRegistered.v1' and convert_from(data, 'utf8')::jsonb->>'name' = 'late'`);
    expect(rows[0].n).toBe(0);
  });

  it('answers 400 naming policy_profile_id for a policy that is missing, deleted or of another project', async () => {
    const otherProject = await createProject(owner);
    const foreign = await createPolicy(owner, otherProject);
    const deleted = await createPolicy(owner, projectId);
    expect((await api.call(owner.apiKey, { method: 'DELETE', url: `/v1/projects/${projectId}/policies/${deleted}` })).statusCode).toBe(204);
    for (const policy of ['pol_aaaaaaaaaaaaaaaaaaaaaaaaaa', foreign, deleted]) {
      const response = await api.call(owner.apiKey, { method: 'POST', url: agents(), payload: { name: 'x', policy_profile_id: policy } });
      expect(response.statusCode).toBe(400);
      expect(problem(response).errors![0]!.field).toBe('policy_profile_id');
    }
  });

  it('answers 400 for a name outside 1-128 characters', async () => {
    for (const name of ['', 'x'.repeat(129), 'nul\u0000']) {
      const response = await api.call(owner.apiKey, { method: 'POST', url: agents(), payload: { name, policy_profile_id: policyId } });
      expect(response.statusCode).toBe(400);
      expect(problem(response).errors![0]!.field).toBe('name');
    }
  });
});

describe('transitions (spec §3.1)', () => {
  it('(new) + register → active, 201', async () => {
    const { credential } = await register();
    const response = await get(credential.id);
    expect(response.statusCode).toBe(200);
    expect(response.headers.etag).toBe('"0"');
    expect((response.json() as AgentCredential).status).toBe('active');
    expect(await events(credential.id)).toEqual(['CredentialRegistered']);
  });

  it('active + PATCH disabled → disabled, 200', async () => {
    const { credential } = await register();
    const response = await patch(credential.id, 'disabled');
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ id: credential.id, status: 'disabled' });
    expect(response.headers.etag).toBe('"1"');
    expect((await get(credential.id)).json()).toMatchObject({ status: 'disabled' });
    expect(await events(credential.id)).toEqual(['CredentialRegistered', 'CredentialDisabled']);
  });

  it('disabled + PATCH active → active, 200', async () => {
    const { credential } = await register();
    await patch(credential.id, 'disabled');
    const response = await patch(credential.id, 'active');
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ status: 'active' });
    expect(await events(credential.id)).toEqual(['CredentialRegistered', 'CredentialDisabled', 'CredentialEnabled']);
  });

  it('PATCH to the status it already has → 200, no event, same ETag', async () => {
    const { credential } = await register();
    const again = await patch(credential.id, 'active');
    expect(again.statusCode).toBe(200);
    expect(again.headers.etag).toBe('"0"');
    await patch(credential.id, 'disabled');
    const twice = await patch(credential.id, 'disabled');
    expect(twice.statusCode).toBe(200);
    expect(twice.json()).toMatchObject({ status: 'disabled' });
    expect(await events(credential.id)).toEqual(['CredentialRegistered', 'CredentialDisabled']);
  });

  it.each(['active', 'disabled'])('%s + DELETE → revoked, 204', async (from) => {
    const { credential } = await register();
    if (from === 'disabled') await patch(credential.id, 'disabled');
    const response = await revoke(credential.id);
    expect(response.statusCode).toBe(204);
    expect(response.body).toBe('');
    expect((await get(credential.id)).json()).toMatchObject({ status: 'revoked' });
    expect((await events(credential.id)).at(-1)).toBe('CredentialRevoked');
  });

  it.each(['active', 'disabled'])('revoked + PATCH %s → 409 INVALID_STATE, nothing recorded', async (status) => {
    const { credential } = await register();
    await revoke(credential.id);
    const response = await patch(credential.id, status);
    expect(response.statusCode).toBe(409);
    expect(problem(response).code).toBe('INVALID_STATE');
    expect(await events(credential.id)).toEqual(['CredentialRegistered', 'CredentialRevoked']);
  });

  it('revoked + rotate → 409 INVALID_STATE, nothing recorded', async () => {
    const { credential } = await register();
    await revoke(credential.id);
    const response = await rotate(credential.id);
    expect(response.statusCode).toBe(409);
    expect(problem(response).code).toBe('INVALID_STATE');
    expect(await events(credential.id)).toEqual(['CredentialRegistered', 'CredentialRevoked']);
  });

  it('revoked + DELETE → 409 INVALID_STATE (already revoked)', async () => {
    const { credential } = await register();
    await revoke(credential.id);
    const response = await revoke(credential.id);
    expect(response.statusCode).toBe(409);
    expect(problem(response).code).toBe('INVALID_STATE');
    expect(await events(credential.id)).toEqual(['CredentialRegistered', 'CredentialRevoked']);
  });

  it('active + rotate → active, 200, new secrets in place: same id and policy, the old ones stop working', async () => {
    const first = await register();
    const before = await storedRow(first.credential.id);
    const response = await rotate(first.credential.id);
    expect(response.statusCode).toBe(200);
    const second = response.json() as Secrets;
    expect(second.credential).toMatchObject({ id: first.credential.id, policy_profile_id: policyId, pg_username: first.credential.pg_username, status: 'active' });
    expect(passwordOf(second)).not.toBe(passwordOf(first));
    expect(second.mcp_token).not.toBe(first.mcp_token);
    const after = await storedRow(first.credential.id);
    expect([before.secret_version, after.secret_version]).toEqual([1, 2]);
    expect(await authenticates(passwordOf(second), after.scram)).toBe(true);
    expect(await authenticates(passwordOf(first), after.scram)).toBe(false);
    expect(matchesHash(second.mcp_token, after.token_hash)).toBe(true);
    expect(matchesHash(first.mcp_token, after.token_hash)).toBe(false);
    expect(await findCredentialByTokenHash(api.pool, sha256Hex(first.mcp_token))).toBeUndefined();
    expect((await findCredentialByTokenHash(api.pool, sha256Hex(second.mcp_token)))?.credential_id).toBe(first.credential.id);
    for (const secret of [passwordOf(first), first.mcp_token, before.scram.stored_key, before.token_hash, after.scram.stored_key, after.token_hash]) expect(response.body).not.toContain(secret);
    expect(await events(first.credential.id)).toEqual(['CredentialRegistered', 'CredentialRotated']);
    await rotate(first.credential.id);
    expect((await storedRow(first.credential.id)).secret_version).toBe(3);
  });

  it('disabled + rotate → 409 INVALID_STATE: rotation is defined from active only', async () => {
    const { credential } = await register();
    await patch(credential.id, 'disabled');
    const response = await rotate(credential.id);
    expect(response.statusCode).toBe(409);
    const body = problem(response);
    expect(body.code).toBe('INVALID_STATE');
    expect(body.detail).toMatch(/active only/);
    expect(await events(credential.id)).toEqual(['CredentialRegistered', 'CredentialDisabled']);
  });

  describe('active + time reaches expires_at → unusable, fail-closed at read time', () => {
    let refused: Secrets;
    let deleted: Secrets;

    beforeAll(async () => {
      const expiresAt = new Date(Date.now() + 1500).toISOString();
      refused = await register({ expires_at: expiresAt });
      deleted = await register({ expires_at: expiresAt });
      expect(refused.credential.expired).toBe(false);
      await new Promise((resolve) => setTimeout(resolve, Date.parse(expiresAt) - Date.now() + 50));
    });

    it('GET and list show expired: true while the stored status stays active, and the token no longer resolves', async () => {
      const response = await get(refused.credential.id);
      expect(response.json()).toMatchObject({ status: 'active', expired: true });
      const list = (await api.call(owner.apiKey, { method: 'GET', url: `${agents()}?page_size=100` })).json() as { agents: AgentCredential[] };
      expect(list.agents.find((a) => a.id === refused.credential.id)).toMatchObject({ status: 'active', expired: true });
      expect(await findCredentialByTokenHash(api.pool, sha256Hex(refused.mcp_token))).toBeUndefined();
    });

    it.each([
      ['rotate', () => rotate(refused.credential.id)],
      ['PATCH active', () => patch(refused.credential.id, 'active')],
    ])('expired + %s → 409 INVALID_STATE (expired)', async (_what, request) => {
      const response = await request();
      expect(response.statusCode).toBe(409);
      const body = problem(response);
      expect(body.code).toBe('INVALID_STATE');
      expect(body.detail).toMatch(/expired/);
      expect(await events(refused.credential.id)).toEqual(['CredentialRegistered']);
    });

    it('expired + DELETE → revoked, 204', async () => {
      expect((await revoke(deleted.credential.id)).statusCode).toBe(204);
      expect(await events(deleted.credential.id)).toEqual(['CredentialRegistered', 'CredentialRevoked']);
    });

    it('the sweep records exactly one CredentialExpired, even run twice, and none for a revoked credential', async () => {
      const now = new Date();
      expect(await sweepExpiredCredentials(api.store, api.pool, now)).toBe(1);
      expect(await awaitCaughtUp(api.store, api.pool, credentialsProjection, 5000)).toBe(true);
      expect(await sweepExpiredCredentials(api.store, api.pool, now)).toBe(0);
      expect(await events(refused.credential.id)).toEqual(['CredentialRegistered', 'CredentialExpired']);
      expect(await events(deleted.credential.id)).toEqual(['CredentialRegistered', 'CredentialRevoked']);
      expect(Date.parse((await storedRow(refused.credential.id)).expired_at!)).toBe(Date.parse(refused.credential.expires_at!));
      expect((await get(refused.credential.id)).json()).toMatchObject({ status: 'active', expired: true });
    });
  });
});

describe('rename (PATCH name)', () => {
  const rename = (id: string, payload: Record<string, unknown>, headers: Record<string, string> = {}) => api.call(owner.apiKey, { method: 'PATCH', url: agent(id), headers, payload });

  it('renames with one CredentialRenamed event; the list and the read model show the new name', async () => {
    const { credential } = await register({ name: 'before' });
    const response = await rename(credential.id, { name: 'nightly reporting' }, { 'if-match': '"0"' });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ id: credential.id, name: 'nightly reporting', status: 'active' });
    expect(response.headers.etag).toBe('"1"');
    expect(await events(credential.id)).toEqual(['CredentialRegistered', 'CredentialRenamed']);
    expect((await get(credential.id)).json()).toMatchObject({ name: 'nightly reporting' });
    expect((await storedRow(credential.id)).name).toBe('nightly reporting');
  });

  it('renames and disables in one request: both events in one append, one ETag step per event', async () => {
    const { credential } = await register({ name: 'both' });
    const response = await rename(credential.id, { name: 'both, disabled', status: 'disabled' });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ name: 'both, disabled', status: 'disabled' });
    expect(response.headers.etag).toBe('"2"');
    expect(await events(credential.id)).toEqual(['CredentialRegistered', 'CredentialRenamed', 'CredentialDisabled']);
  });

  it('the name it already has → 200, no event, same ETag', async () => {
    const { credential } = await register({ name: 'same' });
    const response = await rename(credential.id, { name: 'same' });
    expect(response.statusCode).toBe(200);
    expect(response.headers.etag).toBe('"0"');
    expect(await events(credential.id)).toEqual(['CredentialRegistered']);
  });

  it('revoked + PATCH name → 409 INVALID_STATE; a bad name or an empty body → 400; a stale If-Match → 412; nothing recorded', async () => {
    const { credential } = await register({ name: 'kept' });
    expect(problem(await rename(credential.id, { name: '' })).errors?.map((e) => e.field)).toEqual(['name']);
    expect(problem(await rename(credential.id, { name: 'x'.repeat(129) })).code).toBe('INVALID_INPUT');
    expect(problem(await rename(credential.id, {})).code).toBe('INVALID_INPUT');
    expect(problem(await rename(credential.id, { name: 'late' }, { 'if-match': '"7"' })).code).toBe('PRECONDITION_FAILED');
    await revoke(credential.id);
    const refused = await rename(credential.id, { name: 'after revoke' });
    expect(refused.statusCode).toBe(409);
    expect(problem(refused).code).toBe('INVALID_STATE');
    expect(await events(credential.id)).toEqual(['CredentialRegistered', 'CredentialRevoked']);
    expect((await get(credential.id)).json()).toMatchObject({ name: 'kept' });
  });
});

describe('secrets are never shown again', () => {
  it('list, get and PATCH responses and the read model carry no password, token or verifier', async () => {
    const secrets = await register();
    const id = secrets.credential.id;
    const row = await storedRow(id);
    const bodies = [
      (await api.call(owner.apiKey, { method: 'GET', url: `${agents()}?page_size=100` })).body,
      (await get(id)).body,
      (await patch(id, 'disabled')).body,
      (await patch(id, 'active')).body,
    ];
    for (const body of bodies) for (const secret of secretForms(secrets, row)) expect(body).not.toContain(secret);
    expect(bodies[0]).toContain(id);
    const { rows } = await api.pool.query<{ text: string }>('select coalesce(string_agg(to_jsonb(c)::text, E\'\\n\'), \'\') as text from rm.credentials c');
    expect(rows[0]!.text).not.toContain(passwordOf(secrets));
    expect(rows[0]!.text).not.toContain(secrets.mcp_token);
  });
});

describe('If-Match', () => {
  it('answers 412 for a stale ETag on PATCH, rotate and DELETE, and records nothing', async () => {
    const { credential } = await register();
    expect((await patch(credential.id, 'disabled', { 'if-match': '"0"' })).statusCode).toBe(200);
    const stale = { 'if-match': '"0"' };
    const responses = [
      await patch(credential.id, 'active', stale),
      await api.call(owner.apiKey, { method: 'POST', url: `${agent(credential.id)}/rotate`, headers: stale }),
      await api.call(owner.apiKey, { method: 'DELETE', url: agent(credential.id), headers: stale }),
    ];
    for (const response of responses) {
      expect(response.statusCode).toBe(412);
      expect(problem(response).code).toBe('PRECONDITION_FAILED');
    }
    expect(await events(credential.id)).toEqual(['CredentialRegistered', 'CredentialDisabled']);
    expect((await patch(credential.id, 'active', { 'if-match': '"1"' })).statusCode).toBe(200);
  });
});

describe('visibility, roles and the feature flag', () => {
  it('answers another organization’s credential exactly like a missing one', async () => {
    const other = await api.org('pro');
    const theirProject = await createProject(other);
    const theirPolicy = await createPolicy(other, theirProject);
    const response = await api.call(other.apiKey, { method: 'POST', url: agents(theirProject), payload: { name: 'theirs', policy_profile_id: theirPolicy } });
    const theirs = (response.json() as Secrets).credential.id;
    const missing = 'agt_aaaaaaaaaaaaaaaaaaaaaaaaaa';
    for (const [project, id] of [[theirProject, theirs], [projectId, theirs], [projectId, missing]] as const) {
      const attempts = [
        await api.call(owner.apiKey, { method: 'GET', url: agent(id, project) }),
        await api.call(owner.apiKey, { method: 'PATCH', url: agent(id, project), payload: { status: 'disabled' } }),
        await api.call(owner.apiKey, { method: 'POST', url: `${agent(id, project)}/rotate` }),
        await api.call(owner.apiKey, { method: 'DELETE', url: agent(id, project) }),
      ];
      for (const attempt of attempts) expect(problem(attempt).code).toBe('NOT_FOUND');
    }
    expect((await api.call(owner.apiKey, { method: 'GET', url: agents(theirProject) })).statusCode).toBe(404);
    expect(await events(theirs)).toEqual(['CredentialRegistered']);
  });

  it('lets a viewer read but not register, and a member register, disable and rotate but not revoke', async () => {
    const keyOf = async (role: string) => {
      const created = await api.call(owner.apiKey, { method: 'POST', url: `/v1/orgs/${owner.orgId}/api-keys`, payload: { name: role, role } });
      return (created.json() as { api_key: string }).api_key;
    };
    const viewer = await keyOf('viewer');
    const member = await keyOf('member');
    const { credential } = await register({}, member);
    expect((await api.call(viewer, { method: 'GET', url: agents() })).statusCode).toBe(200);
    expect((await api.call(viewer, { method: 'GET', url: agent(credential.id) })).statusCode).toBe(200);
    expect(problem(await api.call(viewer, { method: 'POST', url: agents(), payload: { name: 'v', policy_profile_id: policyId } })).code).toBe('FORBIDDEN');
    expect(problem(await api.call(viewer, { method: 'PATCH', url: agent(credential.id), payload: { status: 'disabled' } })).code).toBe('FORBIDDEN');
    expect((await api.call(member, { method: 'PATCH', url: agent(credential.id), payload: { status: 'disabled' } })).statusCode).toBe(200);
    expect((await api.call(member, { method: 'PATCH', url: agent(credential.id), payload: { status: 'active' } })).statusCode).toBe(200);
    expect((await api.call(member, { method: 'POST', url: `${agent(credential.id)}/rotate` })).statusCode).toBe(200);
    expect(problem(await api.call(member, { method: 'DELETE', url: agent(credential.id) })).code).toBe('FORBIDDEN');
  });

  it('answers 403 PLAN_LIMIT_REACHED on every agents endpoint when the organization lacks agent-gateway', async () => {
    const flagless = await api.org('pro', []);
    const project = await createProject(flagless);
    const policy = await createPolicy(flagless, project);
    const id = 'agt_aaaaaaaaaaaaaaaaaaaaaaaaaa';
    const attempts = [
      await api.call(flagless.apiKey, { method: 'POST', url: agents(project), payload: { name: 'x', policy_profile_id: policy } }),
      await api.call(flagless.apiKey, { method: 'GET', url: agents(project) }),
      await api.call(flagless.apiKey, { method: 'GET', url: agent(id, project) }),
      await api.call(flagless.apiKey, { method: 'PATCH', url: agent(id, project), payload: { status: 'disabled' } }),
      await api.call(flagless.apiKey, { method: 'POST', url: `${agent(id, project)}/rotate` }),
      await api.call(flagless.apiKey, { method: 'DELETE', url: agent(id, project) }),
    ];
    for (const attempt of attempts) {
      expect(attempt.statusCode).toBe(403);
      expect(problem(attempt).code).toBe('PLAN_LIMIT_REACHED');
    }
  });
});

describe('list', () => {
  it('pages through a project’s credentials with opaque tokens', async () => {
    const project = await createProject(owner);
    const policy = await createPolicy(owner, project);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await register({ name: `a${i}`, policy_profile_id: policy }, owner.apiKey, project)).credential.id);
    const seen: string[] = [];
    let token = '';
    do {
      const response = await api.call(owner.apiKey, { method: 'GET', url: `${agents(project)}?page_size=2${token ? `&page_token=${token}` : ''}` });
      const body = response.json() as { agents: AgentCredential[]; next_page_token: string };
      seen.push(...body.agents.map((a) => a.id));
      token = body.next_page_token;
    } while (token);
    expect(seen).toEqual([...ids].sort());
  });
});

describe('queries for other parts', () => {
  it('counts the live credentials that use a policy', async () => {
    const policy = await createPolicy(owner, projectId);
    const a = await register({ policy_profile_id: policy });
    await register({ policy_profile_id: policy });
    expect(await countLiveCredentialsUsingPolicy(api.pool, policy)).toBe(2);
    await patch(a.credential.id, 'disabled');
    expect(await countLiveCredentialsUsingPolicy(api.pool, policy)).toBe(2);
    await revoke(a.credential.id);
    expect(await countLiveCredentialsUsingPolicy(api.pool, policy)).toBe(1);
  });

  it('resolves an MCP token only while its credential is usable', async () => {
    const secrets = await register();
    const hash = sha256Hex(secrets.mcp_token);
    const found = await findCredentialByTokenHash(api.pool, hash);
    expect(found).toMatchObject({ credential_id: secrets.credential.id, project_id: projectId, policy_profile_id: policyId, status: 'active' });
    expect(found).not.toHaveProperty('scram');
    await patch(secrets.credential.id, 'disabled');
    expect(await findCredentialByTokenHash(api.pool, hash)).toBeUndefined();
    await patch(secrets.credential.id, 'active');
    expect(await findCredentialByTokenHash(api.pool, hash)).toBeDefined();
    await revoke(secrets.credential.id);
    expect(await findCredentialByTokenHash(api.pool, hash)).toBeUndefined();
  });
});

describe('Idempotency-Key on register', () => {
  /** A client retrying while the first attempt is in flight is told 409 CONFLICT with Retry-After; it waits and retries. */
  async function registerUntilServed(key: string, name: string): Promise<LightMyRequestResponse> {
    for (let attempt = 0; attempt < 500; attempt++) {
      const response = await api.call(owner.apiKey, { method: 'POST', url: agents(), headers: { 'idempotency-key': key }, payload: { name, policy_profile_id: policyId } });
      if (response.statusCode !== 409 || (response.json() as { code: string }).code !== 'CONFLICT') return response;
      expect(response.headers['retry-after']).toBe('1');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error('the first attempt never finished');
  }

  it('creates exactly one credential however often, and however concurrently, the same request is retried; every body is identical', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 2, max: 6 }), fc.boolean(), async (n, concurrent) => {
        run++;
        const key = `register-${run}-${n}-${concurrent}`;
        const name = `idempotent ${key}`;
        const responses: LightMyRequestResponse[] = [];
        if (concurrent) responses.push(...(await Promise.all(Array.from({ length: n }, () => registerUntilServed(key, name)))));
        else for (let i = 0; i < n; i++) responses.push(await registerUntilServed(key, name));
        expect(responses.map((r) => r.statusCode)).toEqual(Array(n).fill(201));
        expect(new Set(responses.map((r) => r.body)).size).toBe(1);
        const { rows } = await api.pool.query(`select count(*)::int as n from pgward.events where type = 'CredentialRegistered.v1' and convert_from(data, 'utf8')::jsonb->>'name' = $1`, [name]);
        expect(rows[0].n).toBe(1);
        const secrets = responses[0]!.json() as Secrets;
        expect(await authenticates(passwordOf(secrets), (await storedRow(secrets.credential.id)).scram)).toBe(true);
      }),
      { numRuns: 8 },
    );
  });

  it('refuses the same key with another body, and keeps the stored response sealed', async () => {
    const first = await registerUntilServed('register-reused', 'first body');
    const reused = await api.call(owner.apiKey, { method: 'POST', url: agents(), headers: { 'idempotency-key': 'register-reused' }, payload: { name: 'other body', policy_profile_id: policyId } });
    expect(reused.statusCode).toBe(409);
    expect(problem(reused).code).toBe('IDEMPOTENCY_KEY_REUSED');
    const stored = await api.pool.query<{ body: string }>(`select body from pgward.idempotency_keys where key = 'register-reused'`);
    expect(stored.rows[0]!.body).not.toContain((first.json() as Secrets).mcp_token);
  });
});

describe('OpenAPI', () => {
  it('documents the six operations under the agents tag', async () => {
    const doc = (await api.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json() as { paths: Record<string, Record<string, { operationId: string; tags: string[] }>> };
    const operations = Object.values(doc.paths).flatMap((methods) => Object.values(methods)).filter((o) => o.tags.includes('agents'));
    expect(operations.map((o) => o.operationId).sort()).toEqual(
      ['getAgentCredential', 'listAgentCredentials', 'registerAgentCredential', 'revokeAgentCredential', 'rotateAgentCredential', 'updateAgentCredential'],
    );
  });
});
