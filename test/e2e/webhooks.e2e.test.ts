/**
 * Webhooks in `pgward serve` as users run it (the proxy in the supervisor, ingest and the
 * projections in the pipeline worker, the API and webhook delivery in the api worker): a honeytoken
 * tripped through node-postgres and through psql reaches a real receiver on 127.0.0.1 as a signed
 * canary_tripped within 5 s; a receiver down while the delivering worker is killed mid-retry gets
 * every message once, in order, when it is back; no secret shows in the process's logs.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateAnchorKey } from '../../src/crypto/checkpoint.js';
import { freshDatabase, type TestDatabase } from '../support/pg.js';
import { metricValue, waitFor, workerPid, type PgwardProcess } from '../support/pgward-process.js';
import { projectDatabase, startServe, type ServedPgward, type ServeOrg } from '../support/serve-fixture.js';
import { missingTool } from '../support/tools.js';
import { startReceiver, verified, type Envelope, type WebhookReceiver } from '../support/webhook-receiver.js';

const noPsql = missingTool('psql');

let state: TestDatabase;
let upstream: TestDatabase;
let served: ServedPgward | undefined;
let server: PgwardProcess | undefined;
let org: ServeOrg;
let receiver: WebhookReceiver;
let projectId: string;
let policyId: string;
let webhook: { id: string; secret: string };

const call = (method: string, path: string, payload?: object) => org.call(method, path, payload);

async function agent(name: string): Promise<{ id: string; url: string }> {
  const created = await call('POST', `/v1/projects/${projectId}/agents`, { name, policy_profile_id: policyId });
  expect(created.status).toBe(201);
  return { id: (created.body.credential as { id: string }).id, url: (created.body.connection_string as string).replace('sslmode=require', 'sslmode=disable') };
}

const envelopes = (): Envelope[] => receiver.received.map((r) => verified(r, webhook.secret));

beforeAll(async () => {
  state = await freshDatabase('webhooks_state');
  upstream = await freshDatabase('webhooks_up');
  const seed = new pg.Client({ connectionString: upstream.url });
  await seed.connect();
  await seed.query(`create table public.orders (id int primary key, total int not null); insert into public.orders select g, g from generate_series(1, 10) g;
    create table public.api_keys (id int primary key, secret text not null); insert into public.api_keys values (1, 'sk_live_canary');`);
  await seed.end();
  served = await startServe({
    label: 'webhooks',
    stateUrl: state.url,
    env: async (dataDir) => {
      const anchor = join(dataDir, 'anchor.pem');
      await writeFile(anchor, generateAnchorKey(), { mode: 0o600 });
      return { PGWARD_MASTER_KEY: randomBytes(32).toString('base64'), PGWARD_AUDIT_ANCHOR_KEY: anchor, PGWARD_LOG_LEVEL: 'debug', PGWARD_WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8' };
    },
  });
  server = served.server;
  org = served.createOrg('Webhooks');
  const project = await call('POST', '/v1/projects', { name: 'webhooks', org_id: org.orgId, database: projectDatabase(upstream) });
  projectId = (project.body.project as { id: string }).id;
  const canary = await call('POST', `/v1/projects/${projectId}/honeytokens`, { kind: 'table', target: 'public.api_keys', disable_credential: true });
  const policy = await call('POST', `/v1/projects/${projectId}/policies`, { name: 'orders', read_only: true, allowed_tables: ['public.orders', 'public.api_keys'], honeytokens: [canary.body.id] });
  policyId = policy.body.id as string;
  receiver = await startReceiver();
  const created = await call('POST', `/v1/projects/${projectId}/webhooks`, { url: receiver.url, event_types: ['canary_tripped', 'credential_disabled'] });
  expect(created.status).toBe(201);
  webhook = created.body as { id: string; secret: string };
}, 180_000);

afterAll(async () => {
  await served?.stop();
  await receiver?.close();
  await upstream?.drop();
  await state?.drop();
});

describe('webhooks in pgward serve', () => {
  it('a honeytoken tripped through node-postgres: a signed canary_tripped within 5 s, then credential_disabled, each verified with standardwebhooks', async () => {
    const tripper = await agent('tripper');
    const client = new pg.Client({ connectionString: tripper.url });
    await client.connect();
    await expect(client.query('select * from public.orders where id = 1')).resolves.toMatchObject({ rowCount: 1 });
    const tripped = Date.now();
    await expect(client.query('select secret from public.api_keys')).rejects.toMatchObject({ code: '42501' });
    await client.end().catch(() => undefined);
    await waitFor('the canary_tripped delivery', () => envelopes().filter((e) => e.type === 'canary_tripped').length, (n) => n === 1, 5_000);
    const canary = receiver.received.find((r) => verified(r, webhook.secret).type === 'canary_tripped')!;
    expect(canary.at - tripped).toBeLessThan(5_000);
    const envelope = verified(canary, webhook.secret);
    expect(envelope).toMatchObject({ type: 'canary_tripped', project_id: projectId, data: { audit_event: 'canary_tripped', credential_id: tripper.id, source: 'wire', decision_rule: 'honeytoken.table', honeytoken_id: expect.stringMatching(/^hnt_/) } });
    expect(canary.body).not.toContain('api_keys where');
    expect(canary.body).not.toContain('select secret');
    await waitFor('the credential_disabled delivery', () => envelopes().filter((e) => e.type === 'credential_disabled').length, (n) => n === 1, 5_000);
    expect(envelopes().find((e) => e.type === 'credential_disabled')!.data).toMatchObject({ credential_id: tripper.id, actor: expect.stringMatching(/^honeytoken:hnt_/) });
  });

  it.skipIf(noPsql)(`a honeytoken tripped through psql: a signed canary_tripped and an open critical alert within 5 s, acknowledged and resolved once each${noPsql ? ` (skipped: ${noPsql})` : ''}`, async () => {
    const tripper = await agent('psql-tripper');
    const before = envelopes().filter((e) => e.type === 'canary_tripped').length;
    const tripped = Date.now();
    const psql = spawnSync('psql', [tripper.url, '-X', '-c', 'select * from public.api_keys'], { encoding: 'utf8', timeout: 30_000 });
    expect(psql.status).toBe(1);
    // Told as for a table it may not read; the trail and the webhook say what it was.
    expect(psql.stderr).toContain('table public.api_keys is not in the allowed tables');
    await waitFor('the psql canary_tripped delivery', () => envelopes().filter((e) => e.type === 'canary_tripped' && e.data.credential_id === tripper.id).length, (n) => n === 1, 5_000);
    expect(Date.now() - tripped).toBeLessThan(5_000);
    expect(envelopes().filter((e) => e.type === 'canary_tripped')).toHaveLength(before + 1);
    // The same trip is an open critical alert (issue 21's acceptance, end to end).
    const alerts = await waitFor(
      'the open critical alert',
      async () => ((await call('GET', `/v1/projects/${projectId}/anomalies?status=open&severity=critical&credential_id=${tripper.id}`)).body.anomalies as { id: string; kind: string }[]) ?? [],
      (found) => found.length === 1,
      5_000,
    );
    expect(Date.now() - tripped).toBeLessThan(5_000);
    expect(alerts[0]).toMatchObject({ kind: 'canary_tripped', severity: 'critical', status: 'open', credential_id: tripper.id });
    const alert = `/v1/projects/${projectId}/anomalies/${alerts[0]!.id}`;
    expect(await call('POST', `${alert}/acknowledge`)).toMatchObject({ status: 200, body: { status: 'acknowledged' } });
    expect(await call('POST', `${alert}/acknowledge`)).toMatchObject({ status: 409, body: { code: 'INVALID_STATE' } });
    expect(await call('POST', `${alert}/resolve`)).toMatchObject({ status: 200, body: { status: 'resolved' } });
    expect(await call('POST', `${alert}/resolve`)).toMatchObject({ status: 409, body: { code: 'INVALID_STATE' } });
    await waitFor('its credential_disabled delivery', () => envelopes().filter((e) => e.type === 'credential_disabled' && e.data.credential_id === tripper.id).length, (n) => n === 1, 5_000);
  });

  it('receiver down and the delivering worker killed mid-retry: once both are back, every message arrives once, in order', async () => {
    const seen = receiver.received.length;
    await receiver.down();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const test = await call('POST', `/v1/projects/${projectId}/webhooks/${webhook.id}/test`);
      expect(test.status).toBe(202);
      ids.push(test.body.message_id as string);
    }
    await waitFor('a retry', async () => ((await call('GET', `/v1/projects/${projectId}/webhooks/${webhook.id}/deliveries`)).body.deliveries as { attempt: number }[]).some((d) => d.attempt >= 2), (retried) => retried, 15_000);
    const api = workerPid(server!.child.pid!, 'api')!;
    process.kill(api, 'SIGKILL');
    await waitFor('the api worker restarted', () => workerPid(server!.child.pid!, 'api'), (pid) => pid !== undefined && pid !== api, 30_000);
    await waitFor('healthz', () => fetch(`${server!.httpUrl}/healthz`).then((r) => r.status, () => 0), (status) => status === 200, 30_000);
    await receiver.up();
    await waitFor('all three messages', () => receiver.received.length - seen, (n) => n >= 3, 20_000);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const after = receiver.received.slice(seen);
    expect(after.map((r) => r.headers['webhook-id'])).toEqual(ids);
    expect(after.map((r) => verified(r, webhook.secret).type)).toEqual(['webhook.test', 'webhook.test', 'webhook.test']);
    // The restarted worker's count: the three messages, each delivered once.
    const metrics = await (await fetch(`${server!.httpUrl}/metrics`)).text();
    expect(metricValue(metrics, 'pgward_webhook_attempts_total', { role: 'api', outcome: 'delivered' })).toBe(3);
    const output = server!.output();
    expect(output).toContain('"role":"webhooks"');
    expect(output).not.toContain(webhook.secret.slice('whsec_'.length));
  });
});
