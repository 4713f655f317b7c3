/**
 * Usage rollups of the audit trail, for the agent usage report (spec §2.4, docs/audit.md): per
 * project, UTC hour, credential, event, cache status and whether a latency was recorded, the
 * entry count and sums; and per project, UTC day and credential, a histogram of measured latencies
 * in log-linear buckets, a row an octave (projections/latency-octaves.ts). The audit projection
 * writes them from the entries it chains, in the same transaction, so a report reading both in one
 * snapshot sees the trail at one position. With them,
 * each wire session's span (its first and last decision's time) for the daily usage aggregate's
 * connection_seconds (docs/http-api.md), for sessions whose connection the proxy did not record
 * (projections/connections.ts has those it did). Spans merge with least, greatest and a sum, so the
 * table is the same however entries are batched.
 * `credential` is '' for entries without one (credential ids are never empty).
 */
import { addExact, type ExactSum } from '../src/audit/exact-sum.js';
import { countBucket, latencyBucket } from '../src/audit/latency-buckets.js';
import { outcomeOf } from '../src/audit/usage.js';
import type { AuditEntryContent } from '../src/audit/entry.js';
import { ROLLUP_FILLFACTOR, type ReadModelTable } from './projection.js';
import { octaveHistograms } from './latency-octaves.js';
import { added, type Upsert } from './upserts.js';

export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

/** A sum of entries' counts, each at most 2^53 - 1 (the column is a bigint): exact-sum.ts. */
export type Sum = ExactSum;
export const add: (sum: Sum, value: number) => Sum = addExact;

interface HourRow {
  project_id: string;
  hour: string;
  credential: string;
  event: string;
  cache_status: string;
  timed: boolean;
  entries: number;
  rows_returned: Sum;
  bytes_out: Sum;
  latency_us: Sum;
  first_seen: string;
  last_seen: string;
}

interface LatencyHistogram {
  project_id: string;
  day: string;
  credential: string;
  /** The count of latency bucket n at index n (latency-buckets.ts countBucket). */
  buckets: number[];
}

/** The start of the UTC unit holding `at` (ms); keys use it as a number, rows as an ISO string made once per row. */
const startOf = (at: number, unit: number) => Math.floor(at / unit) * unit;
const iso = (ms: number) => new Date(ms).toISOString();

/**
 * The project and credential in one key: the credential's JSON string ends at its closing quote,
 * so no two pairs share a key. The other parts of a group's key are numbers, booleans and members
 * of enums, none of which holds a space.
 */
const ownerKey = (projectId: string, credential: string): string => `${JSON.stringify(credential)}${projectId}`;

function rollup(entries: readonly AuditEntryContent[]): { hours: HourRow[]; latencies: LatencyHistogram[] } {
  const hours = new Map<string, HourRow>();
  const latencies = new Map<string, LatencyHistogram>();
  // Entries in a row often share their timestamp: each parsed once.
  let ts: string | undefined;
  let at = NaN;
  for (const entry of entries) {
    const credential = entry.credential_id ?? '';
    const owner = ownerKey(entry.project_id, credential);
    const timed = entry.latency_us !== null;
    if (entry.ts !== ts) {
      ts = entry.ts;
      at = Date.parse(ts);
    }
    const hour = startOf(at, HOUR_MS);
    const key = `${entry.event} ${entry.cache_status} ${timed} ${hour} ${owner}`;
    const row = hours.get(key);
    if (row) {
      row.entries += 1;
      row.rows_returned = add(row.rows_returned, entry.rows_returned);
      row.bytes_out = add(row.bytes_out, entry.bytes_out);
      row.latency_us = add(row.latency_us, entry.latency_us ?? 0);
      if (entry.ts < row.first_seen) row.first_seen = entry.ts;
      if (entry.ts > row.last_seen) row.last_seen = entry.ts;
    } else {
      hours.set(key, {
        project_id: entry.project_id, hour: iso(hour), credential, event: entry.event, cache_status: entry.cache_status, timed, entries: 1,
        rows_returned: entry.rows_returned, bytes_out: entry.bytes_out, latency_us: entry.latency_us ?? 0, first_seen: entry.ts, last_seen: entry.ts,
      });
    }
    if (entry.latency_us === null || !outcomeOf(entry.event).ran) continue;
    const day = startOf(at, DAY_MS);
    const latencyKey = `${day} ${owner}`;
    let latency = latencies.get(latencyKey);
    if (!latency) latencies.set(latencyKey, (latency = { project_id: entry.project_id, day: iso(day), credential, buckets: [] }));
    countBucket(latency.buckets, latencyBucket(entry.latency_us));
  }
  return { hours: [...hours.values()], latencies: [...latencies.values()] };
}

export interface SessionSpan {
  project_id: string;
  session_id: string;
  first_at: string;
  last_at: string;
  decisions: number;
}

/** The spans of the wire sessions among `entries` (in any order). */
export function sessionSpans(entries: readonly Pick<AuditEntryContent, 'project_id' | 'session_id' | 'source' | 'ts'>[]): SessionSpan[] {
  const spans = new Map<string, SessionSpan>();
  for (const entry of entries) {
    if (entry.source !== 'wire' || entry.session_id === '') continue;
    // Project ids hold no space, so the pair is one key.
    const key = `${entry.project_id} ${entry.session_id}`;
    const span = spans.get(key);
    if (!span) spans.set(key, { project_id: entry.project_id, session_id: entry.session_id, first_at: entry.ts, last_at: entry.ts, decisions: 1 });
    else {
      if (entry.ts < span.first_at) span.first_at = entry.ts;
      if (entry.ts > span.last_at) span.last_at = entry.ts;
      span.decisions += 1;
    }
  }
  return [...spans.values()];
}

/** Each day's and credential's histogram of latencies. */
const latencyOctaves = octaveHistograms(
  'audit_latency_octaves',
  [['project_id', 'text'], ['day', 'timestamptz'], ['credential', 'text']],
  { rowsTable: 'audit_latency_daily', arrays: { table: 'audit_latency_histograms', column: 'buckets', tableStays: false } },
);

export const auditUsageTables: readonly ReadModelTable[] = [
  {
    name: 'audit_usage_hourly',
    fillfactor: ROLLUP_FILLFACTOR,
    columns: `project_id text not null, hour timestamptz not null, credential text not null, event text not null, cache_status text not null, timed boolean not null,
      entries bigint not null, rows_returned bigint not null, bytes_out bigint not null, latency_us bigint not null, first_seen timestamptz not null, last_seen timestamptz not null,
      primary key (project_id, hour, credential, event, cache_status, timed)`,
    orderBy: 'project_id, hour, credential, event, cache_status, timed',
  },
  latencyOctaves.table,
  {
    name: 'session_spans',
    columns: 'project_id text not null, session_id text not null, first_at timestamptz not null, last_at timestamptz not null, decisions bigint not null, primary key (project_id, session_id)',
    orderBy: 'project_id, session_id',
    indexes: ['project_id, last_at'],
  },
];

/** The upserts that add the entries (in any order) to the rollups of auditUsageTables. */
export function usageUpserts(entries: readonly AuditEntryContent[]): Upsert[] {
  const { hours, latencies } = rollup(entries);
  return [
    {
      table: 'audit_usage_hourly',
      rows: hours,
      onConflict: `(project_id, hour, credential, event, cache_status, timed) do update set ${added(['entries', 'rows_returned', 'bytes_out', 'latency_us'])},
        first_seen = least(t.first_seen, excluded.first_seen), last_seen = greatest(t.last_seen, excluded.last_seen)`,
    },
    latencyOctaves.upsert(latencies),
    {
      table: 'session_spans',
      rows: sessionSpans(entries),
      onConflict: `(project_id, session_id) do update set first_at = least(t.first_at, excluded.first_at), last_at = greatest(t.last_at, excluded.last_at), ${added(['decisions'])}`,
    },
  ];
}
