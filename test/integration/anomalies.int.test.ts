/**
 * Anomaly detection end to end on the real control plane: a synthetic traffic history appended
 * to the event store as audit events with chosen timestamps → the anomaly_windows projection →
 * the raiser → AnomalyRaised events → the alerts API; replays raise nothing twice; rebuild
 * --verify reproduces the read models; acknowledge/resolve transitions; the rules API.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anomaliesProjection } from '../../projections/anomalies.js';
import { anomalyWindowsProjection } from '../../projections/anomaly-windows.js';
import { auditStream } from '../../projections/audit.js';
import { awaitCaughtUp, rebuildAndVerify } from '../../projections/maintenance.js';
import { anomalyId } from '../../src/anomalies/detect.js';
import { startAnomalyRaiser } from '../../src/anomalies/raiser.js';
import { AnomalyRaised } from '../../src/events/anomalies.js';
import { StatementDecided } from '../../src/events/audit.js';
import { encodeEvent } from '../../src/events/envelope.js';
import pino from 'pino';
import { startApi, type TestApi } from '../support/api.js';
import { CREDENTIAL_A, CREDENTIAL_B, EXPECTED_ALERTS, syntheticHistory, type SyntheticEntry } from '../support/anomaly-history.js';
import { placed } from '../support/decisions.js';

let api: TestApi;
let owner: { orgId: string; apiKey: string };
let projectId: string;

type Alert = { id: string; credential_id: string; kind: string; severity: string; status: string; window_start: string; window_end: string; created_at: string; details: Record<string, unknown>; acknowledged_by: string | null; resolved_by: string | null };

function decisionEvent(entry: SyntheticEntry, n: number) {
  return encodeEvent(
    StatementDecided,
    placed({
      event: entry.event, project_id: projectId, credential_id: entry.credentialId, session_id: 'px.1.1', source: 'wire', region: 'local', client_ip: '', ts: entry.ts, sql: 'select 1',
      normalized_sql: 'select $1', query_hash: entry.queryHash, statement_kind: 'select', decision_rule: entry.rule, reason: '', cache_status: 'none', rows_returned: '1',
      bytes_out: String(entry.bytesOut), latency_us: 100, tables_read: [], tables_written: [], tables_blocked: [], parsed: true, proxy_id: 'px', boot_epoch: 1, seq: String(n + 1), approval_id: null,
    }),
    { event_id: randomUUID(), correlation_id: 'ingest', actor: 'ingest', at: entry.ts },
  );
}

async function listAll(query = ''): Promise<Alert[]> {
  const response = await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects/${projectId}/anomalies?page_size=100${query}` });
  expect(response.statusCode).toBe(200);
  return (response.json() as { anomalies: Alert[] }).anomalies;
}

async function raisedEvents(): Promise<string[]> {
  const events = await api.store.readAll(-1n, { streamPrefixes: ['anomaly-'], limit: 10_000 });
  return events.filter((e) => e.type === AnomalyRaised.type).map((e) => e.stream);
}

async function waitFor<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value).slice(0, 500)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

beforeAll(async () => {
  api = await startApi('anomalies');
  owner = await api.org();
  projectId = await api.project(owner);
  const history = syntheticHistory();
  // Appended in uneven chunks, so the projection sees batches of several sizes.
  const events = history.map(decisionEvent);
  for (let i = 0; i < events.length; ) {
    const size = 1 + ((i * 7919) % 700);
    await api.store.append(auditStream(projectId), events.slice(i, i + size), 'any');
    i += size;
  }
  await waitFor('every alert', () => listAll(), (alerts) => alerts.length >= EXPECTED_ALERTS.length);
}, 120_000);

afterAll(async () => {
  await api?.stop();
});

describe('anomaly alerts from a synthetic history', () => {
  it('are exactly the expected ones, newest first, each an AnomalyRaised event on the stream of its derived id', async () => {
    const alerts = await listAll();
    expect(
      alerts.map((a) => ({
        credential_id: a.credential_id, kind: a.kind, severity: a.severity, window_start: a.window_start, observed: a.details.observed,
        ...(a.details.threshold === undefined ? {} : { threshold: a.details.threshold }), sample_query_hashes: a.details.sample_query_hashes,
      })),
    ).toEqual([...EXPECTED_ALERTS].reverse());
    for (const alert of alerts) {
      expect(alert.id).toBe(anomalyId(projectId, alert.credential_id, alert.kind as never, alert.window_start));
      expect(alert.status).toBe('open');
      expect(alert.created_at).toBe(alert.details.observed_at);
      expect(Date.parse(alert.window_end) - Date.parse(alert.window_start)).toBe(3_600_000);
    }
    expect((await raisedEvents()).sort()).toEqual(alerts.map((a) => `anomaly-${a.id}`).sort());
  });

  it('a raiser replaying every detection from the start raises nothing twice', async () => {
    await api.pool.query(`delete from pgward.anomaly_raiser_checkpoint`);
    const replay = startAnomalyRaiser({ store: api.store, pool: api.pool, logger: pino({ level: 'silent' }) });
    await waitFor('the replay to reach the last detection', async () => (await api.pool.query<{ n: number }>(`select count(*)::int as n from pgward.anomaly_raiser_checkpoint`)).rows[0]!.n, (n) => n === 1);
    await replay.stop();
    expect(await raisedEvents()).toHaveLength(EXPECTED_ALERTS.length);
  });

  it('rebuild --verify reproduces the anomaly windows and the alerts byte for byte', async () => {
    for (const projection of [anomalyWindowsProjection, anomaliesProjection]) {
      const result = await rebuildAndVerify(api.store, api.pool, projection);
      expect(result.identical, JSON.stringify(result)).toBe(true);
      expect(Object.values(result.live).some((table) => table.rows > 0)).toBe(true);
    }
  });

  it('filters by status, kind, severity and credential, and pages newest first', async () => {
    expect(await listAll('&kind=canary_tripped')).toHaveLength(3);
    expect((await listAll('&severity=critical')).map((a) => a.kind)).toEqual(['canary_tripped', 'canary_tripped', 'canary_tripped']);
    expect((await listAll(`&credential_id=${CREDENTIAL_B}`)).map((a) => a.kind)).toEqual(['canary_tripped']);
    expect(await listAll('&status=resolved&credential_id=' + CREDENTIAL_A)).toEqual([]);
    const all = await listAll();
    const paged: Alert[] = [];
    let token = '';
    for (let pages = 0; pages < 10; pages++) {
      const response = await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects/${projectId}/anomalies?page_size=3${token ? `&page_token=${token}` : ''}` });
      const page = response.json() as { anomalies: Alert[]; next_page_token: string };
      paged.push(...page.anomalies);
      token = page.next_page_token;
      if (!token) break;
    }
    expect(paged.map((a) => a.id)).toEqual(all.map((a) => a.id));
    const bad = await api.call(owner.apiKey, { method: 'GET', url: `/v1/projects/${projectId}/anomalies?severity=urgent` });
    expect(bad.statusCode).toBe(400);
  });

  it('acknowledge then resolve, each once: the same call twice answers 409 INVALID_STATE and changes nothing', async () => {
    const [alert] = await listAll(`&kind=egress_spike`);
    const url = `/v1/projects/${projectId}/anomalies/${alert!.id}`;
    const post = (action: string) => api.call(owner.apiKey, { method: 'POST', url: `${url}/${action}` });
    const acknowledged = await post('acknowledge');
    expect(acknowledged.statusCode).toBe(200);
    expect(acknowledged.json()).toMatchObject({ status: 'acknowledged', acknowledged_by: expect.stringMatching(/^api_key:key_/) as unknown });
    const again = await post('acknowledge');
    expect(again.statusCode).toBe(409);
    expect(again.json()).toMatchObject({ code: 'INVALID_STATE' });
    const resolved = await post('resolve');
    expect(resolved.statusCode).toBe(200);
    expect(resolved.json()).toMatchObject({ status: 'resolved', acknowledged_by: expect.stringMatching(/^api_key:key_/) as unknown, resolved_by: expect.stringMatching(/^api_key:key_/) as unknown });
    for (const action of ['resolve', 'acknowledge']) {
      const refused = await post(action);
      expect(refused.statusCode).toBe(409);
      expect(refused.json()).toMatchObject({ code: 'INVALID_STATE' });
    }
    expect((await api.call(owner.apiKey, { method: 'GET', url }).then((r) => r.json() as Alert)).status).toBe('resolved');
    expect((await api.store.readStream(`anomaly-${alert!.id}`)).map((e) => e.type)).toEqual(['AnomalyRaised.v1', 'AnomalyAcknowledged.v1', 'AnomalyResolved.v1']);
    // An open alert may be resolved without an acknowledgement.
    const [canary] = await listAll(`&credential_id=${CREDENTIAL_B}`);
    expect((await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/anomalies/${canary!.id}/resolve` })).json()).toMatchObject({ status: 'resolved', acknowledged_by: null });
    expect((await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/anomalies/ano_nosuchalertaaaaaaaaaaaaaa/resolve` })).statusCode).toBe(404);
    const other = await api.org();
    expect((await api.call(other.apiKey, { method: 'GET', url })).statusCode).toBe(404);
    expect((await api.call(other.apiKey, { method: 'POST', url: `${url}/resolve` })).statusCode).toBe(404);
  });
});

describe('anomaly rules', () => {
  const url = () => `/v1/projects/${projectId}/anomaly-rules`;

  it('are the defaults until set; a PUT replaces them and reads back as set', async () => {
    const initial = await api.call(owner.apiKey, { method: 'GET', url: url() });
    expect(initial.statusCode).toBe(200);
    expect(initial.json()).toMatchObject({
      revision: -1,
      credentials: {},
      rules: { volume_spike: { enabled: true, sigma: 4.5, floor: 100, learning_hours: 24, disable_credential: false }, canary_tripped: { enabled: true, disable_credential: false } },
    });
    const policy = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/policies`, payload: { name: 'read', read_only: true } });
    const credential = await api.call(owner.apiKey, { method: 'POST', url: `/v1/projects/${projectId}/agents`, payload: { name: 'watched', policy_profile_id: (policy.json() as { id: string }).id } });
    expect(credential.statusCode).toBe(201);
    const credentialId = (credential.json() as { credential: { id: string } }).credential.id;
    const body = { rules: { egress_spike: { sigma: 6.25, floor: 1024 }, canary_tripped: { disable_credential: true } }, credentials: { [credentialId]: { volume_spike: { enabled: false } } } };
    const put = await api.call(owner.apiKey, { method: 'PUT', url: url(), payload: body });
    expect(put.statusCode).toBe(200);
    expect(put.json()).toMatchObject({ revision: 0, rules: { egress_spike: { sigma: 6.25, floor: 1024, learning_hours: 24 }, canary_tripped: { disable_credential: true } }, credentials: body.credentials });
    expect((await api.call(owner.apiKey, { method: 'GET', url: url() })).json()).toEqual(put.json());
    // The same document again decides nothing.
    expect((await api.call(owner.apiKey, { method: 'PUT', url: url(), payload: body })).json()).toMatchObject({ revision: 0 });
  });

  it.each([
    ['an unknown member', { rules: { volume_spike: { sigma: 3, threshold: 5 } } }],
    ['an unknown kind', { rules: { slow_queries: { enabled: true } } }],
    ['a sigma on off_hours', { rules: { off_hours: { sigma: 2 } } }],
    ['a sigma with four decimals', { rules: { volume_spike: { sigma: 4.5001 } } }],
    ['a negative floor', { rules: { error_spike: { floor: -1 } } }],
    ['a fractional floor', { rules: { error_spike: { floor: 1.5 } } }],
    ['a credential of no project', { credentials: { agt_nosuchcredentialaaaaaaaa: { off_hours: { enabled: false } } } }],
    ['an unknown top-level member', { rules: {}, extra: true }],
  ])('refuse %s with 400 and change nothing', async (_what, payload) => {
    const before = (await api.call(owner.apiKey, { method: 'GET', url: url() })).json() as { revision: number };
    const response = await api.call(owner.apiKey, { method: 'PUT', url: url(), payload });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({ code: 'INVALID_INPUT' });
    expect((await api.call(owner.apiKey, { method: 'GET', url: url() })).json()).toEqual(before);
  });
});

describe('rules in the event log', () => {
  it('apply from where they were set: canaries after a rule turns them off raise nothing, after it turns them back on they do', async () => {
    const canaries = (day: string) => syntheticHistory().filter((e) => e.event === 'canary_tripped').map((e) => ({ ...e, ts: e.ts.replace('2026-03-05', day) }));
    const setCanary = async (enabled: boolean) => {
      const put = await api.call(owner.apiKey, { method: 'PUT', url: `/v1/projects/${projectId}/anomaly-rules`, payload: { rules: { canary_tripped: { enabled } } } });
      expect(put.statusCode).toBe(200);
    };
    const detections = async () => (await api.pool.query<{ n: number }>(`select count(*)::int as n from rm.anomaly_detections where project_id = $1 and kind = 'canary_tripped'`, [projectId])).rows[0]!.n;
    const before = await detections();
    await setCanary(false);
    await api.store.append(auditStream(projectId), canaries('2026-03-09').map((e, n) => decisionEvent(e, 10_000 + n)), 'any');
    expect(await awaitCaughtUp(api.store, api.pool, anomalyWindowsProjection, 10_000)).toBe(true);
    expect(await detections()).toBe(before);
    await setCanary(true);
    await api.store.append(auditStream(projectId), canaries('2026-03-10').map((e, n) => decisionEvent(e, 20_000 + n)), 'any');
    // B's canary, then A's two hours (two entries in the first): three alerts.
    const after = await waitFor('three new canary alerts', () => listAll('&kind=canary_tripped'), (alerts) => alerts.length >= before + 3);
    expect(after.slice(0, 3).map((a) => [a.credential_id, a.window_start])).toEqual([
      [CREDENTIAL_A, '2026-03-10T13:00:00.000Z'],
      [CREDENTIAL_A, '2026-03-10T12:00:00.000Z'],
      [CREDENTIAL_B, '2026-03-10T02:00:00.000Z'],
    ]);
    expect(await detections()).toBe(before + 3);
  });
});
