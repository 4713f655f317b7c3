import { chainEntry, type ChainTip, type HmacKeyring } from '../src/audit/chain.js';
import { entryFromDecision, entryFromGap, type AuditEntry, type AuditEntryContent } from '../src/audit/entry.js';
import { AuditGapRecorded, StatementDecided } from '../src/events/audit.js';
import { decodeWith } from '../src/events/envelope.js';
import type { RecordedEvent } from '../src/store/port.js';
import type { Projection, ProjectionTx } from './projection.js';

export const AUDIT_STREAM_PREFIX = 'audit-';

export function auditStream(projectId: string): string {
  return `${AUDIT_STREAM_PREFIX}${projectId}`;
}

/** Signed checkpoints live beside the chain, not in it: they are not entries. */
export function checkpointStream(projectId: string): string {
  return `auditcp-${projectId}`;
}

/** Every field of the entry is a column, so the row is the entry an auditor exports; `ts_at` and `position` only serve queries. */
const ENTRY_COLUMNS = [
  'id', 'project_id', 'seq', 'event', 'ts', 'credential_id', 'session_id', 'source', 'region', 'client_ip', 'sql', 'normalized_sql', 'query_hash',
  'statement_kind', 'decision_rule', 'reason', 'cache_status', 'rows_returned', 'bytes_out', 'latency_ms', 'latency_us', 'tables_read', 'tables_written',
  'tables_blocked', 'parsed', 'proxy_id', 'boot_epoch', 'proxy_seq', 'approval_id', 'gap', 'key_id', 'prev_hash', 'entry_hash',
] as const;

export const auditEntryColumns: readonly string[] = ENTRY_COLUMNS;

export function entryOf(event: RecordedEvent): AuditEntryContent | undefined {
  const seq = event.revision + 1;
  if (event.type === StatementDecided.type) return entryFromDecision(decodeWith(StatementDecided, event).data, seq);
  if (event.type === AuditGapRecorded.type) return entryFromGap(decodeWith(AuditGapRecorded, event).data, seq);
  return undefined;
}

async function tips(tx: ProjectionTx, projectIds: string[]): Promise<Map<string, ChainTip>> {
  const { rows } = await tx.query<{ project_id: string; entry_hash: string; key_id: string | null }>(
    `select distinct on (project_id) project_id, entry_hash, key_id from ${tx.table('audit_entries')}
      where project_id = any($1::text[]) order by project_id, seq desc`,
    [projectIds],
  );
  return new Map(rows.map((row) => [row.project_id, { entry_hash: row.entry_hash, key_id: row.key_id }]));
}

/** Chains audit events in order onto each project's tip (updated in place): the one rule both the projection and `audit verify --from-events` use. */
export function chainEvents(events: readonly RecordedEvent[], tips: Map<string, ChainTip>, keyring: HmacKeyring): { entry: AuditEntry; event: RecordedEvent }[] {
  const out: { entry: AuditEntry; event: RecordedEvent }[] = [];
  for (const event of events) {
    const content = entryOf(event);
    if (!content) continue;
    const entry = chainEntry(tips.get(content.project_id), content, keyring, content.project_id);
    tips.set(entry.project_id, { entry_hash: entry.entry_hash, key_id: entry.key_id });
    out.push({ entry, event });
  }
  return out;
}

/**
 * The per-project hash chain (ARCHITECTURE.md §6): each audit event becomes the entry at
 * seq = its stream revision + 1, chained onto the project's previous entry. Hashing uses only the
 * events and the HMAC keyring, so a rebuild from position 0 reproduces every hash — as long as the
 * deployment keeps its keyring (keys are added, never removed).
 */
export function auditProjection(keyring: HmacKeyring): Projection {
  return {
    name: 'audit_entries',
    streamPrefixes: [AUDIT_STREAM_PREFIX],
    tables: [
      {
        name: 'audit_entries',
        columns: `id text not null, project_id text not null, seq bigint not null, event text not null, ts text not null, ts_at timestamptz not null,
          credential_id text, session_id text not null, source text not null, region text not null, client_ip text not null, sql text not null,
          normalized_sql text not null, query_hash text not null, statement_kind text not null, decision_rule text not null, reason text not null,
          cache_status text not null, rows_returned bigint not null, bytes_out bigint not null, latency_ms double precision not null, latency_us bigint,
          tables_read jsonb not null, tables_written jsonb not null, tables_blocked jsonb not null, parsed boolean not null, proxy_id text,
          boot_epoch integer, proxy_seq bigint, approval_id text, gap jsonb, key_id text, prev_hash text not null, entry_hash text not null,
          position bigint not null, primary key (project_id, seq)`,
        orderBy: 'project_id, seq',
        indexes: ['project_id, ts_at desc, seq desc', 'project_id, session_id, seq', 'project_id, credential_id, ts_at'],
      },
    ],
    async apply(tx, events) {
      const projectIds = [...new Set(events.map((event) => entryOf(event)?.project_id).filter((id): id is string => id !== undefined))];
      if (projectIds.length === 0) return;
      const rows = chainEvents(events, await tips(tx, projectIds), keyring).map(({ entry, event }) => ({ ...entry, ts_at: entry.ts, position: String(event.position) }));
      const columns = [...ENTRY_COLUMNS, 'ts_at', 'position'].map((c) => `"${c}"`).join(', ');
      await tx.query(
        `insert into ${tx.table('audit_entries')} (${columns})
         select ${columns} from json_populate_recordset(null::${tx.table('audit_entries')}, $1::json)`,
        [JSON.stringify(rows)],
      );
    },
  };
}
