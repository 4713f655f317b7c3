/**
 * The audit session summary of spec §2.6: counts and table names of one session's oldest entries,
 * never row values. Entries are classified as in the usage report (outcomeOf).
 */
import { z } from 'zod';
import type { AuditEntryEvent } from './entry.js';
import { decisionCount, outcomeOf } from './usage.js';

const Count = z.int().min(0);
const Instant = z.string().describe('ISO 8601 date-time');
const Tables = z.array(z.string());

export const AuditSessionSummary = z
  .object({
    session_id: z.string(),
    project_id: z.string(),
    credential_ids: z.array(z.string()).describe('Sorted; more than one means the session id was reused'),
    sources: z.array(z.string()),
    started_at: Instant,
    ended_at: Instant,
    duration_ms: z.number().min(0),
    entries_scanned: Count.describe('Includes entries with no statement decision'),
    statements: Count.describe('allowed + blocked + masked + truncated'),
    allowed: Count,
    blocked: Count.describe('Every refusal: blocked, budget_exhausted, auth_failed, credential_expired, canary_tripped, rejected, approval_expired'),
    masked: Count,
    truncated: Count,
    other: Count.describe('Scanned entries with no statement decision (approval progress rows)'),
    rows_returned: Count,
    bytes_out: Count,
    latency_ms_total: z.number().min(0),
    tables_read: Tables,
    tables_written: Tables.describe('Includes the tables a write statement only read'),
    tables_blocked: Tables.describe('Attempted and never read or written in the scanned entries'),
    unparsed_statements: Count.describe('Non-zero means the three table lists are incomplete'),
    scan_truncated: z.boolean().describe('The session has more entries than a summary reads; counts cover the oldest'),
  })
  .meta({ id: 'AuditSessionSummary' });
export type AuditSessionSummary = z.infer<typeof AuditSessionSummary>;

/** A summary reads at most this many entries of a session, oldest (lowest seq) first. */
export const SESSION_SCAN_LIMIT = 10_000;

/** The fields of an audit entry a summary reads. */
export interface SessionEntry {
  readonly credential_id: string | null;
  readonly source: string;
  readonly event: AuditEntryEvent;
  readonly ts: string;
  readonly rows_returned: number;
  readonly bytes_out: number;
  readonly latency_us: number | null;
  readonly tables_read: readonly string[];
  readonly tables_written: readonly string[];
  readonly tables_blocked: readonly string[];
  readonly parsed: boolean;
}

const sorted = (values: Iterable<string>) => [...new Set(values)].sort();

/**
 * Tables: a statement that ran reads its tables_read (into tables_written when it wrote anything)
 * and writes its tables_written; a refused statement attempted every table it names. A table the
 * session read or wrote is not "blocked", so tables_blocked holds only what was attempted and
 * never reached, and the three lists stay disjoint as spec §2.6 says.
 */
function tableLists(entries: readonly SessionEntry[]): Pick<AuditSessionSummary, 'tables_read' | 'tables_written' | 'tables_blocked'> {
  const read = new Set<string>();
  const written = new Set<string>();
  const attempted = new Set<string>();
  for (const entry of entries) {
    const { decision, ran } = outcomeOf(entry.event);
    entry.tables_blocked.forEach((table) => attempted.add(table));
    if (ran) {
      const readInto = entry.tables_written.length > 0 ? written : read;
      entry.tables_read.forEach((table) => readInto.add(table));
      entry.tables_written.forEach((table) => written.add(table));
    } else if (decision === 'block') {
      [...entry.tables_read, ...entry.tables_written].forEach((table) => attempted.add(table));
    }
  }
  return { tables_read: sorted(read), tables_written: sorted(written), tables_blocked: sorted([...attempted].filter((table) => !read.has(table) && !written.has(table))) };
}

/**
 * Summarizes `read`: the session's entries in seq order, non-empty, holding up to
 * SESSION_SCAN_LIMIT + 1 so that one more than the limit tells the scan was truncated.
 */
export function summarizeSession(projectId: string, sessionId: string, read: readonly SessionEntry[]): AuditSessionSummary {
  const entries = read.slice(0, SESSION_SCAN_LIMIT);
  const counts = { allowed: 0, blocked: 0, masked: 0, truncated: 0, other: 0, rows_returned: 0, bytes_out: 0, unparsed_statements: 0 };
  let latencyUs = 0;
  let started = entries[0]!.ts;
  let ended = started;
  for (const entry of entries) {
    const { decision, ran } = outcomeOf(entry.event);
    if (decision === null) counts.other += 1;
    else counts[decisionCount[decision]] += 1;
    if (decision !== null && !entry.parsed) counts.unparsed_statements += 1;
    counts.rows_returned += entry.rows_returned;
    counts.bytes_out += entry.bytes_out;
    if (ran && entry.latency_us !== null) latencyUs += entry.latency_us;
    if (entry.ts < started) started = entry.ts;
    if (entry.ts > ended) ended = entry.ts;
  }
  return {
    session_id: sessionId,
    project_id: projectId,
    credential_ids: sorted(entries.flatMap((entry) => (entry.credential_id === null ? [] : [entry.credential_id]))),
    sources: sorted(entries.map((entry) => entry.source)),
    started_at: started,
    ended_at: ended,
    duration_ms: Date.parse(ended) - Date.parse(started),
    entries_scanned: entries.length,
    statements: counts.allowed + counts.blocked + counts.masked + counts.truncated,
    ...counts,
    latency_ms_total: latencyUs / 1000,
    ...tableLists(entries),
    scan_truncated: read.length > SESSION_SCAN_LIMIT,
  };
}
