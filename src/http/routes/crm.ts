/**
 * The CRM area (spec §2.13, docs/crm.md) under /v1/crm: companies, contacts, deals, research tasks
 * and artifacts of the caller's organization, the activity timeline and the organization's context.
 */
import { z } from 'zod';
import { crmContext, EMPTY_CRM_CONTEXT } from '../../../commands/crm/context.js';
import { crmRecord, crmStream, type ArtifactTransition, type Fields } from '../../../commands/crm/record.js';
import { CRM_CONTEXT_STREAM } from '../../../commands/crm/context.js';
import { evolveCrmContext, evolveCrmRecord, type CrmActivityRow, type CrmContextRow, type CrmRecordRow } from '../../../projections/crm.js';
import { findActivity, findCrmContext, listActivities, referencingRecords } from '../../../queries/crm.js';
import { ActivitySubjectType, ActivityVerb } from '../../crm/activity.js';
import type { CrmOperation } from '../../crm/permissions.js';
import { artifactFields, ArtifactKind, ArtifactStatus, companyFields, contactFields, crmContextFields, dealFields, DealStage, taskFields, TaskStatus, type CrmRecordType } from '../../events/crm.js';
import { text } from '../../events/fields.js';
import { AgentRole } from '../../events/organizations.js';
import { decodePositionCursor, PageQuery, paginate } from '../pagination.js';
import { Problem } from '../problem.js';
import { fold } from './projects.js';
import { crmCaller, liveRecord, RecordMeta, recordBody, recordRoutes, requireReference, type CrmCaller, type ListFilter } from './crm-records.js';
import { errorResponses, etag, execute, IdParam, ifMatch, iso, readModelOrStream, Timestamp, type Api, type ApiDeps } from './support.js';

const Id = (what: string) => z.string().max(64).describe(`Only those of this ${what}`);
const filter = (field: string, schema: z.ZodType<string>, extra: Partial<ListFilter> = {}): ListFilter => ({ field, schema: schema.optional(), ...extra });

/** What a create takes: the fields, the required ones without default, the others defaulting to empty or null. */
function createBody<S extends z.ZodRawShape>(title: string, shape: S, defaults: Partial<Record<keyof S, unknown>>) {
  const entries = Object.entries(shape).map(([name, schema]) => [name, name in defaults ? (schema as z.ZodType).default(defaults[name as keyof S]) : schema]);
  return z.strictObject(Object.fromEntries(entries) as S).meta({ title });
}

/** What a patch takes: any of `shape`, at least one. */
function updateBody(title: string, shape: z.ZodRawShape) {
  return z
    .strictObject(shape)
    .partial()
    .refine((body) => Object.values(body).some((value) => value !== undefined), { message: `name at least one of ${Object.keys(shape).join(', ')}` })
    .meta({ title });
}

const nulls = <K extends string>(...names: K[]) => Object.fromEntries(names.map((name) => [name, null])) as Record<K, null>;

/** A request may give a domain in any case; it is stored lowercased. */
const companyInput = { ...companyFields, domain: text(255, 1).nullable().describe('The company’s web domain, stored lowercased') };
const Company = z.object({ ...RecordMeta, ...companyInput }).meta({ id: 'Company' });
const Contact = z.object({ ...RecordMeta, ...contactFields }).meta({ id: 'Contact' });
const Deal = z.object({ ...RecordMeta, ...dealFields }).meta({ id: 'Deal' });
const ResearchTask = z.object({ ...RecordMeta, ...taskFields, artifact_ids: z.array(z.string()).optional().describe('The artifacts made for this task (GET of one task only)') }).meta({ id: 'ResearchTask' });
const Artifact = z
  .object({
    ...RecordMeta,
    ...artifactFields,
    status: ArtifactStatus,
    approved_by: z.string().nullable().describe('The person who approved it'),
    approved_at: Timestamp.nullable(),
    sent_by: z.string().nullable().describe('Who marked it sent (api_key:<key id> or user:<subject>)'),
    sent_at: Timestamp.nullable(),
  })
  .meta({ id: 'Artifact' });

/** The response serializer checks the fields against Artifact. */
function toArtifact(row: CrmRecordRow): z.input<typeof Artifact> {
  const body = { ...recordBody(row), status: row.status, approved_by: row.approved_by, approved_at: row.approved_at && iso(row.approved_at), sent_by: row.sent_by, sent_at: row.sent_at && iso(row.sent_at) };
  return body as z.input<typeof Artifact>;
}

/** 409 CONFLICT naming the live records of `type` whose `field` names the record being deleted. */
async function refuseReferenced(deps: ApiDeps, row: CrmRecordRow, type: CrmRecordType, field: string, match: 'equals' | 'includes'): Promise<void> {
  const found = await referencingRecords(deps.pool, row.org_id, type, { field, value: row.record_id, match }, 5);
  if (found.length > 0) throw new Problem('CONFLICT', `${row.record_id} is named by ${type} ${found.join(', ')}${found.length === 5 ? ' and more' : ''}: delete or change them first`);
}

/** A task's or an artifact's subject must be a live company or contact of the organization. */
async function checkSubject(deps: ApiDeps, caller: CrmCaller, fields: Fields): Promise<void> {
  if (fields.subject_type !== undefined) await requireReference(deps, caller.orgId, fields.subject_type as CrmRecordType, fields.subject_id as string, 'subject_id');
}

const companyId = filter('company_id', Id('company'));

function crmRecordRoutes(app: Api, deps: ApiDeps): void {
  recordRoutes(app, deps, {
    type: 'company',
    label: 'company',
    collection: '/v1/crm/companies',
    param: 'company_id',
    ops: { list: 'listCompanies', get: 'getCompany', create: 'createCompany', update: 'updateCompany', delete: 'deleteCompany' },
    createBody: createBody('CompanyInput', companyInput, { description: '', ...nulls('domain', 'industry', 'location', 'logo_url') }),
    updateBody: updateBody('CompanyUpdate', companyInput),
    response: Company,
    describe: {
      create: 'The domain is stored lowercased (Example.COM reads back as example.com).',
      update: 'A domain is lowercased; null clears a nullable field.',
      delete: 'Refused with 409 CONFLICT while contacts or deals name the company.',
    },
    filters: { domain: filter('domain', z.string().max(255).describe('Only the company of this domain (any case)'), { normalize: (value) => value.toLowerCase() }), industry: filter('industry', z.string().max(255).describe('Only companies of this industry')) },
    searched: 'names and domains',
    toResponse: recordBody,
    checkDelete: async (deps, row) => {
      await refuseReferenced(deps, row, 'contact', 'company_id', 'equals');
      await refuseReferenced(deps, row, 'deal', 'company_id', 'equals');
    },
  });

  recordRoutes(app, deps, {
    type: 'contact',
    label: 'contact',
    collection: '/v1/crm/contacts',
    param: 'contact_id',
    ops: { list: 'listContacts', get: 'getContact', create: 'createContact', update: 'updateContact', delete: 'deleteContact' },
    createBody: createBody('ContactInput', contactFields, { notes: '', ...nulls('company_id', 'email', 'phone', 'title', 'professional_network_url') }),
    updateBody: updateBody('ContactUpdate', contactFields),
    response: Contact,
    describe: { create: 'company_id must name a company of the organization (400 INVALID_INPUT naming company_id otherwise).', update: 'company_id must name a company of the organization.', delete: 'Refused with 409 CONFLICT while a deal lists the contact.' },
    filters: { company_id: companyId, email: filter('email', z.string().max(320).describe('Only the contact of this e-mail address')) },
    searched: 'names and e-mail addresses',
    toResponse: recordBody,
    checkReferences: async (deps, caller, fields) => {
      if (typeof fields.company_id === 'string') await requireReference(deps, caller.orgId, 'company', fields.company_id, 'company_id');
    },
    checkDelete: (deps, row) => refuseReferenced(deps, row, 'deal', 'contact_ids', 'includes'),
  });

  recordRoutes(app, deps, {
    type: 'deal',
    label: 'deal',
    collection: '/v1/crm/deals',
    param: 'deal_id',
    ops: { list: 'listDeals', get: 'getDeal', create: 'createDeal', update: 'updateDeal', delete: 'deleteDeal' },
    createBody: createBody('DealInput', dealFields, { contact_ids: [], stage: 'lead', notes: '', ...nulls('amount', 'currency', 'expected_close_date') }),
    updateBody: updateBody('DealUpdate', dealFields),
    response: Deal,
    describe: {
      create: 'A deal is with one company (company_id) and lists its contacts (contact_ids, at most 50), all of the organization; stage lead → qualified → proposal → negotiation → won or lost; amount is a decimal string in currency (ISO 4217).',
      update: 'Any stage may follow any other (deals go back and forth); company_id and contact_ids must name records of the organization.',
      delete: 'The deal is gone from lists.',
    },
    filters: { company_id: companyId, contact_id: filter('contact_ids', Id('contact'), { match: 'includes' }), stage: filter('stage', DealStage.describe('Only deals at this stage')) },
    searched: 'names',
    toResponse: recordBody,
    checkReferences: async (deps, caller, fields) => {
      if (typeof fields.company_id === 'string') await requireReference(deps, caller.orgId, 'company', fields.company_id, 'company_id');
      for (const [index, contactId] of ((fields.contact_ids as string[] | undefined) ?? []).entries()) await requireReference(deps, caller.orgId, 'contact', contactId, `contact_ids.${index}`);
    },
  });

  recordRoutes(app, deps, {
    type: 'task',
    label: 'research task',
    collection: '/v1/crm/research-tasks',
    param: 'task_id',
    ops: { list: 'listResearchTasks', get: 'getResearchTask', create: 'createResearchTask', update: 'updateResearchTask', delete: 'deleteResearchTask' },
    createBody: createBody('ResearchTaskInput', taskFields, { instructions: '', status: 'open' }),
    updateBody: updateBody('ResearchTaskUpdate', (({ subject_type: _type, subject_id: _id, ...editable }) => editable)(taskFields)),
    response: ResearchTask,
    describe: {
      create: 'A task asks the agents of one role (researcher, enricher, outreach) to work on a company or a contact (subject_type, subject_id, which must be of the organization).',
      update: 'status moves open → in_progress → done, or to cancelled (409 INVALID_STATE otherwise; done and cancelled tasks take no more changes). An agent changes only the tasks of its own role.',
      delete: 'Its artifacts keep their task_id.',
    },
    filters: { subject_id: filter('subject_id', Id('company or contact')), role: filter('role', AgentRole.describe('Only tasks for this agent role')), status: filter('status', TaskStatus.describe('Only tasks in this status')) },
    searched: 'titles',
    toResponse: recordBody,
    detail: async (deps, row) => ({ ...recordBody(row), artifact_ids: await referencingRecords(deps.pool, row.org_id, 'artifact', { field: 'task_id', value: row.record_id, match: 'equals' }, 1000) }),
    checkReferences: checkSubject,
  });

  recordRoutes(app, deps, {
    type: 'artifact',
    label: 'artifact',
    collection: '/v1/crm/artifacts',
    param: 'artifact_id',
    ops: { list: 'listArtifacts', get: 'getArtifact', create: 'createArtifact', update: 'updateArtifact', delete: 'deleteArtifact' },
    createBody: createBody('ArtifactInput', artifactFields, { task_id: null, body: '' }),
    updateBody: updateBody('ArtifactUpdate', { kind: artifactFields.kind, title: artifactFields.title, body: artifactFields.body }),
    response: Artifact,
    describe: {
      create: 'A draft (status draft) about a company or a contact, optionally made for a research task (task_id); kind such as outreach_email or account_brief.',
      update: 'Only a draft’s kind, title and body change (409 INVALID_STATE otherwise).',
      delete: 'Removes it whatever its status.',
    },
    filters: {
      subject_id: filter('subject_id', Id('company or contact')),
      task_id: filter('task_id', Id('research task')),
      kind: filter('kind', ArtifactKind.describe('Only artifacts of this kind')),
      status: filter('status', ArtifactStatus.describe('Only artifacts in this status'), { column: 'status' }),
    },
    searched: 'titles',
    toResponse: toArtifact,
    checkReferences: async (deps, caller, fields) => {
      await checkSubject(deps, caller, fields);
      if (typeof fields.task_id === 'string') await requireReference(deps, caller.orgId, 'task', fields.task_id, 'task_id');
    },
  });
}

const ArtifactParams = z.object({ artifact_id: IdParam('artifact id') });
const transitions: readonly { readonly transition: ArtifactTransition; readonly op: CrmOperation; readonly path: string; readonly summary: string; readonly description: string }[] = [
  { transition: 'approve', op: 'approveArtifact', path: 'approve', summary: 'Approve a draft for sending (people only)', description: 'draft → approved. Only a person approves: an agent credential gets 403 FORBIDDEN. Any other status is 409 INVALID_STATE.' },
  { transition: 'send', op: 'sendArtifact', path: 'send', summary: 'Mark an approved artifact sent', description: 'approved → sent; records who sent it (sent_by). Any other status is 409 INVALID_STATE.' },
  { transition: 'discard', op: 'discardArtifact', path: 'discard', summary: 'Discard a draft or an approved artifact', description: 'draft or approved → discarded; it is never sent. Any other status is 409 INVALID_STATE.' },
];

function artifactTransitionRoutes(app: Api, deps: ApiDeps): void {
  const aggregate = crmRecord('artifact');
  for (const { transition, op, path, summary, description } of transitions) {
    app.post(
      `/v1/crm/artifacts/:artifact_id/${path}`,
      {
        schema: {
          operationId: op,
          summary,
          description: `${description} Honours If-Match.`,
          tags: ['crm'],
          params: ArtifactParams,
          response: { 200: Artifact, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'INVALID_STATE', 'PRECONDITION_FAILED') },
        },
      },
      async (request, reply) => {
        const caller = crmCaller(request, op);
        const row = await liveRecord(deps, caller.orgId, 'artifact', request.params.artifact_id);
        if (!row) throw new Problem('NOT_FOUND', `artifact ${request.params.artifact_id} not found`);
        const result = await execute(deps, request, crmStream('artifact', row.record_id), aggregate, { kind: 'transition', transition, agentRole: caller.agentRole, ifRevision: ifMatch(request) });
        const moved = fold(evolveCrmRecord, result.recorded, row);
        etag(reply, moved.revision);
        return toArtifact(moved);
      },
    );
  }
}

const Activity = z
  .object({
    id: z.string(),
    org_id: z.string(),
    subject_type: ActivitySubjectType.describe('Whose timeline: a company, a contact or a deal (a task’s or an artifact’s subject)'),
    subject_id: z.string(),
    record_type: z.enum(['company', 'contact', 'deal', 'task', 'artifact']).describe('The kind of record that changed'),
    record_id: z.string(),
    actor: z.string().describe('agent when an agent credential acted, else the person (api_key:<key id> or user:<subject>)'),
    agent_role: AgentRole.nullable(),
    principal: z.string().describe('The credential that acted, for agents too'),
    verb: ActivityVerb,
    fields: z.array(z.string()).describe('The fields an update changed'),
    at: Timestamp,
  })
  .meta({ id: 'Activity' });

function toActivity(row: CrmActivityRow): z.infer<typeof Activity> {
  return { id: row.activity_id, org_id: row.org_id, subject_type: row.subject_type, subject_id: row.subject_id, record_type: row.record_type, record_id: row.record_id, actor: row.actor, agent_role: row.agent_role, principal: row.principal, verb: row.verb, fields: [...row.fields], at: iso(row.at) };
}

const ActivityQuery = PageQuery.extend({
  subject_id: Id('company, contact or deal (its timeline)').optional(),
  record_id: Id('record').optional(),
  verb: ActivityVerb.optional().describe('Only activities of this verb'),
});

const CrmContext = z.object({ org_id: z.string(), ...crmContextFields, updated_at: Timestamp.nullable().describe('null until the context is first set') }).meta({ id: 'CrmContext' });
const CrmContextInput = z.strictObject(Object.fromEntries(Object.entries(crmContextFields).map(([name, schema]) => [name, schema.optional()])) as { [K in keyof typeof crmContextFields]: z.ZodOptional<(typeof crmContextFields)[K]> }).meta({ title: 'CrmContextInput' });

function toContext(row: CrmContextRow): z.infer<typeof CrmContext> {
  return { org_id: row.org_id, positioning: row.positioning, icp: row.icp, tone: row.tone, notes: row.notes, updated_at: iso(row.updated_at) };
}

function activityAndContextRoutes(app: Api, deps: ApiDeps): void {
  app.get(
    '/v1/crm/activities',
    {
      schema: {
        operationId: 'listActivities',
        summary: 'List the activity timeline, oldest first',
        description: 'Every change to a company, contact, deal, research task or artifact, in the order it happened; subject_id gives one company’s, contact’s or deal’s timeline (its tasks’ and artifacts’ activity included).',
        tags: ['crm'],
        querystring: ActivityQuery,
        response: { 200: z.object({ activities: z.array(Activity), next_page_token: z.string() }), ...errorResponses('FORBIDDEN') },
      },
    },
    async (request) => {
      const caller = crmCaller(request, 'listActivities');
      const { page_size: size, page_token: token, subject_id: subjectId, record_id: recordId, verb } = request.query;
      const after = decodePositionCursor(token);
      const rows = await listActivities(deps.pool, { orgId: caller.orgId, ...(subjectId ? { subjectId } : {}), ...(recordId ? { recordId } : {}), ...(verb ? { verb } : {}) }, after, size + 1);
      const page = paginate(rows, size, (row) => row.position);
      return { activities: page.items.map(toActivity), next_page_token: page.next_page_token };
    },
  );

  app.get(
    '/v1/crm/activities/:activity_id',
    {
      schema: { operationId: 'getActivity', summary: 'Get one activity', tags: ['crm'], params: z.object({ activity_id: IdParam('activity id') }), response: { 200: Activity, ...errorResponses('FORBIDDEN', 'NOT_FOUND') } },
    },
    async (request) => {
      const caller = crmCaller(request, 'getActivity');
      const row = await findActivity(deps.pool, request.params.activity_id);
      if (!row || row.org_id !== caller.orgId) throw new Problem('NOT_FOUND', `activity ${request.params.activity_id} not found`);
      return toActivity(row);
    },
  );

  app.get(
    '/v1/crm/context',
    {
      schema: { operationId: 'getCrmContext', summary: 'Get the organization’s CRM context (positioning, ICP, tone, notes)', description: 'What agents read before they research or draft. Empty until first set.', tags: ['crm'], response: { 200: CrmContext, ...errorResponses('FORBIDDEN') } },
    },
    async (request, reply) => {
      const caller = crmCaller(request, 'getCrmContext');
      const row = await readModelOrStream(deps, () => findCrmContext(deps.pool, caller.orgId), `${CRM_CONTEXT_STREAM}${caller.orgId}`, evolveCrmContext);
      if (!row) return { org_id: caller.orgId, ...EMPTY_CRM_CONTEXT, updated_at: null };
      etag(reply, row.revision);
      return toContext(row);
    },
  );

  app.put(
    '/v1/crm/context',
    {
      schema: {
        operationId: 'setCrmContext',
        summary: 'Set the organization’s CRM context',
        description: 'Members the body leaves out keep their value. Honours If-Match.',
        tags: ['crm'],
        body: CrmContextInput,
        response: { 200: CrmContext, ...errorResponses('FORBIDDEN', 'PRECONDITION_FAILED', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = crmCaller(request, 'setCrmContext');
      const result = await execute(deps, request, `${CRM_CONTEXT_STREAM}${caller.orgId}`, crmContext, { orgId: caller.orgId, changes: request.body, ifRevision: ifMatch(request) });
      const row = fold(evolveCrmContext, result.recorded);
      etag(reply, row.revision);
      return toContext(row);
    },
  );
}

export function crmRoutes(app: Api, deps: ApiDeps): void {
  crmRecordRoutes(app, deps);
  artifactTransitionRoutes(app, deps);
  activityAndContextRoutes(app, deps);
}
