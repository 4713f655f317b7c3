/**
 * The CRM area (spec §2.13, docs/crm.md): companies, contacts, deals, research tasks and artifacts,
 * one stream per record, and each organization's CrmContext. Every record event carries its
 * organization and the agent role that acted (null for a person), so the activity timeline is a
 * projection of these events alone.
 */
import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { changes, idSchema, OrgId, text } from './fields.js';
import { AgentRole } from './organizations.js';

/** The id prefix of each record type (tasks: `tsk_`). */
export const CRM_ID_PREFIX = { company: 'cmp_', contact: 'cnt_', deal: 'dl_', task: 'tsk_', artifact: 'art_' } as const;

export const CompanyId = idSchema(CRM_ID_PREFIX.company);
export const ContactId = idSchema(CRM_ID_PREFIX.contact);
export const DealId = idSchema(CRM_ID_PREFIX.deal);
export const TaskId = idSchema(CRM_ID_PREFIX.task);
export const ArtifactId = idSchema(CRM_ID_PREFIX.artifact);

/** What a research task or an artifact is about (spec's ResearchTaskSubjectType). */
export const SubjectType = z.enum(['company', 'contact']);
export type SubjectType = z.infer<typeof SubjectType>;

const nullableText = (max: number) => text(max).nullable();

/** A domain as stored: lowercased (spec §2.13; the command lowercases what a request gives), at most 255 characters. */
export const Domain = text(255, 1).refine((value) => value === value.toLowerCase(), { message: 'must be lowercase' });

export const companyFields = {
  name: text(255, 1),
  description: text(10_000),
  domain: Domain.nullable(),
  industry: nullableText(255),
  location: nullableText(255),
  logo_url: nullableText(2048),
};

export const contactFields = {
  name: text(255, 1),
  company_id: CompanyId.nullable(),
  email: text(320, 1).nullable(),
  phone: nullableText(64),
  title: nullableText(255),
  professional_network_url: nullableText(2048),
  notes: text(10_000),
};

/** A deal's pipeline stages, in order; `won` and `lost` close it. */
export const DealStage = z.enum(['lead', 'qualified', 'proposal', 'negotiation', 'won', 'lost']);
export type DealStage = z.infer<typeof DealStage>;

/** Money as a decimal string (no floats in events): up to 15 digits and 2 decimals. */
export const Amount = z.string().regex(/^(0|[1-9][0-9]{0,14})(\.[0-9]{1,2})?$/, { message: 'expected a non-negative decimal amount such as 12500 or 12500.50' });
export const Currency = z.string().regex(/^[A-Z]{3}$/, { message: 'expected an ISO 4217 currency code such as EUR' });
export const CalendarDate = z.iso.date();
export const MAX_DEAL_CONTACTS = 50;

export const dealFields = {
  name: text(255, 1),
  company_id: CompanyId,
  contact_ids: z.array(ContactId).max(MAX_DEAL_CONTACTS).refine((ids) => new Set(ids).size === ids.length, { message: 'lists a contact twice' }),
  stage: DealStage,
  amount: Amount.nullable(),
  currency: Currency.nullable(),
  expected_close_date: CalendarDate.nullable(),
  notes: text(10_000),
};

/** A research task's life: open → in_progress → done, or cancelled before done. */
export const TaskStatus = z.enum(['open', 'in_progress', 'done', 'cancelled']);
export type TaskStatus = z.infer<typeof TaskStatus>;

export const taskFields = {
  subject_type: SubjectType,
  subject_id: z.union([CompanyId, ContactId]),
  role: AgentRole,
  title: text(255, 1),
  instructions: text(10_000),
  status: TaskStatus,
};

export const ArtifactKind = z.string().regex(/^[a-z][a-z0-9_]{0,63}$/, { message: 'expected a kind of [a-z0-9_] such as outreach_email or account_brief' });
export const ArtifactStatus = z.enum(['draft', 'approved', 'sent', 'discarded']);
export type ArtifactStatus = z.infer<typeof ArtifactStatus>;

export const artifactFields = {
  subject_type: SubjectType,
  subject_id: z.union([CompanyId, ContactId]),
  task_id: TaskId.nullable(),
  kind: ArtifactKind,
  title: text(500, 1),
  body: text(100_000),
};

/** The members every record event carries. */
const recordBase = { record_id: z.string(), org_id: OrgId, agent_role: AgentRole.nullable() };

/** A task's or an artifact's subject, repeated on its later events so that each is placed on the subject's timeline alone. */
const subjectRef = { subject_type: SubjectType, subject_id: z.union([CompanyId, ContactId]) };

type Shape = z.ZodRawShape;

/** The Created, Updated and Deleted events of one record type; `editable` is what an update may change. */
function recordEvents<N extends string, F extends Shape, U extends Shape, E extends Shape>(name: N, id: z.ZodType<string>, fields: F, editable: U, extra: E) {
  const base = { ...recordBase, record_id: id, ...extra };
  return {
    created: defineEvent(`${name}Created`, 1, z.strictObject({ ...recordBase, record_id: id, fields: z.strictObject(fields) })),
    updated: defineEvent(`${name}Updated`, 1, z.strictObject({ ...base, changes: changes(editable) })),
    deleted: defineEvent(`${name}Deleted`, 1, z.strictObject(base)),
  };
}

/** A task's or an artifact's fields without its subject, which never changes. */
function withoutSubject<F extends typeof taskFields | typeof artifactFields>(fields: F): Omit<F, 'subject_type' | 'subject_id'> {
  const { subject_type: _type, subject_id: _id, ...rest } = fields;
  return rest;
}

export const CompanyEvents = recordEvents('Company', CompanyId, companyFields, companyFields, {});
export const ContactEvents = recordEvents('Contact', ContactId, contactFields, contactFields, {});
export const DealEvents = recordEvents('Deal', DealId, dealFields, dealFields, {});
export const TaskEvents = recordEvents('ResearchTask', TaskId, taskFields, withoutSubject(taskFields), subjectRef);
/** An artifact's task never changes, and its status only through the transitions below. */
export const ArtifactEvents = recordEvents('Artifact', ArtifactId, artifactFields, (({ task_id: _task, ...editable }) => editable)(withoutSubject(artifactFields)), subjectRef);

const transition = z.strictObject({ ...recordBase, record_id: ArtifactId, ...subjectRef });
/** A person approved a draft for sending. */
export const ArtifactApproved = defineEvent('ArtifactApproved', 1, transition);
/** An approved artifact went out; the event's actor is who sent it. */
export const ArtifactSent = defineEvent('ArtifactSent', 1, transition);
/** A draft or an approved artifact was set aside; it is never sent. */
export const ArtifactDiscarded = defineEvent('ArtifactDiscarded', 1, transition);

export const crmContextFields = { positioning: text(10_000), icp: text(10_000), tone: text(10_000), notes: text(20_000) };

/** An organization's CrmContext after a PUT: every member, the ones the request left out as they were. */
export const CrmContextSet = defineEvent('CrmContextSet', 1, z.strictObject({ org_id: OrgId, ...crmContextFields }));

/** The record types of the CRM, each with its events. */
export const CRM_RECORDS = { company: CompanyEvents, contact: ContactEvents, deal: DealEvents, task: TaskEvents, artifact: ArtifactEvents } as const;
export type CrmRecordType = keyof typeof CRM_RECORDS;

