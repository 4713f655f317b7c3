import { z } from 'zod';
import { auditCheckpoints, auditEntryPages, listAuditEntries } from '../../../queries/audit.js';
import { AuditLogEntry } from '../../audit/entry.js';
import { signProjectCheckpoint } from '../../audit/checkpointer.js';
import { AuditChainVerification, verifyChainPages } from '../../audit/verify.js';
import { AuditDecision, AuditSource } from '../../events/audit.js';
import { decodePageToken, encodePageToken, PageQuery } from '../pagination.js';
import { Problem } from '../problem.js';
import { visibleProject } from './projects.js';
import { errorResponses, IdParam, requireRole, type Api, type ApiDeps } from './support.js';

const ProjectParams = z.object({ project_id: IdParam('project id') });

const AuditQuery = PageQuery.extend({
  start: z.iso.datetime({ offset: true }).optional().describe('Inclusive lower bound on entry time'),
  end: z.iso.datetime({ offset: true }).optional().describe('Exclusive upper bound on entry time'),
  event: z.string().regex(/^[a-z_]+$/).optional().describe('A single audit event'),
  source: AuditSource.optional(),
  decision: AuditDecision.optional(),
  credential_id: z.string().regex(/^[a-zA-Z0-9_.-]+$/).optional(),
  session_id: z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/).optional(),
});

const Entry = AuditLogEntry.meta({ id: 'AuditLogEntry' });

const CheckpointRecord = z
  .object({ project_id: z.string(), size: z.string(), root: z.string().describe('base64 RFC 6962 Merkle root of entries 1..size'), chain_start_seq: z.string(), key_id: z.string(), signature: z.string(), signed_at: z.string() })
  .meta({ id: 'AuditCheckpoint' });

export function auditRoutes(app: Api, deps: ApiDeps): void {
  app.post(
    '/v1/projects/:project_id/audit/checkpoints',
    {
      schema: {
        operationId: 'signAuditCheckpoint',
        summary: 'Sign a checkpoint of a project’s audit chain now',
        description: 'Ed25519 over a C2SP checkpoint (origin = project, size, Merkle root of entries 1..size, chain start seq), computed from the event log. Signing the same size again returns the stored checkpoint.',
        tags: ['audit'],
        params: ProjectParams,
        response: { 201: CheckpointRecord, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'CONFLICT') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const record = await signProjectCheckpoint(deps.store, projectId, deps.audit.keys, deps.audit.signer, deps.now());
      if (!record) throw new Problem('CONFLICT', 'the project has no audit entries yet; there is nothing to checkpoint');
      return reply.code(201).send(record);
    },
  );


  app.get(
    '/v1/projects/:project_id/audit',
    {
      schema: {
        operationId: 'listAuditEntries',
        summary: 'List a project’s audit entries, newest first',
        description: 'Filters: start (inclusive), end (exclusive), event, source, decision, credential_id, session_id.',
        tags: ['audit'],
        params: ProjectParams,
        querystring: AuditQuery,
        response: { 200: z.object({ entries: z.array(Entry), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'viewer');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const query = request.query;
      const token = decodePageToken(query.page_token);
      const beforeSeq = token === undefined ? undefined : Number(token);
      if (beforeSeq !== undefined && !Number.isSafeInteger(beforeSeq)) throw new Problem('INVALID_INPUT', 'page_token is not a token this API issued', { errors: [{ field: 'page_token', message: 'is not a valid page token' }] });
      const rows = await listAuditEntries(
        deps.pool,
        projectId,
        {
          ...(query.start ? { start: query.start } : {}),
          ...(query.end ? { end: query.end } : {}),
          ...(query.event ? { event: query.event } : {}),
          ...(query.source ? { source: query.source } : {}),
          ...(query.decision ? { decision: query.decision } : {}),
          ...(query.credential_id ? { credentialId: query.credential_id } : {}),
          ...(query.session_id ? { sessionId: query.session_id } : {}),
          ...(beforeSeq === undefined ? {} : { beforeSeq }),
        },
        query.page_size + 1,
      );
      const entries = rows.slice(0, query.page_size);
      const next = rows.length > query.page_size ? encodePageToken(String(entries.at(-1)!.seq)) : '';
      return { entries, next_page_token: next };
    },
  );

  app.get(
    '/v1/projects/:project_id/audit/verify',
    {
      schema: {
        operationId: 'verifyAuditChain',
        summary: 'Verify a project’s audit hash chain and its signed checkpoints',
        description: 'Recomputes every entry hash and link, and every checkpointed Merkle root, from the stored entries; reports the first failure in seq order.',
        tags: ['audit'],
        params: ProjectParams,
        querystring: z.object({ from_seq: z.coerce.number().int().min(1).optional(), to_seq: z.coerce.number().int().min(1).optional() }),
        response: { 200: AuditChainVerification.meta({ id: 'AuditChainVerification' }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'viewer');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const { from_seq: fromSeq, to_seq: toSeq } = request.query;
      const options = {
        projectId,
        checkpoints: await auditCheckpoints(deps.store, projectId),
        hmacKeys: deps.audit.keys.keys,
        anchorPublicKey: deps.audit.anchorPublicKey,
        verifiedAt: deps.now().toISOString(),
        ...(fromSeq === undefined ? {} : { fromSeq }),
        ...(toSeq === undefined ? {} : { toSeq }),
      };
      return verifyChainPages(options, auditEntryPages(deps.pool, projectId, fromSeq === undefined ? 1 : Math.max(1, fromSeq - 1), toSeq));
    },
  );
}
