import type pg from 'pg';
import { auditEntryColumns, checkpointStream } from '../projections/audit.js';
import type { AuditEntry } from '../src/audit/entry.js';
import { AuditCheckpointSigned } from '../src/events/audit.js';
import { decodeWith } from '../src/events/envelope.js';
import type { EventStore } from '../src/store/port.js';
import type { RecordedStatement } from '../proxy/policy/replay.js';
import { decisionGroup, type AuditDecision } from '../src/events/audit.js';

const selectEntry = auditEntryColumns.map((c) => `"${c}"`).join(', ');

/**
 * An entry from a row of the auditEntryColumns, read as an array (pg's row objects cost a keyed
 * store per column): the row is the entry, read back exactly as it was hashed (a tampered row
 * reads back tampered), its members in the columns' order.
 */
export function entryFromRow(r: readonly unknown[]): AuditEntry {
  const entry = {
    id: r[0],
    project_id: r[1],
    seq: Number(r[2]),
    event: r[3],
    ts: r[4],
    credential_id: r[5],
    session_id: r[6],
    source: r[7],
    region: r[8],
    client_ip: r[9],
    sql: r[10],
    normalized_sql: r[11],
    query_hash: r[12],
    statement_kind: r[13],
    decision_rule: r[14],
    reason: r[15],
    cache_status: r[16],
    rows_returned: Number(r[17]),
    bytes_out: Number(r[18]),
    latency_ms: r[19],
    latency_us: r[20] === null ? null : Number(r[20]),
    tables_read: r[21],
    tables_written: r[22],
    tables_blocked: r[23],
    parsed: r[24],
    proxy_id: r[25],
    boot_epoch: r[26],
    proxy_seq: r[27] === null ? null : Number(r[27]),
    approval_id: r[28],
    gap: r[29],
    key_id: r[30],
    prev_hash: r[31],
    entry_hash: r[32],
  } as AuditEntry;
  // `placed` (r[36]): the entry of a StatementDecided v2, which has where it ran; others have no such fields.
  if (r[36] === true) {
    entry.ran_on = r[33] as AuditEntry['ran_on'];
    entry.replica_id = r[34] as string | null;
    entry.upstream_region = r[35] as string | null;
  }
  return entry;
}

async function entryRows(db: pg.Pool, text: string, values: unknown[]): Promise<AuditEntry[]> {
  const { rows } = await db.query<unknown[]>({ text, values, rowMode: 'array' });
  return rows.map(entryFromRow);
}

export async function auditEntries(db: pg.Pool, projectId: string, fromSeq = 1, toSeq?: number): Promise<AuditEntry[]> {
  return entryRows(
    db,
    `select ${selectEntry} from rm.audit_entries where project_id = $1 and seq >= $2 and ($3::bigint is null or seq <= $3) order by seq`,
    [projectId, fromSeq, toSeq ?? null],
  );
}

/** How many entries the project's read model holds. */
export async function auditEntryCount(db: pg.Pool, projectId: string): Promise<number> {
  const { rows } = await db.query<{ n: string }>('select count(*) as n from rm.audit_entries where project_id = $1', [projectId]);
  return Number(rows[0]!.n);
}

/** Rows per page of auditEntryPages; the caller holds one page, and one more is read ahead. */
const ENTRY_PAGE = 10_000;

/**
 * auditEntries in pages of ascending seq (keyset pagination), each page's query sent before the
 * previous page is handed on, so the server reads the next while the caller works on this one.
 */
export async function* auditEntryPages(db: pg.Pool, projectId: string, fromSeq = 1, toSeq?: number, pageSize = ENTRY_PAGE): AsyncGenerator<AuditEntry[]> {
  const page = (from: number): Promise<AuditEntry[]> =>
    entryRows(
      db,
      `select ${selectEntry} from rm.audit_entries where project_id = $1 and seq >= $2 and ($3::bigint is null or seq <= $3) order by seq limit $4`,
      [projectId, from, toSeq ?? null, pageSize],
    );
  let next: Promise<AuditEntry[]> | undefined = page(fromSeq);
  while (next) {
    const entries: AuditEntry[] = await next;
    next = entries.length === pageSize ? page(entries[entries.length - 1]!.seq + 1) : undefined;
    // A caller that stops early never awaits the page read ahead.
    next?.catch(() => undefined);
    if (entries.length > 0) yield entries;
  }
}

export interface AuditFilter {
  readonly start?: string;
  readonly end?: string;
  readonly event?: string;
  readonly source?: string;
  readonly decision?: AuditDecision;
  readonly credentialId?: string;
  readonly sessionId?: string;
  /** Only entries with a seq below this (the page token). */
  readonly beforeSeq?: number;
}

const decisionEvents = (decision: AuditDecision): string[] =>
  (['query', 'blocked', 'budget_exhausted', 'auth_failed', 'credential_expired', 'canary_tripped', 'rejected', 'approval_expired', 'masked', 'truncated'] as const).filter((e) => decisionGroup(e) === decision);

/** Entries newest first, filtered as spec §4.9 says: start inclusive, end exclusive. */
export async function listAuditEntries(db: pg.Pool, projectId: string, filter: AuditFilter, limit: number): Promise<AuditEntry[]> {
  return entryRows(
    db,
    `select ${selectEntry} from rm.audit_entries
      where project_id = $1
        and ($2::timestamptz is null or ts_at >= $2) and ($3::timestamptz is null or ts_at < $3)
        and ($4::text is null or event = $4) and ($5::text is null or source = $5)
        and ($6::text[] is null or event = any($6)) and ($7::text is null or credential_id = $7)
        and ($8::text is null or session_id = $8) and ($9::bigint is null or seq < $9)
      order by seq desc limit $10`,
    [projectId, filter.start ?? null, filter.end ?? null, filter.event ?? null, filter.source ?? null, filter.decision ? decisionEvents(filter.decision) : null, filter.credentialId ?? null, filter.sessionId ?? null, filter.beforeSeq ?? null, limit],
  );
}

/** Signed checkpoints of a project, from the event store (they are events, not read-model rows). */
export async function auditCheckpoints(store: EventStore, projectId: string) {
  const events = await store.readStream(checkpointStream(projectId));
  return events.filter((e) => e.type === AuditCheckpointSigned.type).map((e) => decodeWith(AuditCheckpointSigned, e).data);
}

/** The window of a policy replay: entries at or after `start` and before `end`, of one credential if named. */
export interface ReplayWindow {
  readonly start: string;
  readonly end: string;
  readonly credentialId?: string;
}

const REPLAY_WHERE = `e.project_id = $1 and e.ts_at >= $2 and e.ts_at < $3 and ($4::text is null or e.credential_id = $4)
  and e.event = any($5) and e.source in ('wire', 'mcp') and e.credential_id is not null`;

/** A page of the window's statements in ascending seq after `afterSeq`, each with its credential's database (null when the credential is unknown). */
export async function replayStatements(db: pg.Pool, projectId: string, window: ReplayWindow, events: readonly string[], afterSeq: number, limit: number): Promise<(RecordedStatement & { database_id: string | null })[]> {
  const { rows } = await db.query<RecordedStatement & { seq: string; database_id: string | null }>(
    `select e.seq, e.id, e.ts, e.credential_id, e.session_id, e.source, e.sql, e.event, e.decision_rule, c.database_id
       from rm.audit_entries e left join rm.credentials c on c.credential_id = e.credential_id and c.project_id = e.project_id
      where ${REPLAY_WHERE} and e.seq > $6
      order by e.seq limit $7`,
    [projectId, window.start, window.end, window.credentialId ?? null, events, afterSeq, limit],
  );
  return rows.map((row) => ({ ...row, seq: Number(row.seq) }));
}

/** How many statements the window holds, and how many of them come at or before `throughSeq`. */
export async function replayProgress(db: pg.Pool, projectId: string, window: ReplayWindow, events: readonly string[], throughSeq: number): Promise<{ total: number; done: number }> {
  const { rows } = await db.query<{ total: string; done: string }>(
    `select count(*) as total, count(*) filter (where e.seq <= $6) as done from rm.audit_entries e where ${REPLAY_WHERE}`,
    [projectId, window.start, window.end, window.credentialId ?? null, events, throughSeq],
  );
  return { total: Number(rows[0]!.total), done: Number(rows[0]!.done) };
}
