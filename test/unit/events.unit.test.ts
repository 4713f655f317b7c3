import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalBytes } from '../../src/crypto/canonical-json.js';
import { AuditEventKind, decisionGroup, StatementDecided, StatementDecidedV1 } from '../../src/events/audit.js';
import { catalog, type CatalogEvent, decodeEvent, eventDefinition, UnknownEventType } from '../../src/events/catalog.js';
import { CredentialRegistered } from '../../src/events/credentials.js';
import { DatabaseRegistered, DatabaseUpdated } from '../../src/events/databases.js';
import { encodeEvent, type EventDefinition, type EventMetadata } from '../../src/events/envelope.js';
import { idSchema, Int64String, SealedSecret, text } from '../../src/events/fields.js';
import { HoneytokenCreated } from '../../src/events/honeytokens.js';
import { AnomalyRaised } from '../../src/events/anomalies.js';
import { PolicyProfileCreated } from '../../src/events/policies.js';
import { ProjectHashKeyGenerated } from '../../src/events/projects.js';
import type { RecordedEvent } from '../../src/store/port.js';

const id = (prefix: string) => `${prefix}01j9zq8x4m7k2n5p6r3s8t0v1w`;
const b64 = (bytes: number, fill = 7) => Buffer.alloc(bytes, fill).toString('base64');
const at = '2025-03-01T12:00:00.000Z';
const metadata: EventMetadata = {
  event_id: '0195509a-3c00-7000-8000-000000000001',
  correlation_id: 'req-1',
  actor: 'usr_1',
  at,
};

const sealed = { alg: 'AES-256-GCM', key_id: 'seal-2025', iv: b64(12), ciphertext: b64(24), tag: b64(16) };
const scram = { iterations: 4096, salt: b64(16), stored_key: b64(32, 1), server_key: b64(32, 2) };
const hash = 'ab'.repeat(32);
const pool = { mode: 'transaction', max_connections: 20, min_connections: 0, idle_timeout_ms: 600_000, acquire_timeout_ms: 5_000 };
const cache = { enabled: true, ttl_seconds: 60, max_entries: 10_000, swr_seconds: 30 };
const policy = {
  name: 'read mostly',
  read_only: true,
  allowed_tables: ['public.orders', 'public.customers'],
  masked_columns: { 'public.customers.email': 'hash', 'public.customers.phone': 'partial' },
  max_rows: 1000,
  queries_per_day: 0,
  bytes_per_month: '0',
  approval: { held_kinds: ['update', 'delete'], row_threshold: null, expiry_seconds: 3600 },
  honeytokens: [id('hnt_')],
  audit_mode: 'best_effort',
  allow_catalog: false,
};
const statement = {
  event: 'query',
  project_id: id('prj_'),
  credential_id: id('agt_'),
  session_id: 'px1:42',
  source: 'wire',
  region: 'eu-west-1',
  client_ip: '203.0.113.9',
  ts: at,
  sql: "SELECT * FROM orders WHERE id = 'é😀'",
  normalized_sql: 'SELECT * FROM orders WHERE id = $1',
  query_hash: 'c0ffee00c0ffee00',
  statement_kind: 'select',
  decision_rule: '',
  reason: '',
  cache_status: 'miss',
  rows_returned: '1',
  bytes_out: '128',
  latency_us: 1834,
  tables_read: ['orders'],
  tables_written: [],
  tables_blocked: [],
  parsed: true,
  proxy_id: 'px1',
  boot_epoch: 1740830400000,
  seq: '9007199254740993',
  approval_id: null,
};

/** v2: v1's members and where the statement ran. */
const statementV2 = { ...statement, ran_on: 'replica', replica_id: id('rep_'), upstream_region: 'eu-west-1' };

const definitions: readonly EventDefinition[] = catalog;

/** One valid payload per stored type. */
const samples: Record<string, Record<string, unknown>> = {
  'SelfHostEnrollmentCreated.v1': { enrollment_id: id('enr_'), project_id: id('prj_'), org_id: id('org_'), description: 'rack 4', region_label: 'dc-1', token_hash: hash, token_prefix: 'pgw_enr_ab12', expires_at: null },
  'SelfHostEnrollmentRevoked.v1': { enrollment_id: id('enr_') },
  'OrganizationCreated.v1': { org_id: id('org_'), name: 'Acme', plan: 'pro', features: ['agent-gateway'] },
  'OrganizationPlanChanged.v1': { org_id: id('org_'), plan: 'scale', features: [] },
  'ApiKeyCreated.v1': { org_id: id('org_'), key_id: id('key_'), name: 'ci', role: 'admin', prefix: 'pgw_ab12', token_hash: hash },
  'ApiKeyRevoked.v1': { org_id: id('org_'), key_id: id('key_') },
  'OrganizationBillingChanged.v1': { org_id: id('org_'), billing_provider: 'stripe', subscription_status: 'past_due' },
  'OrganizationMemberAdded.v1': { org_id: id('org_'), user_id: id('usr_'), role: 'owner' },
  'OrganizationMemberRoleChanged.v1': { org_id: id('org_'), user_id: id('usr_'), role: 'viewer' },
  'OrganizationMemberRemoved.v1': { org_id: id('org_'), user_id: id('usr_') },
  'OrganizationInvitationCreated.v1': { org_id: id('org_'), invitation_id: id('inv_'), email: 'ada@example.com', role: 'admin', token_hash: hash, expires_at: '2026-12-03T12:00:00.000Z' },
  'OrganizationInvitationRevoked.v1': { org_id: id('org_'), invitation_id: id('inv_') },
  'OrganizationInvitationAccepted.v1': { org_id: id('org_'), invitation_id: id('inv_'), user_id: id('usr_') },
  'ConsentRecorded.v1': { consent_id: id('cns_'), user_id: id('usr_'), document_type: 'terms_of_service', document_version: '2026-11-01', accepted: true, accepted_at: '2026-11-26T12:00:00.000Z', ip_address: '203.0.113.7' },
  'ProjectCreated.v1': {
    project_id: id('prj_'),
    org_id: id('org_'),
    name: 'shop',
    description: '',
    cloud: 'aws',
    self_hosted: false,
    tags: ['prod'],
  },
  'ProjectUpdated.v1': { project_id: id('prj_'), changes: { description: 'the shop' } },
  'ProjectDeleted.v1': { project_id: id('prj_') },
  'ProjectHashKeyGenerated.v1': { project_id: id('prj_'), key: sealed },
  'DatabaseRegistered.v1': {
    database_id: id('db_'),
    project_id: id('prj_'),
    host: 'db.internal',
    port: 5432,
    name: 'shop',
    username: 'app',
    password: sealed,
    ssl_mode: 'verify-full',
    role: 'primary',
    pool_config: pool,
    cache_config: cache,
    pool_region: '',
    auto_read_routing: false,
    query_timeout_ms: 0,
  },
  'DatabaseUpdated.v1': { database_id: id('db_'), changes: { port: 6432, cache_config: { ...cache, enabled: false } } },
  'DatabaseRemoved.v1': { database_id: id('db_') },
  'ReplicaAdded.v1': { replica_id: id('rep_'), database_id: id('db_'), host: '10.0.0.7', port: 5432, ssl_mode: 'require' },
  'ReplicaRemoved.v1': { replica_id: id('rep_'), database_id: id('db_') },
  'ReplicaUpdated.v1': { replica_id: id('rep_'), database_id: id('db_'), changes: { port: 5433 } },
  'CacheRuleSet.v1': { project_id: id('prj_'), database_id: id('db_'), query_hash: '0123456789abcdef', cache_enabled: false, cache_ttl_seconds: 300, cache_swr_seconds: null },
  'CachePurged.v1': { project_id: id('prj_'), database_id: id('db_') },
  'PolicyProfileCreated.v1': { policy_id: id('pol_'), project_id: id('prj_'), ...policy },
  'PolicyProfileUpdated.v1': { policy_id: id('pol_'), changes: { read_only: false, max_rows: null }, version: 2 },
  'PolicyProfileDeleted.v1': { policy_id: id('pol_') },
  'CredentialRegistered.v1': {
    credential_id: id('agt_'),
    project_id: id('prj_'),
    database_id: id('db_'),
    policy_profile_id: id('pol_'),
    name: 'support bot',
    pg_username: 'agt_support',
    principal_type: 'agent',
    scram,
    token_hash: hash,
    token_prefix: 'pgwa_x9',
    expires_at: null,
  },
  'CredentialRotated.v1': { credential_id: id('agt_'), scram, token_hash: hash, token_prefix: 'pgwa_y1', secret_version: 2 },
  'CredentialRenamed.v1': { credential_id: id('agt_'), name: 'nightly reporting' },
  'CredentialDisabled.v1': { credential_id: id('agt_'), reason: 'runaway loop' },
  'CredentialEnabled.v1': { credential_id: id('agt_') },
  'CredentialRevoked.v1': { credential_id: id('agt_'), reason: '' },
  'CredentialExpired.v1': { credential_id: id('agt_'), expired_at: at },
  'CredentialUsed.v1': { credential_id: id('agt_'), used_at: at },
  'DemoProvisioned.v1': { org_id: id('org_'), project_id: id('prj_'), database_id: id('db_'), tiers: [{ tier: 'free', policy_id: id('pol_') }] },
  'DemoPaused.v1': { reason: 'abuse from one address' },
  'CreditsToppedUp.v1': { org_id: id('org_'), amount: 5000, currency: 'usd', reference: 'pi_3Nc0ffee' },
  'CreditsCharged.v1': { org_id: id('org_'), challenge_id: 'x'.repeat(43), amount: 50, currency: 'usd', operation: 'createDemoCredential:pro' },
  'CreditsRefunded.v1': { org_id: id('org_'), challenge_id: 'x'.repeat(43), amount: 50, currency: 'usd', reason: 'the request failed with 503' },
  'DemoResumed.v1': {},
  'ApprovalRequested.v1': {
    approval_id: id('apr_'),
    project_id: id('prj_'),
    database_id: id('db_'),
    policy_profile_id: id('pol_'),
    credential_id: null,
    session_id: 'px1:43',
    region: 'eu-west-1',
    sql: 'DELETE FROM orders WHERE created_at < now()',
    normalized_sql: 'DELETE FROM orders WHERE created_at < now()',
    statement_kind: 'delete',
    target_tables: ['orders'],
    estimated_rows: '12000',
    expires_at: '2025-03-01T13:00:00.000Z',
    source: 'wire',
    policy_version: 3,
    binding: 'a'.repeat(64),
    hold_rule: 'approval.held_kind',
    hold_reason: 'it runs a statement of kind delete',
  },
  'ApprovalApproved.v1': { approval_id: id('apr_'), decided_by: 'usr_1', reason: 'cleanup ticket 12' },
  'ApprovalRejected.v1': { approval_id: id('apr_'), decided_by: 'usr_1', reason: '' },
  'ApprovalExpired.v1': { approval_id: id('apr_'), expired_at: at },
  'ApprovalExecutionStarted.v1': { approval_id: id('apr_'), executor: 'wire:px1.1.43' },
  'ApprovalExecuted.v1': { approval_id: id('apr_'), rows_affected: '11873' },
  'ApprovalFailed.v1': { approval_id: id('apr_'), sqlstate: '40P01', message: 'deadlock detected' },
  'StatementDecided.v1': statement,
  'StatementDecided.v2': statementV2,
  'AuditGapRecorded.v1': {
    project_id: id('prj_'),
    proxy_id: null,
    boot_epoch: null,
    from_seq: '17',
    to_seq: '20',
    count: null,
    reason: 'buffer_overflow',
    ts: at,
  },
  'AuditCheckpointSigned.v1': {
    project_id: id('prj_'),
    size: '1024',
    root: b64(32),
    chain_start_seq: '1',
    key_id: 'anchor-1',
    signature: b64(64),
    signed_at: at,
  },
  'AnomalyRaised.v1': {
    anomaly_id: id('ano_'),
    project_id: id('prj_'),
    credential_id: id('agt_'),
    kind: 'egress_spike',
    severity: 'warning',
    title: 'Egress 12x baseline',
    details: { bytes_out: '734003200', baseline_bytes: 61_166_933, tables: ['orders'], nested: { ok: true, none: null } },
    window_start: '2025-03-01T11:00:00.000Z',
    window_end: at,
  },
  'AnomalyAcknowledged.v1': { anomaly_id: id('ano_'), acknowledged_by: 'usr_2' },
  'AnomalyResolved.v1': { anomaly_id: id('ano_'), resolved_by: 'usr_2' },
  'AnomalyRulesSet.v1': {
    project_id: id('prj_'),
    rules: { volume_spike: { sigma_milli: 6000, floor: 500 }, canary_tripped: { disable_credential: true } },
    credentials: { [id('agt_')]: { egress_spike: { enabled: false } } },
  },
  'HoneytokenCreated.v1': {
    honeytoken_id: id('hnt_'),
    project_id: id('prj_'),
    kind: 'column',
    target: 'public.customers.ssn_backup',
    disable_credential: true,
  },
  'HoneytokenDeleted.v1': { honeytoken_id: id('hnt_') },
  'IpRulesSet.v1': { project_id: id('prj_'), allow: [{ cidr: '10.0.0.0/8', label: 'office' }, { cidr: '2001:db8::/32' }], deny: [{ cidr: '127.0.0.2/32' }] },
  'DomainCreated.v1': { domain_id: id('dom_'), project_id: id('prj_'), domain: 'db.example.com', dns_verification_token: 'pgward-verify-0123456789abcdefghijklmnopqrstuv' },
  'DomainVerified.v1': { domain_id: id('dom_'), record_name: '_pgward.db.example.com' },
  'DomainDeleted.v1': { domain_id: id('dom_') },
  'BranchCreated.v1': { branch_id: id('brn_'), project_id: id('prj_'), database_id: id('db_'), name: 'rehearsal', database_name: 'pgward_branch_0123456789abcdefghij' },
  'BranchReady.v1': { branch_id: id('brn_'), method: 'template' },
  'BranchFailed.v1': { branch_id: id('brn_'), reason: 'the source has other sessions' },
  'BranchDeleted.v1': { branch_id: id('brn_') },
  'NameReserved.v1': { key: 'domain:db.example.com', holder: id('dom_') },
  'NameReleased.v1': { key: 'domain:db.example.com', holder: id('dom_') },
  'CredentialIpRulesSet.v1': { credential_id: id('agt_'), allow: [{ cidr: '10.0.0.0/8', label: 'office' }], deny: [{ cidr: '::1/128' }] },
  'WireSessionOpened.v1': { project_id: id('prj_'), session_id: 'proxy-1.1700000000.7', credential_id: id('agt_'), at },
  'WireSessionClosed.v1': { project_id: id('prj_'), session_id: 'proxy-1.1700000000.7', at },
  'WebhookCreated.v1': {
    webhook_id: id('whk_'),
    project_id: id('prj_'),
    url: 'https://hooks.example.com/pgward',
    event_types: ['canary_tripped', 'webhook.test'],
    enabled: true,
    description: 'pager',
    secret: sealed,
  },
  'WebhookUpdated.v1': { webhook_id: id('whk_'), changes: { enabled: false } },
  'WebhookSecretRotated.v1': { webhook_id: id('whk_'), secret: sealed, previous_valid_until: at },
  'WebhookDeleted.v1': { webhook_id: id('whk_') },
  'WebhookTestRequested.v1': { webhook_id: id('whk_') },
  'SupportCaseOpened.v1': { case_id: id('sc_'), org_id: id('org_'), title: 'Replica lag', body: 'Reads are stale', severity: 2, opened_by: 'api_key:key_1' },
  'SupportMessagePosted.v1': { case_id: id('sc_'), message_id: id('scm_'), side: 'operator', author: 'operator:alice', body: 'Looking into it' },
  'SupportCaseClosed.v1': { case_id: id('sc_'), side: 'customer', closed_by: 'user:u1' },
  'CancellationFeedbackRecorded.v1': { feedback_id: id('cfb_'), org_id: id('org_'), reason: 'too_expensive', feedback: '', recorded_by: 'user:u1' },
  'CompanyCreated.v1': { record_id: id('cmp_'), org_id: id('org_'), agent_role: null, fields: { name: 'Example Inc', description: '', domain: 'example.com', industry: null, location: 'Berlin', logo_url: null } },
  'CompanyUpdated.v1': { record_id: id('cmp_'), org_id: id('org_'), agent_role: 'enricher', changes: { industry: 'Retail' } },
  'CompanyDeleted.v1': { record_id: id('cmp_'), org_id: id('org_'), agent_role: null },
  'ContactCreated.v1': {
    record_id: id('cnt_'), org_id: id('org_'), agent_role: 'researcher',
    fields: { name: 'Ada', company_id: id('cmp_'), email: 'ada@example.com', phone: null, title: 'CTO', professional_network_url: null, notes: '' },
  },
  'ContactUpdated.v1': { record_id: id('cnt_'), org_id: id('org_'), agent_role: null, changes: { company_id: null } },
  'ContactDeleted.v1': { record_id: id('cnt_'), org_id: id('org_'), agent_role: null },
  'DealCreated.v1': {
    record_id: id('dl_'), org_id: id('org_'), agent_role: null,
    fields: { name: 'Pilot', company_id: id('cmp_'), contact_ids: [id('cnt_')], stage: 'lead', amount: '12500.50', currency: 'EUR', expected_close_date: '2027-03-31', notes: '' },
  },
  'DealUpdated.v1': { record_id: id('dl_'), org_id: id('org_'), agent_role: 'enricher', changes: { stage: 'won' } },
  'DealDeleted.v1': { record_id: id('dl_'), org_id: id('org_'), agent_role: null },
  'ResearchTaskCreated.v1': {
    record_id: id('tsk_'), org_id: id('org_'), agent_role: null,
    fields: { subject_type: 'company', subject_id: id('cmp_'), role: 'researcher', title: 'Find the buyers', instructions: '', status: 'open' },
  },
  'ResearchTaskUpdated.v1': { record_id: id('tsk_'), org_id: id('org_'), agent_role: 'researcher', subject_type: 'company', subject_id: id('cmp_'), changes: { status: 'done' } },
  'ResearchTaskDeleted.v1': { record_id: id('tsk_'), org_id: id('org_'), agent_role: null, subject_type: 'company', subject_id: id('cmp_') },
  'ArtifactCreated.v1': {
    record_id: id('art_'), org_id: id('org_'), agent_role: 'outreach',
    fields: { subject_type: 'contact', subject_id: id('cnt_'), task_id: id('tsk_'), kind: 'outreach_email', title: 'Hello', body: 'Dear Ada' },
  },
  'ArtifactUpdated.v1': { record_id: id('art_'), org_id: id('org_'), agent_role: 'outreach', subject_type: 'contact', subject_id: id('cnt_'), changes: { body: 'Dear Ada,' } },
  'ArtifactDeleted.v1': { record_id: id('art_'), org_id: id('org_'), agent_role: null, subject_type: 'contact', subject_id: id('cnt_') },
  'ArtifactApproved.v1': { record_id: id('art_'), org_id: id('org_'), agent_role: null, subject_type: 'contact', subject_id: id('cnt_') },
  'ArtifactSent.v1': { record_id: id('art_'), org_id: id('org_'), agent_role: 'outreach', subject_type: 'contact', subject_id: id('cnt_') },
  'ArtifactDiscarded.v1': { record_id: id('art_'), org_id: id('org_'), agent_role: null, subject_type: 'contact', subject_id: id('cnt_') },
  'CrmContextSet.v1': { org_id: id('org_'), positioning: 'A Postgres gateway', icp: 'Data teams', tone: 'plain', notes: '' },
  'PolicyRoleProvisioned.v1': { policy_id: id('pol_'), database_id: id('db_'), role_name: 'pgward_0f3a9c', password: sealed, tables: ['public.orders'] },
};

function sampleOf(definition: EventDefinition): Record<string, unknown> {
  const sample = samples[definition.type];
  if (!sample) throw new Error(`no sample for ${definition.type}`);
  return sample;
}

function encode(definition: EventDefinition, data: unknown) {
  return encodeEvent(definition, data, metadata);
}

function record(definition: EventDefinition, data: unknown): RecordedEvent {
  return { ...encode(definition, data), stream: 'test-1', revision: 0, position: 1n };
}

function rejects(definition: EventDefinition, data: unknown): boolean {
  return !definition.schema.safeParse(data).success;
}

describe('event catalog', () => {
  it('gives every definition a unique stored type Name.vN', () => {
    const types = catalog.map((d) => d.type);
    expect(new Set(types).size).toBe(types.length);
    for (const d of catalog) {
      expect(d.type).toMatch(/^[A-Z][A-Za-z]*\.v[1-9][0-9]*$/);
      expect(d.type).toBe(`${d.name}.v${d.version}`);
      expect(eventDefinition(d.type)).toBe(d);
    }
  });

  it('has exactly one sample per definition', () => {
    expect(Object.keys(samples).sort()).toEqual(catalog.map((d) => d.type).sort());
  });

  it.each(definitions.map((d) => [d.type, d] as const))('%s round-trips byte for byte', (_type, definition) => {
    const sample = sampleOf(definition);
    const recorded = record(definition, sample);
    expect(Buffer.from(recorded.data)).toEqual(Buffer.from(canonicalBytes(sample)));
    const decoded = decodeEvent(recorded);
    expect(decoded.type).toBe(definition.type);
    expect(decoded.data).toEqual(sample);
    expect(decoded.metadata).toEqual(metadata);
    const again = encodeEvent(definition, decoded.data, decoded.metadata);
    expect(Buffer.from(again.data)).toEqual(Buffer.from(recorded.data));
    expect(Buffer.from(again.metadata)).toEqual(Buffer.from(recorded.metadata));
  });

  it.each(definitions.map((d) => [d.type, d] as const))('%s rejects an unknown field', (_type, definition) => {
    expect(rejects(definition, { ...sampleOf(definition), unexpected: 1 })).toBe(true);
  });

  it('rejects unknown fields in nested objects', () => {
    const db = sampleOf(DatabaseRegistered);
    expect(rejects(DatabaseRegistered, { ...db, pool_config: { ...pool, extra: 1 } })).toBe(true);
    expect(rejects(DatabaseUpdated, { database_id: id('db_'), changes: { owner: 'x' } })).toBe(true);
  });

  it('narrows a decoded event on its type', () => {
    const decoded: CatalogEvent = decodeEvent(record(CredentialRegistered, sampleOf(CredentialRegistered)));
    expect(decoded.type === 'CredentialRegistered.v1' ? decoded.data.pg_username : undefined).toBe('agt_support');
  });

  it('throws UnknownEventType for a type it does not know', () => {
    const known = record(CredentialRegistered, sampleOf(CredentialRegistered));
    for (const type of ['Nope.v1', 'CredentialRegistered.v2', 'CredentialRegistered']) {
      expect(eventDefinition(type)).toBeUndefined();
      expect(() => decodeEvent({ ...known, type })).toThrow(UnknownEventType);
    }
  });
});

describe('integers, never floats', () => {
  const cases: [EventDefinition, string, Record<string, unknown>][] = [
    [DatabaseRegistered, 'port', { port: 5432.5 }],
    [DatabaseRegistered, 'pool_config.max_connections', { pool_config: { ...pool, max_connections: 20.5 } }],
    [StatementDecided, 'latency_us', { latency_us: 1834.2 }],
    [StatementDecided, 'boot_epoch', { boot_epoch: 1.5 }],
    [StatementDecided, 'rows_returned as a number', { rows_returned: 1 }],
    [CredentialRegistered, 'scram.iterations', { scram: { ...scram, iterations: 4096.5 } }],
    [PolicyProfileCreated, 'queries_per_day', { queries_per_day: 10.5 }],
    [AnomalyRaised, 'details', { details: { ratio: 12.5 } }],
  ];
  it.each(cases.map(([d, field, patch]) => [d.type, field, d, patch] as const))('%s rejects a float in %s', (_type, _field, definition, patch) => {
    expect(rejects(definition, { ...sampleOf(definition), ...patch })).toBe(true);
  });

  it('accepts int64 decimal strings only in canonical form and range', () => {
    for (const good of ['0', '1', '9223372036854775807']) expect(Int64String.safeParse(good).success).toBe(true);
    for (const bad of ['1.5', '1e3', '-1', '01', '', ' 1', '9223372036854775808']) expect(Int64String.safeParse(bad).success).toBe(false);
  });
});

describe('no plaintext secrets', () => {
  const secretBearing = definitions.filter((d) => d.name.startsWith('Credential') || d.name.startsWith('Database') || d.name.startsWith('Replica') || d.name === 'PolicyRoleProvisioned' || d.name === 'ProjectHashKeyGenerated');

  it.each(secretBearing.map((d) => [d.type, d] as const))('%s refuses a plaintext password', (_type, definition) => {
    expect(rejects(definition, { ...sampleOf(definition), password: 'hunter2' })).toBe(true);
    if (definition === ProjectHashKeyGenerated) expect(rejects(definition, { ...sampleOf(definition), key: 'ab'.repeat(32) })).toBe(true);
  });

  it('refuses a plaintext password inside database changes or a sealed secret', () => {
    expect(rejects(DatabaseUpdated, { database_id: id('db_'), changes: { password: 'hunter2' } })).toBe(true);
    expect(SealedSecret.safeParse({ ...sealed, plaintext: 'hunter2' }).success).toBe(false);
    expect(SealedSecret.safeParse({ ...sealed, ciphertext: 'hunter2' }).success).toBe(false);
  });
});

describe('field rules', () => {
  it('accepts ids of prefix plus 20-40 lowercase alphanumerics only', () => {
    const agent = idSchema('agt_');
    expect(agent.safeParse(`agt_${'a'.repeat(20)}`).success).toBe(true);
    expect(agent.safeParse(`agt_${'a'.repeat(40)}`).success).toBe(true);
    for (const bad of [`agt_${'a'.repeat(19)}`, `agt_${'a'.repeat(41)}`, `agt_${'A'.repeat(26)}`, id('pol_')]) {
      expect(agent.safeParse(bad).success).toBe(false);
    }
  });

  it('refuses NUL and lone surrogates in text', () => {
    expect(text(10).safeParse('a\u0000b').success).toBe(false);
    expect(text(10).safeParse('a\ud800b').success).toBe(false);
    expect(text(10).safeParse('a😀b').success).toBe(true);
  });

  it('ties proxy_id, boot_epoch and seq together and requires them from the proxy', () => {
    expect(rejects(StatementDecided, { ...statementV2, seq: null })).toBe(true);
    expect(rejects(StatementDecided, { ...statementV2, proxy_id: null, boot_epoch: null, seq: null })).toBe(true);
    expect(rejects(StatementDecided, { ...statementV2, source: 'control', proxy_id: null, boot_epoch: null, seq: null })).toBe(false);
  });

  it('keeps where a statement ran consistent with its cache status (v2)', () => {
    const v2 = (patch: Record<string, unknown>) => ({ ...statementV2, ...patch });
    expect(rejects(StatementDecided, v2({ ran_on: 'primary', replica_id: null }))).toBe(false);
    expect(rejects(StatementDecided, v2({ ran_on: 'primary' }))).toBe(true);
    expect(rejects(StatementDecided, v2({ ran_on: 'replica', replica_id: null }))).toBe(true);
    expect(rejects(StatementDecided, v2({ ran_on: 'relay', replica_id: null, upstream_region: 'us-east-1' }))).toBe(false);
    expect(rejects(StatementDecided, v2({ ran_on: 'relay', replica_id: null, upstream_region: null }))).toBe(true);
    expect(rejects(StatementDecided, v2({ cache_status: 'hit', ran_on: 'cache', replica_id: null, upstream_region: null }))).toBe(false);
    expect(rejects(StatementDecided, v2({ cache_status: 'hit' }))).toBe(true);
    expect(rejects(StatementDecided, v2({ cache_status: 'miss', ran_on: 'cache', replica_id: null, upstream_region: null }))).toBe(true);
    expect(rejects(StatementDecided, v2({ event: 'blocked', cache_status: 'none', ran_on: null, replica_id: null, upstream_region: null }))).toBe(false);
    expect(rejects(StatementDecided, v2({ event: 'blocked', cache_status: 'none', ran_on: 'primary', replica_id: null }))).toBe(true);
    expect(rejects(StatementDecided, v2({ ran_on: 'edge' }))).toBe(true);
    // v1 has no placement: its members are unknown there, and required in v2.
    expect(rejects(StatementDecidedV1, statementV2)).toBe(true);
    expect(rejects(StatementDecided, statement)).toBe(true);
  });

  it('requires an approval_id on approval entries', () => {
    expect(rejects(StatementDecided, { ...statementV2, event: 'approval_requested' })).toBe(true);
    expect(rejects(StatementDecided, { ...statementV2, event: 'approval_requested', approval_id: id('apr_') })).toBe(false);
  });

  it('checks a honeytoken target against its kind', () => {
    const honeytoken = sampleOf(HoneytokenCreated);
    expect(rejects(HoneytokenCreated, { ...honeytoken, kind: 'table' })).toBe(true);
    expect(rejects(HoneytokenCreated, { ...honeytoken, kind: 'table', target: 'public.customers' })).toBe(false);
    expect(rejects(HoneytokenCreated, { ...honeytoken, kind: 'nope' })).toBe(true);
  });

  it('refuses an empty change set', () => {
    expect(rejects(DatabaseUpdated, { database_id: id('db_'), changes: {} })).toBe(true);
  });
});

describe('decisionGroup', () => {
  const table = {
    query: 'allow',
    blocked: 'block',
    budget_exhausted: 'block',
    auth_failed: 'block',
    credential_expired: 'block',
    canary_tripped: 'block',
    rejected: 'block',
    approval_expired: 'block',
    masked: 'mask',
    truncated: 'truncate',
    approval_requested: null,
    approved: null,
    migration_flagged: null,
  } as const;

  it('covers the 13 audit event kinds of spec §6', () => {
    expect([...AuditEventKind.options].sort()).toEqual(Object.keys(table).sort());
  });

  it.each(Object.entries(table))('%s → %s', (event, group) => {
    expect(decisionGroup(AuditEventKind.parse(event))).toBe(group);
  });
});

describe('canonical encoding of StatementDecided', () => {
  const keys = Object.keys(statement);
  const variable = fc.record({
    sql: fc.string({ unit: 'grapheme', maxLength: 200 }).map((s) => s.replaceAll('\u0000', '')),
    rows_returned: fc.bigInt({ min: 0n, max: 2n ** 63n - 1n }).map(String),
    latency_us: fc.option(fc.nat(), { nil: null }),
    cache_status: fc.constantFrom('hit', 'stale', 'miss', 'bypass', 'none'),
    tables_read: fc.array(fc.constantFrom('orders', 'public.customers', 'x'), { maxLength: 3 }),
  });

  it('is stable under key reordering of the input', () => {
    fc.assert(
      fc.property(variable, fc.shuffledSubarray(keys, { minLength: keys.length, maxLength: keys.length }), (values, order) => {
        const entry: Record<string, unknown> = { ...statement, ...values };
        const reordered = Object.fromEntries(order.map((key) => [key, entry[key]]));
        const a = encode(StatementDecidedV1, entry).data;
        const b = encode(StatementDecidedV1, reordered).data;
        expect(Buffer.from(b)).toEqual(Buffer.from(a));
      }),
    );
  });
});
