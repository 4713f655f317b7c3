import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { GAP_MARKER, type AuditEntryEvent } from '../../src/audit/entry.js';
import { SESSION_SCAN_LIMIT, summarizeSession, type SessionEntry } from '../../src/audit/session-summary.js';
import { agentUsageReport, dropMarkers, marginalRates, outcomeOf, type AgentUsageLine, type EntryGroup, type LatencyPercentiles } from '../../src/audit/usage.js';
import { AuditEventKind, CacheStatus, decisionGroup } from '../../src/events/audit.js';
import { plans } from '../../src/plans.js';

const PROJECT = 'prj_aaaaaaaaaaaaaaaaaaaaaaaaaa';
const START = '2026-01-01T00:00:00.000Z';
const END = '2026-01-31T00:00:00.000Z';

interface Entry {
  credential_id: string | null;
  event: AuditEntryEvent;
  cache_status: CacheStatus;
  latency_us: number | null;
  rows_returned: number;
  bytes_out: number;
  ts: string;
}

const events: AuditEntryEvent[] = [...AuditEventKind.options, GAP_MARKER];

const entryArb: fc.Arbitrary<Entry> = fc.record({
  credential_id: fc.constantFrom(null, 'agt_aaaaaaaaaaaaaaaaaaaa', 'agt_bbbbbbbbbbbbbbbbbbbb', 'agt_cccccccccccccccccccc'),
  event: fc.constantFrom(...events),
  cache_status: fc.constantFrom(...CacheStatus.options),
  latency_us: fc.option(fc.nat(5_000_000), { freq: 4 }),
  rows_returned: fc.nat(10_000),
  bytes_out: fc.nat(1_000_000),
  ts: fc.integer({ min: Date.parse(START), max: Date.parse(END) - 1 }).map((ms) => new Date(ms).toISOString()),
});

/** What the SQL GROUP BY does: group by credential, event, cache status and whether a latency was recorded. */
function grouped(entries: readonly Entry[]): EntryGroup[] {
  const groups = new Map<string, EntryGroup>();
  for (const e of entries) {
    const key = JSON.stringify([e.credential_id, e.event, e.cache_status, e.latency_us !== null]);
    const g = groups.get(key);
    groups.set(key, {
      credential_id: e.credential_id,
      event: e.event,
      cache_status: e.cache_status,
      timed: e.latency_us !== null,
      entries: (g?.entries ?? 0) + 1,
      rows_returned: (g?.rows_returned ?? 0) + e.rows_returned,
      bytes_out: (g?.bytes_out ?? 0) + e.bytes_out,
      latency_us: (g?.latency_us ?? 0) + (e.latency_us ?? 0),
      first_seen: g && g.first_seen < e.ts ? g.first_seen : e.ts,
      last_seen: g && g.last_seen > e.ts ? g.last_seen : e.ts,
    });
  }
  return [...groups.values()];
}

const measured = (e: Entry) => outcomeOf(e.event).ran && e.latency_us !== null;

/** percentile_disc: the first value whose cumulative fraction reaches p. */
function nearestRank(entries: readonly Entry[]): LatencyPercentiles | undefined {
  const values = entries.filter(measured).map((e) => e.latency_us!).sort((a, b) => a - b);
  if (values.length === 0) return undefined;
  const at = (p: number) => values[Math.max(1, Math.ceil(p * values.length)) - 1]!;
  return [at(0.5), at(0.95), at(0.99)];
}

function report(entries: readonly Entry[], groups: EntryGroup[] = grouped(entries), markers: { reason: string; count: number | null }[] = []) {
  const credentials = [...new Set(entries.map((e) => e.credential_id))];
  const percentiles = new Map(credentials.flatMap((id) => {
    const p = nearestRank(entries.filter((e) => e.credential_id === id));
    return p ? [[id, p] as const] : [];
  }));
  return agentUsageReport({ projectId: PROJECT, requestedStart: START, requestedEnd: END, groups, percentiles, totalPercentiles: nearestRank(entries), markers, plan: 'pro', terms: plans.pro });
}

const additive = ['entries', 'allowed', 'blocked', 'masked', 'truncated', 'rows_returned', 'bytes_out', 'cache_hit', 'cache_stale', 'cache_miss', 'cache_bypass', 'cache_none', 'latency_measured', 'latency_unmeasured', 'latency_ms_total'] as const;

function expectLineMatches(line: AgentUsageLine, entries: readonly Entry[]): void {
  const count = (pick: (e: Entry) => boolean) => entries.filter(pick).length;
  const statements = count((e) => e.event !== GAP_MARKER && decisionGroup(e.event) !== null);
  expect(line.entries).toBe(entries.length);
  expect(line.allowed + line.blocked + line.masked + line.truncated).toBe(statements);
  expect(line.allowed).toBe(count((e) => e.event === 'query'));
  expect(line.masked).toBe(count((e) => e.event === 'masked'));
  expect(line.truncated).toBe(count((e) => e.event === 'truncated'));
  expect(line.cache_hit + line.cache_stale + line.cache_miss + line.cache_bypass + line.cache_none).toBe(line.entries);
  expect(line.cache_none).toBe(count((e) => !outcomeOf(e.event).ran || e.cache_status === 'none'));
  expect(line.latency_measured).toBe(count(measured));
  expect(line.latency_measured + line.latency_unmeasured).toBe(line.entries);
  // Lines divide their exact microsecond sum once; totals add the lines' doubles, so they may differ in the last place.
  expect(line.latency_ms_total).toBeCloseTo(entries.filter(measured).reduce((sum, e) => sum + e.latency_us!, 0) / 1000, 9);
  expect(line.rows_returned).toBe(entries.reduce((sum, e) => sum + e.rows_returned, 0));
  expect(line.bytes_out).toBe(entries.reduce((sum, e) => sum + e.bytes_out, 0));
  const stamps = entries.map((e) => e.ts).sort();
  expect([line.first_seen, line.last_seen]).toEqual([stamps[0] ?? null, stamps.at(-1) ?? null]);
  const [p50, p95, p99] = nearestRank(entries) ?? [0, 0, 0];
  expect([line.latency_p50_ms, line.latency_p95_ms, line.latency_p99_ms]).toEqual([p50 / 1000, p95 / 1000, p99 / 1000]);
}

describe('agent usage report', () => {
  it('classifies every event: refusals are blocked, only allowed, masked and truncated ran, progress rows and gap markers decide nothing', () => {
    expect(Object.fromEntries(events.map((event) => [event, outcomeOf(event)]))).toEqual({
      query: { decision: 'allow', ran: true },
      blocked: { decision: 'block', ran: false },
      budget_exhausted: { decision: 'block', ran: false },
      auth_failed: { decision: 'block', ran: false },
      credential_expired: { decision: 'block', ran: false },
      canary_tripped: { decision: 'block', ran: false },
      rejected: { decision: 'block', ran: false },
      approval_expired: { decision: 'block', ran: false },
      masked: { decision: 'mask', ran: true },
      truncated: { decision: 'truncate', ran: true },
      approval_requested: { decision: null, ran: false },
      approved: { decision: null, ran: false },
      migration_flagged: { decision: null, ran: false },
      gap_marker: { decision: null, ran: false },
    });
  });

  it('property: each line counts its entries exactly, totals are the sum of the lines, and the grouping does not matter', () => {
    fc.assert(
      fc.property(fc.array(entryArb, { maxLength: 60 }), (entries) => {
        const result = report(entries);
        const lines = [...result.agents, result.unattributed];
        for (const line of lines) {
          const own = entries.filter((e) => e.credential_id === line.credential_id);
          expectLineMatches(line, own);
          expect(line.latency_ms_total).toBe(own.filter(measured).reduce((sum, e) => sum + e.latency_us!, 0) / 1000);
        }
        expectLineMatches(result.totals, entries);
        for (const field of additive) expect(result.totals[field]).toBe(lines.reduce((sum, line) => sum + line[field], 0));
        expect(result.agents.every((line) => line.credential_id !== null && line.entries > 0)).toBe(true);
        for (const [a, b] of result.agents.slice(1).map((line, i) => [result.agents[i]!, line] as const)) {
          expect(a.entries > b.entries || (a.entries === b.entries && a.credential_id! < b.credential_id!)).toBe(true);
        }
        expect(report(entries, entries.flatMap((e) => grouped([e])))).toEqual(result);
      }),
      { numRuns: 300 },
    );
  });

  it('covers nothing in an empty window: the window collapses onto requested_end, every line is zero, the trail is complete', () => {
    const result = report([]);
    expect(result).toMatchObject({ window_start: END, window_end: END, complete: true, agents: [] });
    const zero = { entries: 0, latency_p50_ms: 0, latency_ms_total: 0, first_seen: null, last_seen: null, credential_id: null };
    expect(result.unattributed).toMatchObject(zero);
    expect(result.totals).toMatchObject(zero);
  });

  it('reports the window as the first and last covered entry', () => {
    const base = { credential_id: null, event: 'query', cache_status: 'hit', latency_us: 1, rows_returned: 0, bytes_out: 0 } as const;
    const result = report([{ ...base, ts: '2026-01-05T00:00:00.000Z' }, { ...base, ts: '2026-01-02T00:00:00.000Z' }]);
    expect([result.window_start, result.window_end]).toEqual(['2026-01-02T00:00:00.000Z', '2026-01-05T00:00:00.000Z']);
  });

  it('reads at most 1000 drop markers: counts only known counts, names unknown ones, sorts distinct reasons', () => {
    const read = [...Array.from({ length: 1000 }, (_, i) => ({ reason: i % 2 ? 'proxy_buffer_full' : 'hole', count: i % 10 === 0 ? null : 2 })), { reason: 'beyond_cap', count: 1_000_000 }];
    expect(dropMarkers(read)).toEqual({ markers: 1000, truncated: true, entries_dropped: 900 * 2, markers_unparsed: 100, reasons: ['hole', 'proxy_buffer_full'] });
    expect(dropMarkers([])).toEqual({ markers: 0, truncated: false, entries_dropped: 0, markers_unparsed: 0, reasons: [] });
    expect(report([], [], [{ reason: 'hole', count: null }]).complete).toBe(false);
  });

  it('derives marginal rates from the plan: overage is billable only with a limit and a price', () => {
    expect(marginalRates('free', plans.free)).toEqual({ plan: 'free', queries_per_day: 10_000, bytes_per_month: 1024 ** 3, overage_per_1k_queries: 0, overage_per_gb: 0, query_overage_billable: false, bytes_overage_billable: false });
    expect(marginalRates('pro', plans.pro)).toMatchObject({ query_overage_billable: true, bytes_overage_billable: true, overage_per_1k_queries: 0.05, overage_per_gb: 0.09 });
    expect(marginalRates('enterprise', plans.enterprise)).toMatchObject({ queries_per_day: 0, bytes_per_month: 0, query_overage_billable: false, bytes_overage_billable: false });
    expect(marginalRates('custom', { ...plans.pro, queriesPerDay: 0 })).toMatchObject({ query_overage_billable: false, bytes_overage_billable: true });
  });
});

function sessionEntry(overrides: Partial<SessionEntry> = {}): SessionEntry {
  return {
    credential_id: 'agt_aaaaaaaaaaaaaaaaaaaa', source: 'wire', event: 'query', ts: '2026-01-01T00:00:00.000Z', rows_returned: 0, bytes_out: 0, latency_us: null,
    tables_read: [], tables_written: [], tables_blocked: [], parsed: true, ...overrides,
  };
}

describe('audit session summary', () => {
  it('counts decisions, sums what ran, and keeps blocked tables out of the read and written lists', () => {
    const summary = summarizeSession(PROJECT, 'px.1.7', [
      sessionEntry({ ts: '2026-01-01T00:00:01.000Z', rows_returned: 3, bytes_out: 120, latency_us: 1500, tables_read: ['public.orders'] }),
      sessionEntry({ ts: '2026-01-01T00:00:00.500Z', event: 'masked', source: 'mcp', rows_returned: 1, bytes_out: 40, latency_us: 250, tables_read: ['customers'] }),
      sessionEntry({ ts: '2026-01-01T00:00:03.000Z', event: 'truncated', rows_returned: 100, bytes_out: 9000, latency_us: null, parsed: false }),
      sessionEntry({ ts: '2026-01-01T00:00:04.000Z', event: 'query', tables_read: ['public.items', 'public.orders'], tables_written: ['public.audit_copy'], latency_us: 10 }),
      sessionEntry({ ts: '2026-01-01T00:00:05.000Z', event: 'blocked', tables_read: ['public.secrets', 'public.orders'], tables_blocked: ['public.secrets'], latency_us: 99 }),
      sessionEntry({ ts: '2026-01-01T00:00:06.000Z', event: 'budget_exhausted', tables_written: ['public.ledger'] }),
      sessionEntry({ ts: '2026-01-01T00:00:07.000Z', event: 'canary_tripped', tables_read: ['public.honey'], tables_blocked: ['public.honey'] }),
      sessionEntry({ ts: '2026-01-01T00:00:08.000Z', event: 'approval_requested', credential_id: 'agt_bbbbbbbbbbbbbbbbbbbb', tables_written: ['public.held'], parsed: false }),
    ]);
    expect(summary).toEqual({
      session_id: 'px.1.7',
      project_id: PROJECT,
      credential_ids: ['agt_aaaaaaaaaaaaaaaaaaaa', 'agt_bbbbbbbbbbbbbbbbbbbb'],
      sources: ['mcp', 'wire'],
      started_at: '2026-01-01T00:00:00.500Z',
      ended_at: '2026-01-01T00:00:08.000Z',
      duration_ms: 7500,
      entries_scanned: 8,
      statements: 7,
      allowed: 2,
      blocked: 3,
      masked: 1,
      truncated: 1,
      other: 1,
      rows_returned: 104,
      bytes_out: 9160,
      latency_ms_total: 1.76,
      tables_read: ['customers', 'public.orders'],
      tables_written: ['public.audit_copy', 'public.items', 'public.orders'],
      tables_blocked: ['public.honey', 'public.ledger', 'public.secrets'],
      unparsed_statements: 1,
      scan_truncated: false,
    });
  });

  it(`reads at most ${SESSION_SCAN_LIMIT} entries and says so`, () => {
    const read = Array.from({ length: SESSION_SCAN_LIMIT + 1 }, (_, i) => sessionEntry({ ts: new Date(Date.parse(START) + i).toISOString(), rows_returned: 1 }));
    expect(summarizeSession(PROJECT, 's', read)).toMatchObject({ entries_scanned: SESSION_SCAN_LIMIT, rows_returned: SESSION_SCAN_LIMIT, scan_truncated: true, duration_ms: SESSION_SCAN_LIMIT - 1 });
    expect(summarizeSession(PROJECT, 's', read.slice(1))).toMatchObject({ entries_scanned: SESSION_SCAN_LIMIT, scan_truncated: false });
  });

  it('property: statements and other partition the scanned entries, and the table lists are sorted, distinct and disjoint from blocked', () => {
    const tables = fc.array(fc.constantFrom('a', 'public.b', 'public.c', 'd'), { maxLength: 3 });
    const arb = fc.record({ event: fc.constantFrom(...events), tables_read: tables, tables_written: tables, tables_blocked: tables, parsed: fc.boolean(), source: fc.constantFrom('wire', 'mcp', 'rest') });
    fc.assert(
      fc.property(fc.array(arb, { minLength: 1, maxLength: 40 }), (overrides) => {
        const s = summarizeSession(PROJECT, 's', overrides.map((o) => sessionEntry(o)));
        expect(s.statements + s.other).toBe(s.entries_scanned);
        expect(s.allowed + s.blocked + s.masked + s.truncated).toBe(s.statements);
        for (const list of [s.tables_read, s.tables_written, s.tables_blocked, s.sources]) expect(list).toEqual([...new Set(list)].sort());
        expect(s.tables_blocked.filter((t) => s.tables_read.includes(t) || s.tables_written.includes(t))).toEqual([]);
      }),
    );
  });
});
