/**
 * The CRM read models (docs/crm.md): every record of every type in `crm_records` (its fields as
 * JSON, the text a search matches), each organization's context in `crm_contexts`, and the
 * activity timeline in `crm_activities`.
 */
import { CRM_CONTEXT_STREAM } from '../commands/crm/context.js';
import { crmStreamPrefix, type Fields } from '../commands/crm/record.js';
import { activityId, activityOf, type Activity } from '../src/crm/activity.js';
import { decodeEvent } from '../src/events/catalog.js';
import { ArtifactApproved, ArtifactDiscarded, ArtifactSent, CRM_RECORDS, CrmContextSet, type ArtifactStatus, type CrmRecordType } from '../src/events/crm.js';
import { decodeWith } from '../src/events/envelope.js';
import type { AgentRole } from '../src/events/organizations.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

export type CrmRecordRow = {
  record_id: string;
  record_type: CrmRecordType;
  org_id: string;
  fields: Fields;
  /** Lowercased names, domains and e-mail addresses, one a line: what `q` searches. */
  search: string;
  /** An artifact's status; null for the other types. */
  status: ArtifactStatus | null;
  created_by: string;
  created_by_agent_role: AgentRole | null;
  approved_by: string | null;
  approved_at: string | null;
  sent_by: string | null;
  sent_at: string | null;
  revision: number;
  created_at: string;
  updated_at: string;
};

export const CRM_RECORD_TYPES = Object.keys(CRM_RECORDS) as CrmRecordType[];
const RECORD_PREFIXES = CRM_RECORD_TYPES.map(crmStreamPrefix);

/** The fields a text search looks in, per record type. */
const SEARCHED: Readonly<Record<CrmRecordType, readonly string[]>> = {
  company: ['name', 'domain'],
  contact: ['name', 'email'],
  deal: ['name'],
  task: ['title'],
  artifact: ['title'],
};

/**
 * Text as a search compares it: lowercased and NFKC-normalized, so that `é` typed as one code point
 * or as `e` and a combining accent, and fullwidth or ligature forms, match their plain spelling.
 */
export function searchForm(text: string): string {
  return text.normalize('NFKC').toLowerCase().normalize('NFKC');
}

function searchText(type: CrmRecordType, fields: Fields): string {
  return SEARCHED[type]
    .map((name) => fields[name])
    .filter((value): value is string => typeof value === 'string')
    .map(searchForm)
    .join('\n');
}

function recordTypeOf(stream: string): CrmRecordType | undefined {
  return CRM_RECORD_TYPES.find((type) => stream.startsWith(crmStreamPrefix(type)));
}

const marks: ReadonlyMap<string, { readonly status: ArtifactStatus; readonly by?: 'approved' | 'sent' }> = new Map([
  [ArtifactApproved.type, { status: 'approved', by: 'approved' }],
  [ArtifactSent.type, { status: 'sent', by: 'sent' }],
  [ArtifactDiscarded.type, { status: 'discarded' }],
]);

export function evolveCrmRecord(row: CrmRecordRow | undefined, event: RecordedEvent): CrmRecordRow | null {
  const type = recordTypeOf(event.stream);
  if (type === undefined) return row ?? null;
  const events = CRM_RECORDS[type];
  const { data, metadata } = decodeEvent(event) as { data: { record_id: string; org_id: string; agent_role: AgentRole | null; fields?: Fields; changes?: Fields }; metadata: { actor: string; at: string } };
  if (event.type === events.created.type) {
    const fields = data.fields!;
    return {
      record_id: data.record_id, record_type: type, org_id: data.org_id, fields, search: searchText(type, fields), status: type === 'artifact' ? 'draft' : null,
      created_by: metadata.actor, created_by_agent_role: data.agent_role, approved_by: null, approved_at: null, sent_by: null, sent_at: null,
      revision: event.revision, created_at: metadata.at, updated_at: metadata.at,
    };
  }
  if (!row) return null;
  if (event.type === events.deleted.type) return null;
  const touched = { revision: event.revision, updated_at: metadata.at };
  if (event.type === events.updated.type) {
    const fields = { ...row.fields, ...data.changes };
    return { ...row, ...touched, fields, search: searchText(type, fields) };
  }
  const mark = marks.get(event.type);
  if (!mark) return row;
  return { ...row, ...touched, status: mark.status, ...(mark.by ? { [`${mark.by}_by`]: metadata.actor, [`${mark.by}_at`]: metadata.at } : {}) };
}

export const crmRecordsProjection = rowProjection<CrmRecordRow>({
  name: 'crm_records',
  streamPrefixes: RECORD_PREFIXES,
  table: {
    name: 'crm_records',
    key: 'record_id',
    columnNames: ['record_id', 'record_type', 'org_id', 'fields', 'search', 'status', 'created_by', 'created_by_agent_role', 'approved_by', 'approved_at', 'sent_by', 'sent_at', 'revision', 'created_at', 'updated_at'],
    columns: `record_id text primary key, record_type text not null, org_id text not null, fields jsonb not null, search text not null, status text, created_by text not null, created_by_agent_role text,
      approved_by text, approved_at timestamptz, sent_by text, sent_at timestamptz, revision integer not null, created_at timestamptz not null, updated_at timestamptz not null`,
    orderBy: 'record_id',
    indexes: ['org_id, record_type, created_at desc, record_id desc'],
  },
  keyOf: (event) => {
    const type = recordTypeOf(event.stream);
    return type === undefined ? undefined : event.stream.slice(crmStreamPrefix(type).length);
  },
  evolve: evolveCrmRecord,
});

export type CrmContextRow = { org_id: string; positioning: string; icp: string; tone: string; notes: string; revision: number; updated_at: string };

export function evolveCrmContext(_row: CrmContextRow | undefined, event: RecordedEvent): CrmContextRow | null {
  const { data, metadata } = decodeWith(CrmContextSet, event);
  return { ...data, revision: event.revision, updated_at: metadata.at };
}

export const crmContextsProjection = rowProjection<CrmContextRow>({
  name: 'crm_contexts',
  streamPrefixes: [CRM_CONTEXT_STREAM],
  table: {
    name: 'crm_contexts',
    key: 'org_id',
    columnNames: ['org_id', 'positioning', 'icp', 'tone', 'notes', 'revision', 'updated_at'],
    columns: 'org_id text primary key, positioning text not null, icp text not null, tone text not null, notes text not null, revision integer not null, updated_at timestamptz not null',
    orderBy: 'org_id',
  },
  keyOf: (event) => (event.type === CrmContextSet.type ? event.stream.slice(CRM_CONTEXT_STREAM.length) : undefined),
  evolve: evolveCrmContext,
});

/** An activity as stored: `position` (the event's, as a decimal string) orders a timeline. */
export type CrmActivityRow = Activity & { position: string };

export const crmActivitiesProjection = rowProjection<CrmActivityRow>({
  name: 'crm_activities',
  streamPrefixes: RECORD_PREFIXES,
  table: {
    name: 'crm_activities',
    key: 'activity_id',
    columnNames: ['activity_id', 'org_id', 'subject_type', 'subject_id', 'record_type', 'record_id', 'actor', 'agent_role', 'principal', 'verb', 'fields', 'at', 'position'],
    columns: `activity_id text primary key, org_id text not null, subject_type text not null, subject_id text not null, record_type text not null, record_id text not null,
      actor text not null, agent_role text, principal text not null, verb text not null, fields jsonb not null, at timestamptz not null, position bigint not null`,
    orderBy: 'activity_id',
    indexes: ['org_id, position', 'org_id, subject_id, position', 'org_id, record_id, position'],
  },
  keyOf: (event) => (recordTypeOf(event.stream) === undefined ? undefined : activityId(event.id)),
  evolve: (_row, event) => {
    const activity = activityOf(decodeEvent(event), event.id);
    return activity ? { ...activity, position: event.position.toString() } : null;
  },
});
