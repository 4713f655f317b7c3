import type pg from 'pg';
import type { AuditEntryEvent } from '../src/audit/entry.js';
import { SESSION_SCAN_LIMIT, type SessionEntry } from '../src/audit/session-summary.js';

/** The session's oldest entries in [start, end), in seq order: one more than a summary reads, to tell truncation. */
export async function sessionEntries(db: pg.Pool, projectId: string, sessionId: string, start: Date | undefined, end: Date | undefined): Promise<SessionEntry[]> {
  const { rows } = await db.query<{ credential_id: string | null; source: string; event: AuditEntryEvent; ts: string; rows_returned: bigint; bytes_out: bigint; latency_us: bigint | null; tables_read: string[]; tables_written: string[]; tables_blocked: string[]; parsed: boolean }>(
    `select credential_id, source, event, ts, rows_returned, bytes_out, latency_us, tables_read, tables_written, tables_blocked, parsed
       from rm.audit_entries
      where project_id = $1 and session_id = $2 and ($3::timestamptz is null or ts_at >= $3) and ($4::timestamptz is null or ts_at < $4)
      order by seq limit $5`,
    [projectId, sessionId, start ?? null, end ?? null, SESSION_SCAN_LIMIT + 1],
  );
  return rows.map((row) => ({ ...row, rows_returned: Number(row.rows_returned), bytes_out: Number(row.bytes_out), latency_us: row.latency_us === null ? null : Number(row.latency_us) }));
}
