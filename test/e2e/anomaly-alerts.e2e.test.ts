/**
 * The acceptance of issue 21's anomaly half on `pgward serve` as `npm start` runs it (embedded
 * state, workers): a honeytoken tripped through node-postgres is an open critical alert in
 * GET .../anomalies within 5 s; the project's anomaly rule disables the credential (the honeytoken
 * itself does not); acknowledging and resolving work once each, the same call twice answers 409;
 * `pgward projections rebuild --verify` reproduces the read models.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, type TestDatabase } from '../support/pg.js';
import { pgwardCli } from '../support/pgward-process.js';
import { projectDatabase, startServe, type ServedPgward, type ServeOrg } from '../support/serve-fixture.js';

let upstream: TestDatabase;
let served: ServedPgward | undefined;
let org: ServeOrg;
let projectId: string;

const call = (method: string, path: string, payload?: object) => org.call(method, path, payload);

async function created(path: string, payload: object): Promise<Record<string, unknown>> {
  const { status, body } = await call('POST', path, payload);
  if (status !== 201) throw new Error(`POST ${path}: ${status} ${JSON.stringify(body)}`);
  return body;
}

beforeAll(async () => {
  upstream = await freshDatabase('anomaly_alerts');
  const seed = new pg.Client({ connectionString: upstream.url });
  await seed.connect();
  await seed.query(`create table orders (id int primary key, total int not null); insert into orders select g, g from generate_series(1, 10) g;
    create table api_keys (id int primary key, secret text not null); insert into api_keys values (1, 'sk_live_canary');`);
  await seed.end();
  served = await startServe({ label: 'anomalies' });
  org = served.createOrg('Anomalies');
  projectId = ((await created('/v1/projects', { name: 'anomalies', org_id: org.orgId, database: projectDatabase(upstream) })) as { project: { id: string } }).project.id;
}, 180_000);

afterAll(async () => {
  await served?.stop();
  await upstream?.drop();
});

describe('a honeytoken tripped through node-postgres', () => {
  it('is an open critical alert within 5 s; the anomaly rule disables the credential; acknowledge and resolve once each', async () => {
    const honeytoken = (await created(`/v1/projects/${projectId}/honeytokens`, { kind: 'table', target: 'public.api_keys', disable_credential: false })).id as string;
    const policy = (await created(`/v1/projects/${projectId}/policies`, { name: 'canaried', read_only: true, allowed_tables: ['public.orders', 'public.api_keys'], honeytokens: [honeytoken] })).id as string;
    const agent = (await created(`/v1/projects/${projectId}/agents`, { name: 'tripper', policy_profile_id: policy })) as { credential: { id: string }; connection_string: string };
    const rules = await call('PUT', `/v1/projects/${projectId}/anomaly-rules`, { rules: { canary_tripped: { disable_credential: true } } });
    expect(rules.status).toBe(200);

    const client = new pg.Client({ connectionString: agent.connection_string, ssl: false });
    client.on('error', () => undefined);
    await client.connect();
    expect((await client.query('select count(*)::int as n from orders')).rows).toEqual([{ n: 10 }]);
    const refused = await client.query('select secret from api_keys').catch((error: unknown) => error as { code: string });
    const tripped = Date.now();
    expect(refused).toMatchObject({ code: '42501' });

    let alerts: Record<string, unknown>[] = [];
    while (alerts.length === 0 && Date.now() - tripped < 5_000) {
      alerts = (await call('GET', `/v1/projects/${projectId}/anomalies?status=open&severity=critical`)).body.anomalies as Record<string, unknown>[];
      if (alerts.length === 0) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const seenAfter = Date.now() - tripped;
    expect(alerts, `no alert ${seenAfter} ms after the trip`).toHaveLength(1);
    expect(seenAfter).toBeLessThan(5_000);
    const [alert] = alerts as [{ id: string; kind: string; severity: string; status: string; credential_id: string; title: string; details: Record<string, unknown> }];
    expect(alert).toMatchObject({ kind: 'canary_tripped', severity: 'critical', status: 'open', credential_id: agent.credential.id, title: `Credential ${agent.credential.id} touched a honeytoken (rule honeytoken.table)` });
    expect(alert.details).toMatchObject({ rule: 'honeytoken.table', action: 'disable_credential' });

    // The honeytoken does not disable; the anomaly rule does, and the credential's next login is refused.
    const deadline = Date.now() + 5_000;
    while ((await call('GET', `/v1/projects/${projectId}/agents/${agent.credential.id}`)).body.status !== 'disabled' && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    expect((await call('GET', `/v1/projects/${projectId}/agents/${agent.credential.id}`)).body.status).toBe('disabled');
    const login = new pg.Client({ connectionString: agent.connection_string, ssl: false });
    expect(await login.connect().then(() => 'connected', (error: unknown) => (error as { code: string }).code)).toBe('28P01');

    const path = `/v1/projects/${projectId}/anomalies/${alert.id}`;
    expect(await call('POST', `${path}/acknowledge`)).toMatchObject({ status: 200, body: { status: 'acknowledged', acknowledged_by: expect.stringMatching(/^api_key:/) as unknown } });
    expect(await call('POST', `${path}/acknowledge`)).toMatchObject({ status: 409, body: { code: 'INVALID_STATE' } });
    expect(await call('POST', `${path}/resolve`)).toMatchObject({ status: 200, body: { status: 'resolved' } });
    expect(await call('POST', `${path}/resolve`)).toMatchObject({ status: 409, body: { code: 'INVALID_STATE' } });
    expect(await call('GET', path)).toMatchObject({ status: 200, body: { status: 'resolved' } });
  });

  it('pgward projections rebuild --verify reproduces the anomaly read models', () => {
    for (const name of ['anomaly_windows', 'anomalies']) {
      const result = pgwardCli(['projections', 'rebuild', name, '--verify'], served!.env);
      expect(result.status, `${result.stdout}\n${result.stderr}`).toBe(0);
      expect(result.stdout).toContain('"identical": true');
    }
  });
});
