import { setImmediate } from 'node:timers/promises';
import { linkEntry, prepareOwnEntry, type ChainTip, type HmacKeyring, type PreparedEntry } from '../src/audit/chain.js';
import { entryFromDecision, entryFromGap, GAP_MARKER, type AuditEntry, type UnchainedEntry } from '../src/audit/entry.js';
import type { PreparedEntries } from '../src/audit/prepared-entries.js';
import { storedDecision } from '../src/audit/stored-decision.js';
import { AuditGapRecorded, isDecisionType, type DecisionRecord } from '../src/events/audit.js';
import { decodeData } from '../src/events/envelope.js';
import { copyField } from '../src/pg/copy-in.js';
import { AUDIT_CATEGORY } from '../src/store/categories.js';
import type { RecordedEvent } from '../src/store/port.js';
import { auditUsageTables, usageUpserts } from './audit-usage.js';
import { cacheShapeTables, cacheShapeUpserts } from './cache-shapes.js';
import type { Projection, ProjectionTx } from './projection.js';
import { upsertAll } from './upserts.js';

export const AUDIT_STREAM_PREFIX = AUDIT_CATEGORY;

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

/**
 * Where an entry's statement ran (StatementDecided v2), and `placed`, whether the entry has those
 * fields at all: an entry of a v1 decision, or a gap marker, has none (null in the three columns,
 * as a refusal of v2 has, so `placed` tells them apart) and hashes without them.
 */
const PLACEMENT_COLUMNS = ['ran_on', 'replica_id', 'upstream_region', 'placed'] as const;
const UNPLACED = '\\N\t\\N\t\\N\tf';

/** The columns an entry is copied into: its fields, then `ts_at` (its timestamp) and `position` (its event's), which only serve queries. */
const COPIED_COLUMNS: readonly string[] = [...ENTRY_COLUMNS, ...PLACEMENT_COLUMNS, 'ts_at', 'position'];

/** The columns the queries over rm.audit_entries filter, join, group or order by: the planner needs their statistics. */
const ANALYZED_COLUMNS: ReadonlySet<string> = new Set(['project_id', 'seq', 'ts_at', 'event', 'credential_id', 'session_id', 'source', 'cache_status', 'latency_us']);

/** The columns that read an entry back (queries/audit.ts `entryFromRow`), in its order. */
export const auditEntryColumns: readonly string[] = [...ENTRY_COLUMNS, ...PLACEMENT_COLUMNS];

/**
 * An audit event's type and payload bytes; with the StatementDecided its writer encoded them from,
 * when the writer hands that over: JSON of canonical payload bytes gives back the same members, so
 * the entry then needs no parse of the bytes.
 */
export interface AuditEventPayload extends Pick<RecordedEvent, 'type' | 'data'> {
  readonly decision?: DecisionRecord;
}

/** The entry of an audit event at `revision` of its stream; undefined for other events. */
export function entryOf(event: AuditEventPayload, revision: number): UnchainedEntry | undefined {
  const seq = revision + 1;
  if (isDecisionType(event.type)) return entryFromDecision(event.decision ?? storedDecision(event.type, event.data), seq);
  if (event.type === AuditGapRecorded.type) return entryFromGap(decodeData(AuditGapRecorded, event), seq);
  return undefined;
}

interface Prepared extends PreparedEntry {
  readonly event: RecordedEvent;
}

interface Chained {
  readonly entry: AuditEntry;
  readonly event: RecordedEvent;
}

/** Entries prepared between two yields to the event loop, so that a batch being written meanwhile gets its replies handled. */
const PREPARE_SLICE = 100;

/** The audit events among `events`, each decoded once and prepared for chaining, unless `handed` holds it prepared already. */
function prepareEvents(events: readonly RecordedEvent[], keyring: HmacKeyring, handed?: PreparedEntries): Prepared[] {
  const out: Prepared[] = [];
  for (const event of events) {
    const handedOn = handed?.take(event, keyring);
    const content = handedOn ? undefined : entryOf(event, event.revision);
    const prepared = handedOn ?? (content && prepareOwnEntry(content, keyring));
    if (prepared) out.push({ entry: prepared.entry, bytes: prepared.bytes, key: prepared.key, event });
  }
  return out;
}

async function prepareSliced(events: readonly RecordedEvent[], keyring: HmacKeyring, handed?: PreparedEntries): Promise<Prepared[]> {
  const out: Prepared[] = [];
  for (let i = 0; i < events.length; i += PREPARE_SLICE) {
    if (i > 0) await setImmediate();
    out.push(...prepareEvents(events.slice(i, i + PREPARE_SLICE), keyring, handed));
  }
  return out;
}

async function tips(tx: ProjectionTx, projectIds: string[]): Promise<Map<string, ChainTip>> {
  const { rows } = await tx.query<{ project_id: string; entry_hash: string; key_id: string | null }>(
    // One index probe per project: `distinct on` would read every entry of the project.
    `select p.project_id, e.entry_hash, e.key_id from unnest($1::text[]) as p (project_id)
      cross join lateral (select entry_hash, key_id from ${tx.table('audit_entries')} where project_id = p.project_id order by seq desc limit 1) as e`,
    [projectIds],
  );
  return new Map(rows.map((row) => [row.project_id, { entry_hash: row.entry_hash, key_id: row.key_id }]));
}

/** Links the prepared entries in place; each project's tip becomes its last entry. */
function linkPrepared(prepared: readonly Prepared[], tips: Map<string, ChainTip>): readonly Chained[] {
  for (const item of prepared) tips.set(item.entry.project_id, linkEntry(tips.get(item.entry.project_id), item, item.entry.project_id));
  return prepared;
}

/** Chains audit events in order onto each project's tip (updated in place): the one rule both the projection and `audit verify --from-events` use. */
export function chainEvents(events: readonly RecordedEvent[], tips: Map<string, ChainTip>, keyring: HmacKeyring): readonly Chained[] {
  return linkPrepared(prepareEvents(events, keyring), tips);
}

/**
 * The entries of consecutive events of one stream from `firstRevision` on, prepared for chaining
 * (undefined for events that are not entries). Their canonical bytes are the Merkle leaves,
 * which do not depend on the chain's hashes.
 */
export function prepareStreamEvents(events: readonly AuditEventPayload[], firstRevision: number, keyring: HmacKeyring): (PreparedEntry | undefined)[] {
  return events.map((event, i) => {
    const content = entryOf(event, firstRevision + i);
    return content && prepareOwnEntry(content, keyring);
  });
}

/** The Merkle leaves of the audit events among `events`, consecutive events of one stream from `firstRevision` on. */
export function leavesOf(events: readonly AuditEventPayload[], firstRevision: number, keyring: HmacKeyring): Buffer[] {
  return prepareStreamEvents(events, firstRevision, keyring).flatMap((prepared) => (prepared ? [prepared.bytes] : []));
}

/** A jsonb column's field: its value's JSON text, or null. */
const jsonField = (value: object | null): string => copyField(value === null ? null : JSON.stringify(value));

/**
 * An entry as a row of COPY's text format, in COPIED_COLUMNS order; its arrays and gap travel as
 * JSON text for their jsonb columns. Written out: a loop over the column names costs a keyed load
 * each. Joined, not concatenated: a row of concatenated fields leaves a rope of pieces to collect.
 */
function entryRow({ entry: e, event }: Chained): string {
  const placement = e.ran_on === undefined ? UNPLACED : `${copyField(e.ran_on)}\t${copyField(e.replica_id ?? null)}\t${copyField(e.upstream_region ?? null)}\tt`;
  // prettier-ignore
  return [
    copyField(e.id), copyField(e.project_id), copyField(e.seq), copyField(e.event), copyField(e.ts), copyField(e.credential_id), copyField(e.session_id),
    copyField(e.source), copyField(e.region), copyField(e.client_ip), copyField(e.sql), copyField(e.normalized_sql), copyField(e.query_hash),
    copyField(e.statement_kind), copyField(e.decision_rule), copyField(e.reason), copyField(e.cache_status), copyField(e.rows_returned), copyField(e.bytes_out),
    copyField(e.latency_ms), copyField(e.latency_us), jsonField(e.tables_read), jsonField(e.tables_written), jsonField(e.tables_blocked), copyField(e.parsed),
    copyField(e.proxy_id), copyField(e.boot_epoch), copyField(e.proxy_seq), copyField(e.approval_id), jsonField(e.gap), copyField(e.key_id), copyField(e.prev_hash),
    copyField(e.entry_hash), placement, copyField(e.ts), `${event.position}\n`,
  ].join('\t');
}

async function insertEntries(tx: ProjectionTx, chained: readonly Chained[]): Promise<void> {
  await tx.copyIn('audit_entries', COPIED_COLUMNS, Buffer.from(chained.map(entryRow).join(''), 'utf8'));
}

/**
 * The per-project hash chain (ARCHITECTURE.md §6): each audit event becomes the entry at
 * seq = its stream revision + 1, chained onto the project's previous entry. Hashing uses only the
 * events and the HMAC keyring, so a rebuild from position 0 reproduces every hash — as long as the
 * deployment keeps its keyring (keys are added, never removed). The usage rollups of the same
 * entries are written in the same transaction (projections/audit-usage.ts), and so are the
 * result cache's statement shapes (projections/cache-shapes.ts). `handed` holds the
 * entries ingest prepared when it runs in the same process (src/audit/prepared-entries.ts).
 */
export function auditProjection(keyring: HmacKeyring, handed?: PreparedEntries): Projection {
  // Decoding and canonical JSON need only the events; the tips, the hashes and the writes need the transaction.
  const prepare = async (events: readonly RecordedEvent[]) => {
    const prepared = await prepareSliced(events, keyring, handed);
    return async (tx: ProjectionTx): Promise<void> => {
      if (prepared.length === 0) return;
      const projectIds = [...new Set(prepared.map(({ entry }) => entry.project_id))];
      const chained = linkPrepared(prepared, await tips(tx, projectIds));
      await insertEntries(tx, chained);
      const entries = chained.map(({ entry }) => entry);
      await upsertAll(tx, [...usageUpserts(entries), ...cacheShapeUpserts(entries)]);
    };
  };
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
          position bigint not null, ran_on text, replica_id text, upstream_region text, placed boolean not null default false, primary key (project_id, seq)`,
        // Columns of StatementDecided v2: a table made before it gets them, its entries unplaced (as they were).
        addedColumns: ['ran_on text', 'replica_id text', 'upstream_region text', 'placed boolean not null default false'],
        orderBy: 'project_id, seq',
        // Every index costs each entry's insert 2-3 µs of the state database's CPU, the narrower the less:
        // the time index has no seq (no query reads ts_at and seq in that order), and the session index no
        // project_id, since a session id names one connection of one proxy (the queries still filter by project).
        // Only the usage report's gap-marker query reads by event: a partial index of the few gap markers serves it.
        indexes: [
          { name: 'audit_entries_ts', columns: 'project_id, ts_at' },
          { name: 'audit_entries_session', columns: 'session_id, seq' },
          'project_id, credential_id, ts_at',
          { name: 'audit_entries_gap_markers', columns: 'project_id, ts_at, seq', where: `event = '${GAP_MARKER}'` },
        ],
        retiredIndexes: ['audit_entries_i3', 'audit_entries_i0', 'audit_entries_i1'],
        // Every column but those the queries (queries/audit*.ts, the tips above) filter, join, group or order by.
        unanalyzedColumns: COPIED_COLUMNS.filter((column) => !ANALYZED_COLUMNS.has(column)),
      },
      ...auditUsageTables,
      ...cacheShapeTables,
    ],
    prepare,
    apply: async (tx, events) => (await prepare(events))(tx),
  };
}
