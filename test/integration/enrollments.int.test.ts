/**
 * Self-host enrollments through the real API over a real PostgreSQL: the token resource (shown
 * once, stored hashed, plan and self_hosted checks, ETags, idempotent creates, revoke), and the
 * data-plane channel a token opens (the project's events only, its secrets re-sealed for the data
 * plane, the appends and decisions it may send), read with the data plane's own client over HTTP.
 */
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryBus } from '../../src/bus/memory.js';
import type { DecisionBus } from '../../src/bus/port.js';
import { StatementDecided as StatementDecidedEvent, type StatementDecided } from '../../src/events/audit.js';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { decision } from '../support/decisions.js';
import { openSecret, parseKeyring } from '../../src/crypto/seal.js';
import { ChannelClient, ChannelEnded } from '../../src/enroll/channel-client.js';
import { RemoteBus } from '../../src/enroll/remote-bus.js';
import { RemoteEventStore } from '../../src/enroll/remote-store.js';
import { dataPlaneKeyring } from '../../src/enroll/token.js';
import { buildCatalog, type OpenApiDocument } from '../../src/mcp/management/catalog.js';
import { DATA_PLANE_PREFIXES } from '../../src/enroll/wire.js';
import { CredentialUsed } from '../../src/events/credentials.js';
import { DatabaseRegistered } from '../../src/events/databases.js';
import { decodeWith, encodeEvent } from '../../src/events/envelope.js';
import type { RecordedEvent } from '../../src/store/port.js';
import { startApi, type TestApi } from '../support/api.js';
import { waitFor } from '../support/wire.js';

let api: TestApi;
let scale: { orgId: string; apiKey: string };
let baseUrl: URL;
let hosted: string;
let otherHosted: string;
let cloud: string;
const logger = pino({ level: 'silent' });
let bus: DecisionBus;
let ingest: RunningIngest;
const published: { id: string; data: string }[] = [];

interface Enrollment {
  id: string;
  project_id: string;
  description: string;
  region_label: string;
  token_prefix: string;
  status: string;
  expires_at: string | null;
  revoked_at: string | null;
  token?: string;
}

const DATABASE = { host: '127.0.0.1', port: 5432, name: 'postgres', username: 'postgres', password: 'upstream-pw' };

async function project(owner: { orgId: string; apiKey: string }, selfHosted: boolean): Promise<string> {
  const created = await api.call(owner.apiKey, { method: 'POST', url: '/v1/projects', payload: { name: 'P', org_id: owner.orgId, self_hosted: selfHosted, database: DATABASE } });
  expect(created.statusCode, created.body).toBe(201);
  return (created.json() as { project: { id: string } }).project.id;
}

async function enroll(projectId: string, payload: object = {}, headers: Record<string, string> = {}) {
  return api.call(scale.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/self-host-enrollments`, payload, headers });
}

async function token(projectId: string, payload: object = {}): Promise<Enrollment & { token: string }> {
  const created = await enroll(projectId, payload);
  expect(created.statusCode, created.body).toBe(201);
  return created.json();
}

const revoke = (projectId: string, id: string, headers: Record<string, string> = {}) => api.call(scale.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/self-host-enrollments/${id}/revoke`, headers });

function channel(secret: string): { client: ChannelClient; store: RemoteEventStore } {
  const client = new ChannelClient(baseUrl, secret, logger);
  return { client, store: new RemoteEventStore(client) };
}

beforeAll(async () => {
  bus = createMemoryBus();
  await bus.consume({ durable: 'test' }, async (delivery) => void published.push({ id: delivery.id, data: Buffer.from(delivery.data).toString('utf8') }));
  api = await startApi('enrollments', {}, { bus });
  // Ingest's durable consumer exists before anything is published, as in serve.
  ingest = await startIngest({ store: api.store, bus, logger, holeGraceMs: 600_000, appendLingerMs: 2 });
  await api.app.listen({ host: '127.0.0.1', port: 0 });
  baseUrl = new URL(`http://127.0.0.1:${(api.app.server.address() as AddressInfo).port}`);
  scale = await api.org('scale');
  hosted = await project(scale, true);
  otherHosted = await project(scale, true);
  cloud = await project(scale, false);
});
afterAll(async () => {
  await ingest?.stop();
  await api?.stop();
  await bus?.close();
});

describe('self-host enrollment tokens', () => {
  it('shows the token once and stores only its hash; get and list never show it', async () => {
    const created = await token(hosted, { description: 'rack 4', region_label: 'eu-dc-1' });
    expect(created.token).toMatch(/^pgw_enr_[A-Za-z0-9_-]{43}$/);
    expect(created).toMatchObject({ project_id: hosted, description: 'rack 4', region_label: 'eu-dc-1', status: 'active', expires_at: null, revoked_at: null, token_prefix: created.token.slice(0, 12) });
    const got = await api.call(scale.apiKey, { method: 'GET', url: `/v1/projects/${hosted}/self-host-enrollments/${created.id}` });
    expect(got.statusCode).toBe(200);
    expect(got.headers.etag).toBe('"0"');
    expect(got.body).not.toContain(created.token);
    expect(got.json()).toEqual({ ...created, token: undefined, created_at: expect.any(String), updated_at: expect.any(String) });
    const listed = await api.call(scale.apiKey, { method: 'GET', url: `/v1/projects/${hosted}/self-host-enrollments?page_size=100` });
    expect(listed.body).not.toContain(created.token);
    expect((listed.json() as { enrollments: Enrollment[] }).enrollments.map((e) => e.id)).toContain(created.id);
    const events = await api.store.readStream(`enrollment-${created.id}`);
    expect(events).toHaveLength(1);
    const stored = Buffer.from(events[0]!.data).toString('utf8');
    expect(stored).not.toContain(created.token);
    expect(JSON.parse(stored).token_hash).toBe(createHash('sha256').update(created.token).digest('hex'));
  });

  it('pages the list', async () => {
    const project3 = await project(scale, true);
    const ids = [(await token(project3)).id, (await token(project3)).id, (await token(project3)).id].sort();
    const first = (await api.call(scale.apiKey, { method: 'GET', url: `/v1/projects/${project3}/self-host-enrollments?page_size=2` })).json() as { enrollments: Enrollment[]; next_page_token: string };
    expect(first.enrollments.map((e) => e.id)).toEqual(ids.slice(0, 2));
    const second = (await api.call(scale.apiKey, { method: 'GET', url: `/v1/projects/${project3}/self-host-enrollments?page_size=2&page_token=${first.next_page_token}` })).json() as { enrollments: Enrollment[]; next_page_token: string };
    expect(second).toEqual({ enrollments: [expect.objectContaining({ id: ids[2] })], next_page_token: '' });
  });

  it('a retried create with the same Idempotency-Key makes no second token and shows none again', async () => {
    const before = (await api.store.readAll(-1n, { streamPrefixes: ['enrollment-'] })).length;
    const first = await enroll(hosted, { description: 'retry' }, { 'idempotency-key': 'enr-retry-1' });
    expect(first.statusCode).toBe(201);
    const again = await enroll(hosted, { description: 'retry' }, { 'idempotency-key': 'enr-retry-1' });
    expect(again.statusCode).toBe(201);
    expect(again.body).toBe(first.body);
    expect((await api.store.readAll(-1n, { streamPrefixes: ['enrollment-'] })).length).toBe(before + 1);
    const reused = await enroll(hosted, { description: 'other body' }, { 'idempotency-key': 'enr-retry-1' });
    expect(reused.json()).toMatchObject({ status: 409, code: 'IDEMPOTENCY_KEY_REUSED' });
  });

  it('refuses a project that is not self-hosted (409), a plan without self-hosting (403), another organization (404) and bad input (400), appending nothing', async () => {
    const before = (await api.store.readAll(-1n, { streamPrefixes: ['enrollment-'] })).length;
    const notSelfHosted = await enroll(cloud);
    expect(notSelfHosted.statusCode).toBe(409);
    expect(notSelfHosted.json()).toMatchObject({ code: 'CONFLICT', detail: expect.stringContaining('not self-hosted') });
    const pro = await api.org('pro');
    const proProject = await api.project(pro);
    const onPro = await api.call(pro.apiKey, { method: 'POST', url: `/v1/projects/${proProject}/self-host-enrollments`, payload: {} });
    expect(onPro.statusCode).toBe(403);
    expect(onPro.json()).toMatchObject({ code: 'PLAN_LIMIT_REACHED' });
    const otherOrg = await api.call(pro.apiKey, { method: 'POST', url: `/v1/projects/${hosted}/self-host-enrollments`, payload: {} });
    expect(otherOrg.statusCode).toBe(404);
    expect((await enroll(hosted, { expires_at: new Date(Date.now() - 1000).toISOString() })).json()).toMatchObject({ status: 400, errors: [{ field: 'expires_at' }] });
    expect((await enroll(hosted, { description: 'x'.repeat(501) })).statusCode).toBe(400);
    expect((await enroll(hosted, { region_label: 'x'.repeat(101) })).statusCode).toBe(400);
    expect((await enroll(hosted, { region_label: 'a\u0000b' })).statusCode).toBe(400);
    expect((await enroll(hosted, { token: 'mine' })).statusCode).toBe(400);
    const viewer = await api.call(scale.apiKey, { method: 'POST', url: `/v1/orgs/${scale.orgId}/api-keys`, payload: { name: 'v', role: 'member' } });
    const member = (viewer.json() as { api_key: string }).api_key;
    expect((await api.call(member, { method: 'POST', url: `/v1/projects/${hosted}/self-host-enrollments`, payload: {} })).statusCode).toBe(403);
    expect((await api.store.readAll(-1n, { streamPrefixes: ['enrollment-'] })).length).toBe(before);
  });

  it('revokes once under If-Match: 412 on a stale ETag, 409 when already revoked, 404 from another project', async () => {
    const created = await token(hosted);
    expect((await revoke(otherHosted, created.id)).statusCode).toBe(404);
    expect((await revoke(hosted, created.id, { 'if-match': '"7"' })).statusCode).toBe(412);
    const revoked = await revoke(hosted, created.id, { 'if-match': '"0"' });
    expect(revoked.statusCode).toBe(200);
    expect(revoked.headers.etag).toBe('"1"');
    expect(revoked.json()).toMatchObject({ status: 'revoked', revoked_at: expect.any(String) });
    expect((await revoke(hosted, created.id)).json()).toMatchObject({ status: 409, code: 'CONFLICT' });
  });

  it('lists every operation in the OpenAPI document, and none of the data-plane channel', async () => {
    const doc = (await api.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json() as { paths: Record<string, Record<string, { operationId?: string }>> };
    const ids = Object.values(doc.paths).flatMap((ops) => Object.values(ops).map((op) => op.operationId));
    expect(ids).toEqual(expect.arrayContaining(['createSelfHostEnrollment', 'listSelfHostEnrollments', 'getSelfHostEnrollment', 'revokeSelfHostEnrollment']));
    expect(Object.keys(doc.paths).filter((path) => path.includes('data-plane'))).toEqual([]);
    const found = buildCatalog(doc as unknown as OpenApiDocument).search('self-host enrollment token for a data plane', 5).map((op) => op.operationId);
    expect(found).toEqual(expect.arrayContaining(['createSelfHostEnrollment', 'revokeSelfHostEnrollment']));
  });
});

describe('the data-plane channel', () => {
  it('refuses a missing, malformed or unknown token and an organization API key (401)', async () => {
    for (const url of ['/v1/data-plane/enrollment', '/v1/data-plane/audit-backlog']) {
      for (const authorization of [undefined, 'Bearer nope', `Bearer pgw_enr_${'A'.repeat(43)}`, `Bearer ${scale.apiKey}`]) {
        const response = await api.app.inject({ method: 'GET', url, headers: authorization ? { authorization } : {} });
        expect(response.statusCode, `${url} ${authorization}`).toBe(401);
        expect(response.headers['content-type']).toContain('application/problem+json');
      }
    }
  });

  it('reads its own project’s events only, the organization’s plan but not its API keys, with the upstream password sealed for the data plane', async () => {
    const created = await token(hosted);
    const { client, store } = channel(created.token);
    const info = await client.json<Record<string, unknown>>('GET', '/v1/data-plane/enrollment');
    expect(info).toMatchObject({ enrollment_id: created.id, project_id: hosted, org_id: scale.orgId, max_message_bytes: expect.any(Number) });
    const events: RecordedEvent[] = [];
    for (let batch = await store.readAll(-1n, { streamPrefixes: DATA_PLANE_PREFIXES }); batch.length > 0; batch = await store.readAll(batch.at(-1)!.position, { streamPrefixes: DATA_PLANE_PREFIXES })) events.push(...batch);
    const streams = new Set(events.map((e) => e.stream));
    expect(streams).toContain(`project-${hosted}`);
    expect(streams).toContain(`org-${scale.orgId}`);
    expect([...streams].filter((s) => s.includes(otherHosted) || s.includes(cloud))).toEqual([]);
    expect(events.filter((e) => e.stream.startsWith('org-')).map((e) => e.type)).toEqual(['OrganizationCreated.v1']);
    const registered = events.find((e) => e.type === DatabaseRegistered.type)!;
    const { data } = decodeWith(DatabaseRegistered, registered);
    expect(openSecret(data.password, dataPlaneKeyring(created.token), data.database_id)).toBe('upstream-pw');
    expect(() => openSecret(data.password, parseKeyring(api.masterKey), data.database_id)).toThrow();
    expect(await store.readStream(`project-${otherHosted}`)).toEqual([]);
  });

  it('appends what a proxy writes to its own project’s streams only', async () => {
    const created = await token(hosted);
    const { store } = channel(created.token);
    const agentOf = async (projectId: string): Promise<string> => {
      const policy = await api.call(scale.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/policies`, payload: { name: `p-${Date.now()}` } });
      const agent = await api.call(scale.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/agents`, payload: { name: 'a', policy_profile_id: (policy.json() as { id: string }).id } });
      expect(agent.statusCode, agent.body).toBe(201);
      return (agent.json() as { credential: { id: string } }).credential.id;
    };
    const mine = await agentOf(hosted);
    const theirs = await agentOf(otherHosted);
    const used = (credentialId: string) => encodeEvent(CredentialUsed, { credential_id: credentialId, used_at: new Date().toISOString() }, { event_id: crypto.randomUUID(), correlation_id: 'dp', actor: 'proxy:dp', at: new Date().toISOString() });
    const appended = await store.append(`credential-${mine}`, [used(mine)], 'exists');
    expect(appended.duplicate).toBe(false);
    await expect(store.append(`credential-${theirs}`, [used(theirs)], 'exists')).rejects.toThrow(/403.*not this enrollment/);
    await expect(store.append(`credential-${mine}`, [used(theirs)], 'exists')).rejects.toThrow(/403.*not the stream/);
    const theirsBefore = (await api.store.readStream(`credential-${theirs}`)).length;
    expect(theirsBefore).toBe(1);
  });

  it('takes its own decisions for ingest and refuses another project’s or another proxy’s', async () => {
    const created = await token(hosted);
    const { client } = channel(created.token);
    const bus = new RemoteBus(client, 1024 * 1024);
    const decision = (projectId: string, proxyId: string) => ({ kind: 'decision', decision: sampleDecision(projectId, proxyId) });
    const send = (id: string, record: object) => bus.publish({ id, data: Buffer.from(JSON.stringify(record)) });
    await expect(send(`${created.id}:x:1:1..1`, decision(otherHosted, `${created.id}:x`))).rejects.toThrow(/403.*not this enrollment/);
    await expect(send(`${created.id}:x:1:1..1`, decision(hosted, 'someone-else'))).rejects.toThrow(/403.*proxy_id/);
    await expect(send('other:1:1..1', decision(hosted, `${created.id}:x`))).rejects.toThrow(/403.*message id/);
    await expect(send(`${created.id}:x:1:1..1`, { kind: 'decision', decision: { project_id: hosted } })).rejects.toThrow(/403/);
    expect(published).toEqual([]);
    const own = { kind: 'batch', decisions: [{ ...sampleDecision(hosted, `${created.id}:x`), seq: '1' }, { ...sampleDecision(hosted, `${created.id}:x`), seq: '2' }] };
    await send(`${created.id}:x:1:1..2`, own);
    await waitFor(() => published.length === 1, 5_000, 'the decision message on the control plane’s bus');
    expect(published[0]).toEqual({ id: `${created.id}:x:1:1..2`, data: JSON.stringify(own) });
  });

  it('tells an enrolled proxy how far behind ingest is and whether it progresses, and no counts', async () => {
    const created = await token(hosted);
    const { client } = channel(created.token);
    const remote = new RemoteBus(client, 1024 * 1024);
    const raw = await client.json<Record<string, unknown>>('GET', '/v1/data-plane/audit-backlog');
    expect(Object.keys(raw).sort()).toEqual(['behind_ms', 'pending', 'progressing']);
    await waitFor(async () => (await remote.auditBacklog())?.pending === 0, 10_000, 'nothing waiting for ingest');
    // Ingest stopped: the decision sent waits, older at each ask, and ingest takes nothing meanwhile.
    await ingest.stop();
    let stalled = -1;
    try {
      const proxyId = `${created.id}:lag`;
      const waiting = { ...sampleDecision(hosted, proxyId), seq: '1' };
      await remote.publish({ id: `${proxyId}:${waiting.boot_epoch}:1..1`, data: Buffer.from(JSON.stringify({ kind: 'decision', decision: waiting })) });
      await remote.auditBacklog();
      // Past the control plane's stall time (a second without an acknowledgement): no asker is told of progress.
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      const first = (await remote.auditBacklog())!;
      await new Promise((resolve) => setTimeout(resolve, 100));
      const second = (await remote.auditBacklog())!;
      expect(first.pending).toBe(1);
      expect(first.oldestAgeMs).toBeGreaterThanOrEqual(1_100);
      expect(first.oldestAgeMs % 100).toBe(0);
      expect(second.acknowledged).toBe(first.acknowledged);
      stalled = second.acknowledged;
    } finally {
      ingest = await startIngest({ store: api.store, bus, logger, holeGraceMs: 600_000, appendLingerMs: 2 });
    }
    await waitFor(async () => (await remote.auditBacklog())?.pending === 0, 10_000, 'ingest caught up');
    expect((await remote.auditBacklog())!.acknowledged).toBeGreaterThan(stalled);
  });

  it('a decision message sent again (a retry after a lost answer) reaches the audit stream once', async () => {
    const created = await token(otherHosted);
    const bus2 = new RemoteBus(channel(created.token).client, 1024 * 1024);
    const proxyId = `${created.id}:retry`;
    const first = { ...sampleDecision(otherHosted, proxyId), seq: '1' };
    const second = { ...sampleDecision(otherHosted, proxyId), seq: '2' };
    const message = { id: `${proxyId}:${first.boot_epoch}:1..2`, data: Buffer.from(JSON.stringify({ kind: 'batch', decisions: [first, second] })) };
    await bus2.publish(message);
    await bus2.publish(message);
    await bus2.publish({ id: `${proxyId}:${first.boot_epoch}:2..2`, data: Buffer.from(JSON.stringify({ kind: 'decision', decision: second })) });
    await waitFor(async () => (await api.store.readStream(`audit-${otherHosted}`)).length >= 2, 10_000, 'the decisions in the audit stream');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const stored = (await api.store.readStream(`audit-${otherHosted}`)).map((e) => decodeWith(StatementDecidedEvent, e).data);
    expect(stored.map((d) => [d.proxy_id, d.seq])).toEqual([
      [proxyId, '1'],
      [proxyId, '2'],
    ]);
  });

  it('follows its events live; a revoke ends the stream with its reason, and every later request is refused', async () => {
    const created = await token(hosted);
    const { client, store } = channel(created.token);
    const heard: string[] = [];
    client.onEnd((end) => heard.push(end.reason));
    const head = await api.store.headPosition();
    const subscription = store.subscribe(head, { streamPrefixes: ['project-'] });
    const seen: RecordedEvent[] = [];
    const following = (async () => {
      for await (const event of subscription) seen.push(event);
    })();
    const renamed = await api.call(scale.apiKey, { method: 'PATCH', url: `/v1/projects/${hosted}`, payload: { description: 'live' } });
    expect(renamed.statusCode, renamed.body).toBe(200);
    const elsewhere = await api.call(scale.apiKey, { method: 'PATCH', url: `/v1/projects/${otherHosted}`, payload: { description: 'not yours' } });
    expect(elsewhere.statusCode).toBe(200);
    await waitFor(() => seen.length === 1, 5_000, 'the live event');
    expect(seen[0]).toMatchObject({ stream: `project-${hosted}`, type: 'ProjectUpdated.v1' });
    expect((await revoke(hosted, created.id)).statusCode).toBe(200);
    await following;
    expect(heard).toEqual(['revoked']);
    expect(seen).toHaveLength(1);
    await expect(store.readAll(-1n, { streamPrefixes: ['project-'] })).rejects.toBeInstanceOf(ChannelEnded);
    const fresh = await api.app.inject({ method: 'GET', url: '/v1/data-plane/enrollment', headers: { authorization: `Bearer ${created.token}` } });
    expect(fresh.statusCode).toBe(401);
    expect(fresh.headers['pgward-enrollment-end']).toBe('revoked');
  });

  it('an expired token authenticates no more, and a live stream is told at the expiry', async () => {
    const created = await token(hosted, { expires_at: new Date(Date.now() + 1_500).toISOString() });
    const { client, store } = channel(created.token);
    const heard: string[] = [];
    client.onEnd((end) => heard.push(`${end.reason}: ${end.detail}`));
    const subscription = store.subscribe(await api.store.headPosition(), { streamPrefixes: ['project-'] });
    for await (const _ of subscription) void _;
    expect(heard).toEqual([expect.stringMatching(/^expired: the enrollment token pgw_enr_.{4}… expired at /)]);
    const response = await api.app.inject({ method: 'GET', url: '/v1/data-plane/enrollment', headers: { authorization: `Bearer ${created.token}` } });
    expect(response.statusCode).toBe(401);
    expect(response.headers['pgward-enrollment-end']).toBe('expired');
  });
});

function sampleDecision(projectId: string, proxyId: string): StatementDecided {
  const [sample] = fc.sample(decision.filter((d) => d.proxy_id !== null), { numRuns: 1, seed: 7 });
  return { ...sample!, project_id: projectId, proxy_id: proxyId };
}
