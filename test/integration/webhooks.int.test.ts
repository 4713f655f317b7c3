/**
 * Webhook endpoints through the real API and the real delivering role over one event store, to
 * real node:http receivers on 127.0.0.1, every delivery verified with the standardwebhooks package.
 */
import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseKeyring } from '../../src/crypto/seal.js';
import { StatementDecided, type AuditEventKind } from '../../src/events/audit.js';
import { encodeEvent } from '../../src/events/envelope.js';
import type { EventStore } from '../../src/store/port.js';
import { parseAllowedNetworks } from '../../src/webhooks/networks.js';
import { startWebhookDelivery, type WebhookDelivery } from '../../src/webhooks/service.js';
import { startApi, type TestApi } from '../support/api.js';
import { countingStore } from '../support/counting-store.js';
import { startReceiver, verified, type WebhookReceiver } from '../support/webhook-receiver.js';
import { waitFor } from '../support/wire.js';
import { placed } from '../support/decisions.js';

let api: TestApi;
let owner: { orgId: string; apiKey: string };
let projectId: string;
let delivery: WebhookDelivery | undefined;
const receivers: WebhookReceiver[] = [];
const logLines: string[] = [];
const logger = pino({ level: 'debug' }, { write: (line: string) => void logLines.push(line) });

interface Created {
  id: string;
  secret: string;
  url: string;
  event_types: string[];
  enabled: boolean;
  description: string;
  delivery_status: string;
}

interface Attempt {
  message_id: string;
  type: string;
  attempt: number;
  status_code: number | null;
  latency_ms: number;
  error: string | null;
  outcome: string;
}

function startDelivery(options: { allowed?: string; horizonMs?: number; resolve?: (host: string) => Promise<string[]>; timeoutMs?: number; store?: EventStore } = {}): WebhookDelivery {
  delivery = startWebhookDelivery({
    store: options.store ?? api.store,
    pool: api.pool,
    keyring: parseKeyring(api.masterKey),
    logger,
    allowed: parseAllowedNetworks(options.allowed ?? '127.0.0.0/8'),
    timeoutMs: options.timeoutMs ?? 2_000,
    horizonMs: options.horizonMs ?? 600_000,
    ...(options.resolve ? { resolve: options.resolve } : {}),
  });
  return delivery;
}

async function receiver(): Promise<WebhookReceiver> {
  const started = await startReceiver();
  receivers.push(started);
  return started;
}

beforeAll(async () => {
  api = await startApi('webhooks');
  owner = await api.org('pro');
  projectId = await api.project(owner);
});
afterEach(async () => {
  await delivery?.stop();
  delivery = undefined;
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});
afterAll(async () => {
  if (process.env.SHOW_LOGS) console.log(logLines.filter((l) => /"level":(40|50)/.test(l)).join(''));
  await api?.stop();
});

const base = (project = projectId) => `/v1/projects/${project}/webhooks`;
const problem = (response: LightMyRequestResponse) => response.json() as { code: string; errors?: { field: string }[] };

async function create(url: string, eventTypes: string[] = ['canary_tripped'], extra: Record<string, unknown> = {}): Promise<Created> {
  const response = await api.call(owner.apiKey, { method: 'POST', url: base(), payload: { url, event_types: eventTypes, ...extra } });
  expect(response.statusCode, response.body).toBe(201);
  return response.json() as Created;
}

async function test(webhookId: string): Promise<string> {
  const response = await api.call(owner.apiKey, { method: 'POST', url: `${base()}/${webhookId}/test` });
  expect(response.statusCode, response.body).toBe(202);
  return (response.json() as { message_id: string }).message_id;
}

async function attempts(webhookId: string): Promise<Attempt[]> {
  const response = await api.call(owner.apiKey, { method: 'GET', url: `${base()}/${webhookId}/deliveries?page_size=100` });
  expect(response.statusCode).toBe(200);
  return (response.json() as { deliveries: Attempt[] }).deliveries;
}

/** A decision as ingest appends it, of a statement the control plane ran (no proxy fields). */
function decided(event: AuditEventKind, sql: string, project = projectId) {
  const decision: StatementDecided = placed({
    event, project_id: project, credential_id: null, session_id: 's1', source: 'rest', region: 'local', client_ip: '', ts: new Date().toISOString(),
    sql, normalized_sql: sql, query_hash: 'abcdef0123456789', statement_kind: 'select', decision_rule: 'deny.table', reason: `refused ${sql}`, cache_status: 'none',
    rows_returned: '0', bytes_out: '0', latency_us: null, tables_read: [], tables_written: [], tables_blocked: ['public.secrets'], parsed: true, proxy_id: null, boot_epoch: null, seq: null, approval_id: null,
  });
  return encodeEvent(StatementDecided, decision, { event_id: randomUUID(), correlation_id: 'test', actor: 'test', at: new Date().toISOString() });
}

describe('webhook endpoints', () => {
  it('creates an endpoint showing its whsec_ secret once; GET, list and PATCH never carry it, and the stored event holds it sealed', async () => {
    const created = await create('https://hooks.example.com/pgward', ['canary_tripped', 'query_blocked'], { description: 'pager' });
    expect(created).toEqual({
      id: expect.stringMatching(/^whk_[a-z0-9]{26}$/),
      project_id: projectId,
      url: 'https://hooks.example.com/pgward',
      event_types: ['canary_tripped', 'query_blocked'],
      enabled: true,
      description: 'pager',
      delivery_status: 'healthy',
      failing_since: null,
      previous_secret_valid_until: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
    });
    const { secret, ...shown } = created;
    const got = await api.call(owner.apiKey, { method: 'GET', url: `${base()}/${created.id}` });
    expect(got.json()).toEqual(shown);
    expect(got.headers.etag).toBe('"0"');
    const listed = await api.call(owner.apiKey, { method: 'GET', url: base() });
    expect((listed.json() as { webhooks: unknown[] }).webhooks).toEqual([shown]);
    const patched = await api.call(owner.apiKey, { method: 'PATCH', url: `${base()}/${created.id}`, headers: { 'if-match': '"0"' }, payload: { enabled: false, event_types: ['audit_checkpoint'] } });
    expect(patched.statusCode).toBe(200);
    expect(patched.json()).toMatchObject({ enabled: false, event_types: ['audit_checkpoint'], url: 'https://hooks.example.com/pgward' });
    const stale = await api.call(owner.apiKey, { method: 'PATCH', url: `${base()}/${created.id}`, headers: { 'if-match': '"0"' }, payload: { enabled: true } });
    expect(stale.statusCode).toBe(412);
    const secretPart = secret.slice('whsec_'.length);
    for (const body of [got.body, listed.body, patched.body]) expect(body).not.toContain(secretPart);
    const stored = await api.store.readStream(`webhook-${created.id}`);
    expect(stored.map((e) => e.type)).toEqual(['WebhookCreated.v1', 'WebhookUpdated.v1']);
    for (const event of stored) expect(Buffer.from(event.data).toString('utf8')).not.toContain(secretPart);
    expect(logLines.join('\n')).not.toContain(secretPart);
    const deleted = await api.call(owner.apiKey, { method: 'DELETE', url: `${base()}/${created.id}` });
    expect(deleted.statusCode).toBe(204);
    expect((await api.call(owner.apiKey, { method: 'GET', url: `${base()}/${created.id}` })).statusCode).toBe(404);
  });

  it('refuses unknown members, non-http(s) URLs, URLs with credentials and unknown or repeated event types, naming the field, and creates nothing', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ url: 'https://h.example.com', event_types: ['canary_tripped'], secret: 'mine' }, '(body)'],
      [{ url: 'ftp://h.example.com/x', event_types: ['canary_tripped'] }, 'url'],
      [{ url: 'file:///etc/passwd', event_types: ['canary_tripped'] }, 'url'],
      [{ url: 'https://user:pw@h.example.com/', event_types: ['canary_tripped'] }, 'url'],
      [{ url: 'https://h.example.com', event_types: ['query_allowed'] }, 'event_types.0'],
      [{ url: 'https://h.example.com', event_types: ['canary_tripped', 'canary_tripped'] }, 'event_types'],
      [{ url: 'https://h.example.com', event_types: [] }, 'event_types'],
    ];
    const before = (await api.call(owner.apiKey, { method: 'GET', url: base() })).body;
    for (const [payload, field] of cases) {
      const response = await api.call(owner.apiKey, { method: 'POST', url: base(), payload });
      expect(response.statusCode, JSON.stringify(payload)).toBe(400);
      expect(problem(response).code).toBe('INVALID_INPUT');
      expect(problem(response).errors?.map((e) => e.field), JSON.stringify(payload)).toEqual([field]);
    }
    const patch = await api.call(owner.apiKey, { method: 'PATCH', url: `${base()}/whk_aaaaaaaaaaaaaaaaaaaaaaaaaa`, payload: {} });
    expect(patch.statusCode).toBe(400);
    expect((await api.call(owner.apiKey, { method: 'GET', url: base() })).body).toBe(before);
  });

  it('a member may list but not create; another organization’s project answers 404', async () => {
    const member = await api.call(owner.apiKey, { method: 'POST', url: `/v1/orgs/${owner.orgId}/api-keys`, payload: { name: 'm', role: 'member' } });
    const memberKey = (member.json() as { api_key: string }).api_key;
    expect((await api.call(memberKey, { method: 'GET', url: base() })).statusCode).toBe(200);
    expect((await api.call(memberKey, { method: 'POST', url: base(), payload: { url: 'https://h.example.com', event_types: ['canary_tripped'] } })).statusCode).toBe(403);
    const stranger = await api.org('pro');
    expect((await api.call(stranger.apiKey, { method: 'GET', url: base() })).statusCode).toBe(404);
  });
});

describe('delivery', () => {
  it('delivers webhook.test signed per Standard Webhooks; the deliveries list shows the attempt', async () => {
    const hook = await receiver();
    const created = await create(hook.url);
    startDelivery();
    const id = await test(created.id);
    await waitFor(() => hook.received.length === 1, 5_000, 'the test delivery');
    const got = hook.received[0]!;
    expect(got.headers['webhook-id']).toBe(id);
    expect(got.headers['content-type']).toBe('application/json');
    const envelope = verified(got, created.secret);
    expect(envelope).toEqual({ id, type: 'webhook.test', project_id: projectId, occurred_at: expect.any(String), data: { webhook_id: created.id, requested_by: expect.stringMatching(/^api_key:key_/) } });
    expect(() => verified(got, `whsec_${Buffer.alloc(32, 1).toString('base64')}`)).toThrow('No matching signature found');
    await waitFor(async () => (await attempts(created.id)).length === 1, 3_000, 'the attempt recorded');
    expect(await attempts(created.id)).toEqual([expect.objectContaining({ message_id: id, type: 'webhook.test', attempt: 1, status_code: 200, error: null, outcome: 'delivered' })]);
  });

  it('delivers the project’s audit-derived events an endpoint subscribes to, never statement text, and nothing it does not subscribe to', async () => {
    const hook = await receiver();
    const created = await create(hook.url, ['query_blocked']);
    startDelivery();
    await api.store.append(`audit-${projectId}`, [decided('query', "select 'hello'"), decided('blocked', "select * from secrets where pin = '4242'"), decided('canary_tripped', 'select 1')], 'any');
    await waitFor(() => hook.received.length === 1, 5_000, 'the blocked notification');
    const envelope = verified(hook.received[0]!, created.secret);
    expect(envelope.type).toBe('query_blocked');
    expect(envelope.data).toEqual({
      audit_event: 'blocked', credential_id: null, session_id: 's1', source: 'rest', region: 'local', statement_kind: 'select', query_hash: 'abcdef0123456789',
      decision_rule: 'deny.table', tables_read: [], tables_written: [], tables_blocked: ['public.secrets'],
    });
    expect(hook.received[0]!.body).not.toContain('4242');
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(hook.received).toHaveLength(1);
  });

  it('a receiver down, then up: every message arrives once, by id, in order, and a restart of the delivering role mid-retry loses none', async () => {
    const hook = await receiver();
    const created = await create(hook.url);
    await hook.down();
    startDelivery();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await test(created.id));
    await waitFor(async () => (await attempts(created.id)).some((a) => a.attempt >= 2), 10_000, 'a retry of the first message');
    const failed = await attempts(created.id);
    expect(failed.every((a) => a.message_id === ids[0] && a.status_code === null && a.outcome === 'retrying' && /ECONNREFUSED/.test(a.error ?? ''))).toBe(true);
    // The delivering role stops mid-retry and another instance takes over from the tables alone.
    await delivery!.stop();
    startDelivery();
    await hook.up();
    await waitFor(() => hook.received.length >= 5, 15_000, 'all five messages');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(hook.received.map((r) => r.headers['webhook-id'])).toEqual(ids);
    expect(hook.received.map((r) => verified(r, created.secret).id)).toEqual(ids);
  });

  it('reads no audit event of a project none of whose endpoints subscribes to an audit-derived type: 2,000 decisions in 20 appends cost it at most one empty read per append', async () => {
    const quiet = await api.project(owner, 'quiet');
    const hook = await receiver();
    const onlyCredentials = await api.call(owner.apiKey, { method: 'POST', url: base(quiet), payload: { url: hook.url, event_types: ['credential_disabled', 'credential_revoked'] } });
    expect(onlyCredentials.statusCode).toBe(201);
    const counted = countingStore(api.store);
    const streams: string[] = [];
    const spied: EventStore = {
      ...counted.store,
      subscribe(after, options) {
        const subscription = counted.store.subscribe(after, options);
        return {
          get reads() {
            return subscription.reads;
          },
          close: () => subscription.close(),
          async *[Symbol.asyncIterator]() {
            for await (const event of subscription) {
              streams.push(event.stream);
              yield event;
            }
          },
        };
      },
    };
    await startDelivery({ store: spied }).active;
    await test((await create(hook.url)).id);
    await waitFor(() => hook.received.length === 1, 5_000, 'caught up');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const before = counted.reads();
    for (let i = 0; i < 20; i++) await api.store.append(`audit-${quiet}`, Array.from({ length: 100 }, () => decided('blocked', 'select 1', quiet)), 'any');
    await new Promise((resolve) => setTimeout(resolve, 500));
    // Wake-ups are per category (audit-, since another project's endpoints read theirs); the store filters the reads.
    expect(counted.reads() - before).toBeLessThanOrEqual(20);
    expect(streams.filter((stream) => stream === `audit-${quiet}`)).toEqual([]);
    expect(hook.received).toHaveLength(1);
    await api.store.append(`audit-${projectId}`, [decided('query', 'select 2')], 'any');
    await waitFor(() => streams.includes(`audit-${projectId}`), 3_000, 'the subscribed project’s decision read');
  });

  it('forgets attempts and finished messages after 30 days, never a pending message', async () => {
    const hook = await receiver();
    const created = await create(hook.url, ['audit_checkpoint'], { enabled: false });
    await api.pool.query(`insert into pgward.webhook_messages (webhook_id, message_id, position, type, body, status, finished_at) values
      ($1, 'msg_old_delivered', 1, 'webhook.test', '{}', 'delivered', now() - interval '31 days'),
      ($1, 'msg_recent_delivered', 2, 'webhook.test', '{}', 'delivered', now() - interval '29 days'),
      ($1, 'msg_old_pending', 3, 'webhook.test', '{}', 'pending', null)`, [created.id]);
    await api.pool.query(`insert into pgward.webhook_attempts (webhook_id, message_id, type, attempt, attempted_at, latency_ms, outcome) values
      ($1, 'msg_old_delivered', 'webhook.test', 1, now() - interval '31 days', 5, 'delivered'), ($1, 'msg_recent_delivered', 'webhook.test', 1, now() - interval '29 days', 5, 'delivered')`, [created.id]);
    await startDelivery().active;
    const kept = async () => (await api.pool.query<{ message_id: string }>('select message_id from pgward.webhook_messages where webhook_id = $1 order by position', [created.id])).rows.map((r) => r.message_id);
    await waitFor(async () => !(await kept()).includes('msg_old_delivered'), 3_000, 'the old message forgotten');
    expect(await kept()).toEqual(['msg_recent_delivered', 'msg_old_pending']);
    expect((await attempts(created.id)).map((a) => a.message_id)).toEqual(['msg_recent_delivered']);
  });

  it('one slow receiver does not delay another endpoint', async () => {
    const slow = await receiver();
    const fast = await receiver();
    slow.answer = async (_request, response) => {
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      response.writeHead(200).end();
    };
    const slowHook = await create(slow.url);
    const fastHook = await create(fast.url);
    startDelivery({ timeoutMs: 5_000 });
    for (let i = 0; i < 3; i++) await test(slowHook.id);
    const started = Date.now();
    await test(fastHook.id);
    await waitFor(() => fast.received.length === 1, 3_000, 'the fast endpoint’s delivery');
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(slow.received.length).toBeLessThan(3);
  });

  it('rotate-secret: during the grace period deliveries verify with the old and the new secret; with no grace, only the new', async () => {
    const hook = await receiver();
    const created = await create(hook.url);
    startDelivery();
    // No body: the documented grace period of 24 hours.
    const rotated = await api.call(owner.apiKey, { method: 'POST', url: `${base()}/${created.id}/rotate-secret` });
    expect(rotated.statusCode, rotated.body).toBe(200);
    const { secret: fresh, previous_secret_valid_until: until } = rotated.json() as { secret: string; previous_secret_valid_until: string };
    expect(fresh).not.toBe(created.secret);
    expect(Date.parse(until) - Date.now()).toBeGreaterThan(86_390_000);
    expect(Date.parse(until) - Date.now()).toBeLessThanOrEqual(86_400_000);
    await test(created.id);
    await waitFor(() => hook.received.length === 1, 5_000, 'the delivery during the grace period');
    const during = hook.received[0]!;
    expect(String(during.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verified(during, fresh).type).toBe('webhook.test');
    expect(verified(during, created.secret).type).toBe('webhook.test');
    const again = await api.call(owner.apiKey, { method: 'POST', url: `${base()}/${created.id}/rotate-secret`, payload: { grace_period_seconds: 0 } });
    const newest = (again.json() as { secret: string }).secret;
    expect((await api.call(owner.apiKey, { method: 'POST', url: `${base()}/${created.id}/rotate-secret`, payload: { grace_period_seconds: -1 } })).statusCode).toBe(400);
    await test(created.id);
    await waitFor(() => hook.received.length === 2, 5_000, 'the delivery after a rotation without grace');
    const after = hook.received[1]!;
    expect(String(after.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(verified(after, newest).type).toBe('webhook.test');
    expect(() => verified(after, fresh)).toThrow('No matching signature found');
    const shown = await api.call(owner.apiKey, { method: 'GET', url: `${base()}/${created.id}` });
    for (const secret of [created.secret, fresh, newest]) expect(shown.body).not.toContain(secret.slice(6));
  });

  it('refuses addresses outside PGWARD_WEBHOOK_ALLOWED_NETWORKS, also a name resolving into a private range, and never follows a redirect', async () => {
    const hook = await receiver();
    const target = await receiver();
    hook.answer = (_request, response) => void response.writeHead(302, { location: target.url }).end();
    const loopback = await create(`http://127.0.0.1:${target.port}/direct`);
    const named = await create(`http://internal.example.test:${target.port}/named`);
    const redirecting = await create(hook.url);
    startDelivery({ allowed: 'public', horizonMs: 1, resolve: async () => ['10.1.2.3'] });
    await test(loopback.id);
    await test(named.id);
    await waitFor(async () => (await attempts(loopback.id)).length === 1 && (await attempts(named.id)).length === 1, 5_000, 'both refusals');
    expect(await attempts(loopback.id)).toEqual([expect.objectContaining({ status_code: null, outcome: 'failed', error: '127.0.0.1 is outside PGWARD_WEBHOOK_ALLOWED_NETWORKS; not sent' })]);
    expect(await attempts(named.id)).toEqual([expect.objectContaining({ status_code: null, outcome: 'failed', error: 'internal.example.test resolves to 10.1.2.3, which is outside PGWARD_WEBHOOK_ALLOWED_NETWORKS; not sent' })]);
    expect(target.received).toHaveLength(0);
    // Given up at once (a 1 ms horizon): the endpoint is marked failing.
    const failing = await api.call(owner.apiKey, { method: 'GET', url: `${base()}/${loopback.id}` });
    expect(failing.json()).toMatchObject({ delivery_status: 'failing', failing_since: expect.any(String) });
    const logged = logLines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.event === 'webhook_failing' && line.webhook_id === loopback.id);
    expect(logged).toEqual([expect.objectContaining({ level: 40, project_id: projectId, attempts: 1, error: '127.0.0.1 is outside PGWARD_WEBHOOK_ALLOWED_NETWORKS; not sent' })]);
    await delivery!.stop();
    startDelivery({ allowed: '127.0.0.0/8', horizonMs: 1 });
    await test(redirecting.id);
    await waitFor(async () => (await attempts(redirecting.id)).length === 1, 5_000, 'the redirect attempt');
    expect(await attempts(redirecting.id)).toEqual([expect.objectContaining({ status_code: 302, outcome: 'failed', error: 'redirect not followed (302)' })]);
    expect(hook.received).toHaveLength(1);
    expect(target.received).toHaveLength(0);
  });
});
