import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { auditStream } from '../../projections/audit.js';
import { projectionsFor } from '../../projections/index.js';
import { StatementDecided, StatementDecidedV1 } from '../../src/events/audit.js';
import { connectionStream } from '../../projections/connections.js';
import { WireSessionClosed, WireSessionOpened } from '../../src/events/connections.js';
import { encodeEvent } from '../../src/events/envelope.js';
import { rebuildAndVerify } from '../../projections/maintenance.js';
import { startApi, type TestApi } from '../support/api.js';
import { approval, approvalStream } from '../../commands/approvals/approval.js';
import { handle } from '../../commands/handle.js';
import { newId } from '../../src/ids.js';
import { branch } from '../../commands/branches/branch.js';
import { domain } from '../../commands/domains/domain.js';
import { newOperatorToken } from '../../src/auth/operators.js';
import { recordConsents } from '../../commands/identity/consents.js';
import { createOrganizationForUser } from '../../commands/organizations/create-organization.js';
import type { MembershipCommand } from '../../commands/organizations/memberships.js';
import { organization } from '../../commands/organizations/organization.js';
import { sha256Hex } from '../../src/crypto/tokens.js';
import { placed } from '../support/decisions.js';

let api: TestApi;
const operator = newOperatorToken('ops');

beforeAll(async () => {
  api = await startApi('read_models', { PGWARD_OPERATOR_TOKENS: operator.entry, PGWARD_PRICES: 'createDemoCredential:pro=50' });
});
afterAll(async () => {
  await api?.stop();
});

const database = { host: '127.0.0.1', port: 5432, name: 'postgres', username: 'postgres', password: 'pw' };

/** Exercises every write of the control plane, so every read model has rows of every shape. */
async function workload(): Promise<void> {
  const { orgId, apiKey } = await api.org('scale');
  const call = (method: 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, payload?: object) => api.call(apiKey, { method, url, ...(payload ? { payload } : {}) });
  const key = (await call('POST', `/v1/orgs/${orgId}/api-keys`, { name: 'ci', role: 'member' })).json() as { key: { id: string } };
  await call('DELETE', `/v1/orgs/${orgId}/api-keys/${key.key.id}`);
  for (let p = 0; p < 3; p++) {
    const project = (await call('POST', '/v1/projects', { name: `p${p}`, org_id: orgId, database, tags: ['a', 'b'], self_hosted: p === 0 })).json() as { project: { id: string }; database: { id: string } };
    const base = `/v1/projects/${project.project.id}`;
    await call('PATCH', base, { description: `project ${p}` });
    const second = (await call('POST', `${base}/databases`, { ...database, name: 'analytics', role: 'analytics' })).json() as { id: string };
    await call('PATCH', `${base}/databases/${second.id}`, { query_timeout_ms: 5000, password: 'rotated' });
    const replica = (await call('POST', `${base}/databases/${project.database.id}/replicas`, { host: '10.0.0.2', port: 5433 })).json() as { id: string };
    if (p === 1) await call('DELETE', `${base}/databases/${project.database.id}/replicas/${replica.id}`);
    if (p === 2) await call('DELETE', `${base}/databases/${second.id}`);
    if (p === 0) {
      const enrollment = (await call('POST', `${base}/self-host-enrollments`, { description: 'rack', region_label: 'dc-1', expires_at: '2999-01-01T00:00:00.000Z' })).json() as { id: string };
      await call('POST', `${base}/self-host-enrollments/${enrollment.id}/revoke`);
      await call('POST', `${base}/self-host-enrollments`, {});
    }
    const canary = (await call('POST', `${base}/honeytokens`, { kind: 'table', target: 'public.api_keys', disable_credential: p === 0 })).json() as { id: string };
    const removed = (await call('POST', `${base}/honeytokens`, { kind: 'value', target: `canary ${p}` })).json() as { id: string };
    await call('DELETE', `${base}/honeytokens/${removed.id}`);
    const policy = (await call('POST', `${base}/policies`, { name: 'ro', allowed_tables: ['public.orders'], masked_columns: { 'public.orders.email': 'hash' }, honeytokens: [canary.id] })).json() as { id: string };
    await call('PATCH', `${base}/policies/${policy.id}`, { max_rows: 50 });
    const agent = (await call('POST', `${base}/agents`, { name: `agent ${p}`, policy_profile_id: policy.id })).json() as { credential: { id: string } };
    await call('PATCH', `${base}/agents/${agent.credential.id}`, { name: `renamed agent ${p}` });
    await appendAuditDecision(project.project.id, p);
    await call('PUT', `${base}/anomaly-rules`, { rules: { volume_spike: { sigma: 5 } }, credentials: { [agent.credential.id]: { error_spike: { floor: 20 } } } });
    await appendAgentActivity(project.project.id, agent.credential.id, p);
    const held = await holdStatement(project.project.id, project.database.id, policy.id, agent.credential.id);
    await call('POST', `${base}/approvals/${held}/${p === 1 ? 'reject' : 'approve'}`, { reason: `decided ${p}` });
    const hook = (await call('POST', `${base}/webhooks`, { url: `https://hooks.example.com/${p}`, event_types: ['canary_tripped', 'audit_checkpoint'], description: `hook ${p}` })).json() as { id: string };
    await call('PATCH', `${base}/webhooks/${hook.id}`, { enabled: p !== 1 });
    await call('POST', `${base}/webhooks/${hook.id}/rotate-secret`, { grace_period_seconds: 60 });
    await call('POST', `${base}/webhooks/${hook.id}/test`);
    if (p === 1) await call('DELETE', `${base}/webhooks/${hook.id}`);
    await call('PUT', `${base}/ip-rules`, { allow: [{ cidr: '10.0.0.0/8', label: `office ${p}` }], deny: [{ cidr: '10.6.6.6' }] });
    if (p === 1) await call('PUT', `${base}/ip-rules`, { deny: [{ cidr: '2001:db8::/32' }] });
    await call('PATCH', `${base}/databases/${project.database.id}/cache/rules/${'ab'.repeat(8)}`, { cache_enabled: p === 1, cache_ttl_seconds: 5 });
    if (p === 0) await call('PATCH', `${base}/databases/${project.database.id}/cache/rules/${'ab'.repeat(8)}`, { cache_swr_seconds: 0 });
    await call('POST', `${base}/databases/${project.database.id}/cache/purge`);
    await appendShapeRuns(project.project.id, agent.credential.id, p);
    const site = (await call('POST', `${base}/domains`, { domain: `db${p}.example.com` })).json() as { id: string };
    if (p === 0) await handle(api.store, `domain-${site.id}`, domain, { kind: 'verify', recordName: `_pgward.db${p}.example.com` }, { correlationId: 'test', actor: 'test' });
    if (p === 1) await call('DELETE', `${base}/domains/${site.id}`);
    await branchEvents(project.project.id, project.database.id, p);
    if (p === 2) await call('DELETE', base);
  }
  await supportWorkload(orgId, call);
  await crmWorkload(call);
  await peopleWorkload();
}

/**
 * What a sign-up records (docs/identity.md): a person's organization with them as owner, their
 * consents, a withdrawn one; then invitations (accepted, revoked, pending), a role change and a removal.
 */
async function peopleWorkload(): Promise<void> {
  const context = { correlationId: 'test', actor: 'test' };
  const people = [newId('usr_'), newId('usr_'), newId('usr_')];
  const orgs: string[] = [];
  for (const [i, userId] of people.entries()) {
    orgs.push(await createOrganizationForUser(api.store, { name: `org of ${userId}`, plan: 'free', userId }, context));
    const consents = [{ documentType: 'terms_of_service', documentVersion: '2026-11-01', accepted: true }, { documentType: 'marketing_emails', documentVersion: '1', accepted: false }] as const;
    await recordConsents(api.store, { userId, ip: i === 0 ? null : '203.0.113.9', consents }, context);
  }
  const orgId = orgs[0]!;
  const command = (c: MembershipCommand) => handle(api.store, `org-${orgId}`, organization, c, context);
  const invitations = [newId('inv_'), newId('inv_'), newId('inv_'), newId('inv_')];
  for (const [i, invitationId] of invitations.entries()) {
    await command({ kind: 'invite', orgId, invitationId, email: `person${i}@example.com`, role: i === 0 ? 'admin' : 'viewer', tokenHash: sha256Hex(`token ${i}`) });
  }
  for (const [i, userId] of people.slice(1).entries()) {
    await command({ kind: 'accept-invitation', orgId, invitationId: invitations[i]!, token: `token ${i}`, userId, email: `person${i}@example.com` });
  }
  await command({ kind: 'revoke-invitation', orgId, invitationId: invitations[2]! });
  await command({ kind: 'change-member-role', orgId, userId: people[1]!, role: 'member', actorRole: 'owner' });
  await command({ kind: 'remove-member', orgId, userId: people[2]!, actorRole: 'owner', self: false });
}

/** Support cases from both sides, cancellation feedback, an operator's billing record and two credit top-ups. */
async function supportWorkload(orgId: string, call: (method: 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, payload?: object) => Promise<LightMyRequestResponse>): Promise<void> {
  for (let c = 0; c < 2; c++) {
    const opened = (await call('POST', '/v1/support-cases', { org_id: orgId, title: `case ${c}`, body: 'help', severity: c + 1 })).json() as { id: string };
    await call('POST', `/v1/support-cases/${opened.id}/messages`, { body: `more ${c}` });
    await api.call(operator.token, { method: 'POST', url: `/v1/operator/support-cases/${opened.id}/messages`, payload: { body: `answer ${c}` } });
    if (c === 1) await api.call(operator.token, { method: 'POST', url: `/v1/operator/support-cases/${opened.id}/close` });
  }
  await call('POST', `/v1/orgs/${orgId}/cancellation-feedback`, { reason: 'too_expensive', feedback: 'monthly only' });
  await api.call(operator.token, { method: 'PATCH', url: `/v1/operator/orgs/${orgId}/billing`, payload: { billing_provider: 'stripe', subscription_status: 'past_due' } });
  for (const amount of [500, 250]) {
    const topUp = await api.call(operator.token, { method: 'POST', url: `/v1/operator/orgs/${orgId}/credits/top-ups`, headers: { 'idempotency-key': `top-up-${amount}` }, payload: { amount, reference: `pi_${amount}` } });
    expect(topUp.statusCode).toBe(201);
  }
}

/** The CRM: every record type created, changed and deleted, an artifact through its transitions, the context set. */
async function crmWorkload(call: (method: 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, payload?: object) => Promise<LightMyRequestResponse>): Promise<void> {
  const created = async (collection: string, payload: object) => ((await call('POST', `/v1/crm/${collection}`, payload)).json() as { id: string }).id;
  const company = await created('companies', { name: 'Example', domain: 'Example.COM' });
  await call('PATCH', `/v1/crm/companies/${company}`, { industry: 'Retail' });
  await call('DELETE', `/v1/crm/companies/${await created('companies', { name: 'Gone' })}`);
  const contact = await created('contacts', { name: 'Ada', company_id: company, email: 'ada@example.com' });
  const deal = await created('deals', { name: 'Pilot', company_id: company, contact_ids: [contact], amount: '100' });
  await call('PATCH', `/v1/crm/deals/${deal}`, { stage: 'won' });
  const task = await created('research-tasks', { subject_type: 'contact', subject_id: contact, role: 'outreach', title: 'Write' });
  await call('PATCH', `/v1/crm/research-tasks/${task}`, { status: 'done' });
  const draft = await created('artifacts', { subject_type: 'contact', subject_id: contact, task_id: task, kind: 'outreach_email', title: 'Hi' });
  await call('PATCH', `/v1/crm/artifacts/${draft}`, { body: 'Dear Ada' });
  await call('POST', `/v1/crm/artifacts/${draft}/approve`);
  await call('POST', `/v1/crm/artifacts/${draft}/send`);
  await call('PUT', '/v1/crm/context', { positioning: 'A gateway', tone: 'plain' });
}

/** A branch's life as the copier records it (no real copy: the read models are what is exercised here). */
async function branchEvents(projectId: string, databaseId: string, p: number): Promise<void> {
  const branchId = newId('brn_');
  const run = (command: Parameters<typeof branch.decide>[1]) => handle(api.store, `branch-${branchId}`, branch, command, { correlationId: 'test', actor: 'test' });
  await run({ kind: 'create', branch: { branch_id: branchId, project_id: projectId, database_id: databaseId, name: `b${p}`, database_name: `pgward_branch_${branchId.slice(4)}` } });
  await run(p === 1 ? { kind: 'fail', reason: 'permission denied to create database' } : { kind: 'ready', method: p === 0 ? 'template' : 'logical' });
  if (p === 2) await run({ kind: 'delete' });
}

/** What the proxy records for a statement its policy holds for approval. */
async function holdStatement(projectId: string, databaseId: string, policyId: string, credentialId: string): Promise<string> {
  const approvalId = newId('apr_');
  const sql = 'update orders set total = 0 where id = 1';
  await handle(api.store, approvalStream(approvalId), approval, {
    kind: 'request',
    request: {
      approval_id: approvalId, project_id: projectId, database_id: databaseId, policy_profile_id: policyId, credential_id: credentialId, session_id: 'px.1.1', region: 'local',
      sql, normalized_sql: sql, statement_kind: 'update', target_tables: ['public.orders'], estimated_rows: null, expires_at: '2099-01-01T00:00:00.000Z', source: 'wire',
      policy_version: 2, binding: 'd'.repeat(64), hold_rule: 'approval.held_kind', hold_reason: 'held',
    },
  }, { correlationId: 'test', actor: 'proxy:test' });
  return approvalId;
}

/**
 * An agent's statements over three hours, the last a tripped honeytoken: the anomaly projections get
 * windows, a baseline of the closed hours, query shapes, and a detection (raised as an alert).
 */
async function appendAgentActivity(projectId: string, credentialId: string, p: number): Promise<void> {
  const at = (hour: number, n: number) => new Date(Date.UTC(2026, 0, 2, hour, 0, n)).toISOString();
  const events = [0, 1, 2].map((hour) => {
    const event = hour === 2 ? ('canary_tripped' as const) : ('query' as const);
    const decision = {
      event, project_id: projectId, credential_id: credentialId, session_id: `agent.${p}`, source: 'wire' as const, region: 'local', client_ip: '127.0.0.1',
      ts: at(hour, p), sql: `select ${hour}`, normalized_sql: 'select $1', query_hash: `${hour}`.repeat(16), statement_kind: 'select', decision_rule: event === 'query' ? '' : 'honeytoken.table', reason: '',
      cache_status: 'bypass' as const, rows_returned: '1', bytes_out: '12', latency_us: 100, tables_read: [], tables_written: [], tables_blocked: [], parsed: true,
      proxy_id: 'rm-agent', boot_epoch: 1, seq: String(10 * p + hour + 1), approval_id: null,
    };
    // v1, as a store written before StatementDecided v2 holds them: the rebuild reads both versions.
    return encodeEvent(StatementDecidedV1, decision, { event_id: randomUUID(), correlation_id: 'ingest', actor: 'ingest', at: decision.ts });
  });
  await api.store.append(auditStream(projectId), events, 'any');
}

/** Runs of one statement shape, in two appends (so a rebuild batches them otherwise): misses, hits and refreshes that return the same result or another. */
async function appendShapeRuns(projectId: string, credentialId: string, p: number): Promise<void> {
  const runs = [['miss', '3'], ['hit', '3'], ['miss', '3'], ['bypass', '4'], ['stale', '4'], ['miss', '4']] as const;
  const events = runs.map(([cache_status, rows], n) => {
    const decision = placed({
      event: 'query' as const, project_id: projectId, credential_id: credentialId, session_id: `shape.${p}`, source: 'wire' as const, region: 'local', client_ip: '127.0.0.1',
      ts: new Date(Date.UTC(2026, 0, 3, 0, 0, n)).toISOString(), sql: 'select * from orders where id < 4', normalized_sql: 'select * from orders where id < $1', query_hash: 'ab'.repeat(8),
      statement_kind: 'select', decision_rule: '', reason: '', cache_status, rows_returned: rows, bytes_out: String(10 * Number(rows)), latency_us: 1000 + 100 * n,
      tables_read: ['public.orders'], tables_written: [], tables_blocked: [], parsed: true, proxy_id: 'rm-shape', boot_epoch: 1, seq: String(10 * p + n + 1), approval_id: null,
    });
    return encodeEvent(StatementDecided, decision, { event_id: randomUUID(), correlation_id: 'ingest', actor: 'ingest', at: decision.ts });
  });
  await api.store.append(auditStream(projectId), events.slice(0, 3), 'any');
  await api.store.append(auditStream(projectId), events.slice(3), 'any');
}

/** What ingest appends for a decision the proxy made, so the audit chain has entries too. */
async function appendAuditDecision(projectId: string, n: number): Promise<void> {
  const decision = placed({
    event: 'query' as const, project_id: projectId, credential_id: null, session_id: `s.${n}`, source: 'wire' as const, region: 'local', client_ip: '127.0.0.1',
    ts: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString(), sql: `select ${n}`, normalized_sql: '', query_hash: '', statement_kind: 'select', decision_rule: '', reason: '',
    cache_status: 'bypass' as const, rows_returned: '1', bytes_out: '12', latency_us: 100 + n, tables_read: [], tables_written: [], tables_blocked: [], parsed: false,
    proxy_id: 'rm-test', boot_epoch: 1, seq: String(n + 1), approval_id: null,
  });
  const meta = { event_id: randomUUID(), correlation_id: 'ingest', actor: 'ingest', at: decision.ts };
  await api.store.append(auditStream(projectId), [encodeEvent(StatementDecided, decision, meta), encodeEvent(StatementDecided, { ...decision, seq: String(n + 100) }, { ...meta, event_id: randomUUID() })], 'any');
  // Its session's connection, as ingest appends the proxy's marks (closed, then opened: ingest may append them in either order).
  const mark = (at: string) => ({ event_id: randomUUID(), correlation_id: 'ingest', actor: 'ingest', at });
  await api.store.append(connectionStream(projectId), [
    encodeEvent(WireSessionClosed, { project_id: projectId, session_id: `s.${n}`, at: '2026-01-01T01:00:00.000Z' }, mark('2026-01-01T01:00:00.000Z')),
    encodeEvent(WireSessionOpened, { project_id: projectId, session_id: `s.${n}`, credential_id: `agt_${'c'.repeat(26)}`, at: '2026-01-01T00:00:00.000Z' }, mark('2026-01-01T00:00:00.000Z')),
  ], 'any');
}

describe('read models', () => {
  it('rebuild --verify reproduces every read model byte for byte after a control-plane workload', async () => {
    await workload();
    for (const projection of projectionsFor({ auditKeys: { keys: new Map() } })) {
      const result = await rebuildAndVerify(api.store, api.pool, projection);
      expect({ name: result.name, identical: result.identical }).toEqual({ name: projection.name, identical: true });
      expect({ name: result.name, empty: Object.entries(result.live).filter(([, table]) => table.rows === 0).map(([table]) => table) }).toEqual({ name: projection.name, empty: [] });
    }
    // Each agent's shape: 6 entries, 4 runs upstream, 3 refreshes of which 2 returned the run before's rows and bytes (one across the appends).
    const { rows } = await api.pool.query(`select calls, runs, refreshes, same_results from rm.cache_shapes where query_hash = $1`, ['ab'.repeat(8)]);
    expect(rows).toEqual([0, 1, 2].map(() => ({ calls: 6n, runs: 4n, refreshes: 3n, same_results: 2n })));
  });
});
