import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditStream } from '../../projections/audit.js';
import { AuditGapRecorded, StatementDecided } from '../../src/events/audit.js';
import { encodeEvent } from '../../src/events/envelope.js';
import { startApi, type TestApi } from '../support/api.js';
import { placed } from '../support/decisions.js';

const START = '2026-03-01T00:00:00.000Z';
const END = '2026-03-02T00:00:00.000Z';
const A = 'agt_aaaaaaaaaaaaaaaaaaaaaaaa';
const B = 'agt_bbbbbbbbbbbbbbbbbbbbbbbb';
const C = 'agt_cccccccccccccccccccccccc';
const D = 'agt_dddddddddddddddddddddddd';
const APPROVAL = 'apr_aaaaaaaaaaaaaaaaaaaaaaaa';

let api: TestApi;
let owner: { orgId: string; apiKey: string };
let stranger: { orgId: string; apiKey: string };
let projectId: string;
let proxySeq = 0;

const at = (minutes: number) => new Date(Date.parse(START) + minutes * 60_000).toISOString();

function decision(overrides: Partial<StatementDecided>): StatementDecided {
  return placed({
    event: 'query', project_id: projectId, credential_id: A, session_id: 'px.1.1', source: 'wire', region: 'local', client_ip: '127.0.0.1', ts: START,
    sql: 'select 1', normalized_sql: '', query_hash: '', statement_kind: 'select', decision_rule: '', reason: '', cache_status: 'miss', rows_returned: '0', bytes_out: '0',
    latency_us: null, tables_read: [], tables_written: [], tables_blocked: [], parsed: true, proxy_id: 'px', boot_epoch: 1, seq: String(++proxySeq), approval_id: null,
    ...overrides,
  });
}

const control = { source: 'control', proxy_id: null, boot_epoch: null, seq: null, session_id: '', client_ip: '' } as const;

/** The trail of the usage report and the session summary: every kind of entry, and one just outside each edge of [START, END). */
function trail() {
  const refused = { cache_status: 'none', latency_us: null } as const;
  const decisions: StatementDecided[] = [
    decision({ ts: START, cache_status: 'hit', rows_returned: '5', bytes_out: '500', latency_us: 2000, tables_read: ['public.orders'] }),
    decision({ ts: at(1), rows_returned: '3', bytes_out: '300', latency_us: 4000, tables_read: ['public.orders'] }),
    decision({ ts: at(2), event: 'masked', source: 'mcp', cache_status: 'bypass', rows_returned: '2', bytes_out: '200', latency_us: 1000, tables_read: ['public.customers'] }),
    decision({ ts: at(3), event: 'truncated', cache_status: 'stale', rows_returned: '100', bytes_out: '10000', latency_us: 8000, parsed: false }),
    decision({ ts: at(4), rows_returned: '1', bytes_out: '50', latency_us: null }),
    decision({ ts: at(5), event: 'blocked', ...refused, tables_read: ['public.secrets'], tables_blocked: ['public.secrets'] }),
    decision({ ts: at(6), event: 'approval_requested', ...refused, approval_id: APPROVAL, parsed: false }),
    decision({ ts: at(7), cache_status: 'bypass', latency_us: 3000, statement_kind: 'insert', tables_read: ['public.items'], tables_written: ['public.orders_archive'] }),
    decision({ ts: at(10), credential_id: B, session_id: 'px.1.2', cache_status: 'hit', rows_returned: '1', bytes_out: '10', latency_us: 500 }),
    decision({ ts: at(11), credential_id: B, session_id: 'px.1.2', event: 'budget_exhausted', ...refused }),
    decision({ ts: at(12), credential_id: B, session_id: 'px.1.2', event: 'canary_tripped', ...refused, tables_read: ['public.honey'], tables_blocked: ['public.honey'] }),
    decision({ ts: at(20), credential_id: C, session_id: 'px.1.3', event: 'credential_expired', ...refused }),
    decision({ ts: at(21), credential_id: D, session_id: 'px.1.5', event: 'rejected', ...refused, approval_id: APPROVAL }),
    decision({ ts: at(30), credential_id: null, session_id: 'px.1.4', event: 'auth_failed', ...refused }),
    decision({ ts: at(31), credential_id: null, ...control, event: 'approval_expired', ...refused, approval_id: APPROVAL }),
    decision({ ts: END, cache_status: 'hit', rows_returned: '7', bytes_out: '70', latency_us: 700, tables_read: ['public.orders'] }),
    decision({ ts: new Date(Date.parse(START) - 1).toISOString(), credential_id: B, session_id: 'px.1.2', cache_status: 'hit', latency_us: 1 }),
  ];
  const gap = (ts: string, count: string | null, reason: string) => ({ project_id: projectId, proxy_id: 'px', boot_epoch: 1, from_seq: '90', to_seq: '94', count, reason, ts });
  const meta = (ts: string) => ({ event_id: randomUUID(), correlation_id: 'ingest', actor: 'ingest', at: ts });
  return [
    ...decisions.map((d) => encodeEvent(StatementDecided, d, meta(d.ts))),
    encodeEvent(AuditGapRecorded, gap(at(40), '5', 'proxy_buffer_full'), meta(at(40))),
    encodeEvent(AuditGapRecorded, gap('2026-03-01T23:59:59.999Z', null, 'bus_hole'), meta(at(41))),
  ];
}

async function projected(count: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { rows } = await api.pool.query<{ n: number }>('select count(*)::int as n from rm.audit_entries where project_id = $1', [projectId]);
    if (rows[0]!.n === count) return;
    if (Date.now() > deadline) throw new Error(`the audit projection holds ${rows[0]!.n} entries, not ${count}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function createProject(org: { orgId: string; apiKey: string }): Promise<string> {
  const database = { host: '127.0.0.1', port: 5432, name: 'shop', username: 'postgres', password: 'upstream-pw' };
  const response = await api.call(org.apiKey, { method: 'POST', url: '/v1/projects', payload: { name: 'Shop', org_id: org.orgId, database } });
  expect(response.statusCode).toBe(201);
  return (response.json() as { project: { id: string } }).project.id;
}

const get = (url: string, key = owner.apiKey) => api.call(key, { method: 'GET', url });
const usage = (query: string, project = projectId, key = owner.apiKey) => get(`/v1/projects/${project}/usage/agents${query}`, key);
const session = (id: string, query = '', project = projectId, key = owner.apiKey) => get(`/v1/projects/${project}/audit/sessions/${id}${query}`, key);

function problem(response: LightMyRequestResponse) {
  expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
  return response.json() as { code: string; status: number; errors?: { field: string; message: string }[] };
}

function line(credentialId: string | null, counts: Record<string, number | string | null>) {
  const zero = {
    entries: 0, allowed: 0, blocked: 0, masked: 0, truncated: 0, rows_returned: 0, bytes_out: 0, cache_hit: 0, cache_stale: 0, cache_miss: 0, cache_bypass: 0, cache_none: 0,
    latency_measured: 0, latency_unmeasured: 0, latency_ms_total: 0, latency_p50_ms: 0, latency_p95_ms: 0, latency_p99_ms: 0,
  };
  return { credential_id: credentialId, ...zero, ...counts };
}

beforeAll(async () => {
  api = await startApi('audit_reports');
  owner = await api.org('pro');
  stranger = await api.org('free');
  projectId = await createProject(owner);
  await createProject(stranger);
  await api.store.append(auditStream(projectId), trail(), 'any');
  await projected(19);
});
afterAll(async () => {
  await api?.stop();
});

describe('agent usage report', () => {
  it('counts exactly the entries of [start, end): per credential busiest first, the unattributed rest, and their sum', async () => {
    const response = await usage(`?start=${START}&end=${END}`);
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({
      project_id: projectId,
      requested_start: START,
      requested_end: END,
      window_start: START,
      window_end: '2026-03-01T23:59:59.999Z',
      complete: false,
      agents: [
        line(A, {
          entries: 8, allowed: 4, blocked: 1, masked: 1, truncated: 1, rows_returned: 111, bytes_out: 11050, cache_hit: 1, cache_stale: 1, cache_miss: 2, cache_bypass: 2, cache_none: 2,
          latency_measured: 5, latency_unmeasured: 3, latency_ms_total: 18, latency_p50_ms: 3, latency_p95_ms: 8, latency_p99_ms: 8, first_seen: START, last_seen: at(7),
        }),
        line(B, {
          entries: 3, allowed: 1, blocked: 2, rows_returned: 1, bytes_out: 10, cache_hit: 1, cache_none: 2, latency_measured: 1, latency_unmeasured: 2,
          latency_ms_total: 0.5, latency_p50_ms: 0.5, latency_p95_ms: 0.5, latency_p99_ms: 0.5, first_seen: at(10), last_seen: at(12),
        }),
        line(C, { entries: 1, blocked: 1, cache_none: 1, latency_unmeasured: 1, first_seen: at(20), last_seen: at(20) }),
        line(D, { entries: 1, blocked: 1, cache_none: 1, latency_unmeasured: 1, first_seen: at(21), last_seen: at(21) }),
      ],
      unattributed: line(null, { entries: 4, blocked: 2, cache_none: 4, latency_unmeasured: 4, first_seen: at(30), last_seen: '2026-03-01T23:59:59.999Z' }),
      totals: line(null, {
        entries: 17, allowed: 5, blocked: 7, masked: 1, truncated: 1, rows_returned: 112, bytes_out: 11060, cache_hit: 2, cache_stale: 1, cache_miss: 2, cache_bypass: 2, cache_none: 10,
        latency_measured: 6, latency_unmeasured: 11, latency_ms_total: 18.5, latency_p50_ms: 2, latency_p95_ms: 8, latency_p99_ms: 8, first_seen: START, last_seen: '2026-03-01T23:59:59.999Z',
      }),
      marginal_rates: { plan: 'pro', queries_per_day: 1_000_000, bytes_per_month: 100 * 1024 ** 3, overage_per_1k_queries: 0.05, overage_per_gb: 0.09, query_overage_billable: true, bytes_overage_billable: true },
      drop_markers: { markers: 2, truncated: false, entries_dropped: 5, markers_unparsed: 1, reasons: ['bus_hole', 'proxy_buffer_full'] },
    });
  });

  it('defaults to the 30 days before now, and an empty window collapses onto requested_end', async () => {
    const before = Date.now();
    const report = (await usage('')).json() as { requested_start: string; requested_end: string; window_start: string; window_end: string; complete: boolean; agents: unknown[]; totals: { entries: number } };
    const end = Date.parse(report.requested_end);
    expect(end).toBeGreaterThanOrEqual(before);
    expect(end).toBeLessThanOrEqual(Date.now());
    expect(Date.parse(report.requested_start)).toBe(end - 30 * 86_400_000);
    expect(report).toMatchObject({ window_start: report.requested_end, window_end: report.requested_end, complete: true, agents: [], totals: { entries: 0 } });
  });

  it('answers 92 days and refuses a longer window or an empty one with 400 naming start', async () => {
    expect((await usage('?start=2026-01-01T00:00:00Z&end=2026-04-03T00:00:00Z')).statusCode).toBe(200);
    for (const query of ['?start=2026-01-01T00:00:00Z&end=2026-04-03T00:00:00.001Z', '?start=2020-01-01T00:00:00Z', `?start=${END}&end=${END}`, '?start=2026-03-01T00:00:00.0001Z']) {
      const response = await usage(query);
      expect(response.statusCode).toBe(400);
      expect(problem(response)).toMatchObject({ code: 'INVALID_INPUT', errors: [{ field: 'start' }] });
    }
  });

  it('answers 404 for a project of another organization', async () => {
    const response = await usage(`?start=${START}&end=${END}`, projectId, stranger.apiKey);
    expect(response.statusCode).toBe(404);
    expect(problem(response).code).toBe('NOT_FOUND');
  });
});

describe('audit session summary', () => {
  const summary = {
    session_id: 'px.1.1',
    credential_ids: [A],
    sources: ['mcp', 'wire'],
    started_at: START,
    blocked: 1,
    masked: 1,
    truncated: 1,
    other: 1,
    tables_read: ['public.customers', 'public.orders'],
    tables_written: ['public.items', 'public.orders_archive'],
    tables_blocked: ['public.secrets'],
    unparsed_statements: 1,
    scan_truncated: false,
  };

  it('summarizes every entry of the session without a window', async () => {
    const response = await session('px.1.1');
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({
      ...summary, project_id: projectId, ended_at: END, duration_ms: 86_400_000, entries_scanned: 9, statements: 8, allowed: 5, rows_returned: 118, bytes_out: 11120, latency_ms_total: 18.7,
    });
  });

  it('summarizes the entries of [start, end) with a window', async () => {
    expect((await session('px.1.1', `?start=${START}&end=${END}`)).json()).toEqual({
      ...summary, project_id: projectId, ended_at: at(7), duration_ms: 7 * 60_000, entries_scanned: 8, statements: 7, allowed: 4, rows_returned: 111, bytes_out: 11050, latency_ms_total: 18,
    });
  });

  it('answers 404 for a session with no entries, and for a project of another organization', async () => {
    for (const response of [await session('px.9.9'), await session('px.1.1', '?start=2026-03-03T00:00:00Z&end=2026-03-04T00:00:00Z'), await session('px.1.1', '', projectId, stranger.apiKey)]) {
      expect(response.statusCode).toBe(404);
      expect(problem(response).code).toBe('NOT_FOUND');
    }
  });
});
