import { z } from 'zod';
import { approval, approvalStream } from '../../../commands/approvals/approval.js';
import { evolveApproval, type ApprovalRow } from '../../../projections/approvals.js';
import { approvalDecision } from '../../../proxy/approval-audit.js';
import { DecisionPublisher } from '../../../proxy/decisions.js';
import { findApproval, listApprovals } from '../../../queries/approvals.js';
import { CredentialId } from '../../events/fields.js';
import { decodePageToken, PageQuery, paginate } from '../pagination.js';
import { Problem } from '../problem.js';
import { callerOf } from '../plugins/auth.js';
import { fold, visibleProject } from './projects.js';
import { actorOf, errorResponses, etag, execute, IdParam, ifMatch, iso, readModelOrStream, requireRole, Timestamp, type Api, type ApiDeps } from './support.js';

const ApprovalStatus = z.enum(['pending', 'approved', 'rejected', 'expired', 'executed', 'failed']);

/** Spec §2.8, plus how it was held and what it did. */
const ApprovalRequest = z
  .object({
    id: z.string(),
    project_id: z.string(),
    policy_profile_id: z.string(),
    policy_version: z.int().describe('The policy version it was held under; an approval runs only under that version'),
    credential_id: z.string().nullable(),
    session_id: z.string(),
    region: z.string(),
    source: z.enum(['wire', 'mcp']).describe('wire: the held session waits and runs it once approved; mcp: the agent’s next query or approval_status call runs it'),
    sql: z.string(),
    normalized_sql: z.string(),
    statement_kind: z.string(),
    target_tables: z.array(z.string()),
    estimated_rows: z.int().nullable().describe('An estimate of the rows it affects, made before it was held: see estimate_method; null when none could be made'),
    estimate_method: z
      .enum(['trial', 'plan'])
      .nullable()
      .describe('trial: the exact rows of a run rolled back at once (an approved write that then affects other rows, beyond the rule’s row_tolerance_percent, is rolled back); plan: the planner’s estimate (EXPLAIN), when the trial ran out of time (an approved write that then affects more than ten times it is rolled back)'),
    hold_rule: z.string().describe('The approval rule that held it'),
    hold_reason: z.string(),
    status: ApprovalStatus,
    requested_at: Timestamp,
    expires_at: Timestamp,
    decided_at: Timestamp.nullable(),
    decided_by: z.string().nullable().describe('The API key (api_key:key_...) or user (user:...) who decided'),
    reason: z.string(),
    rows_affected: z.int().nullable().describe('Rows the approved statement affected once it ran'),
  })
  .meta({ id: 'ApprovalRequest' });

const ApprovalDecisionRequest = z.strictObject({ reason: z.string().max(500).default('').describe('A note attached to the decision, at most 500 characters') }).meta({ title: 'ApprovalDecisionRequest' });

export function toApproval(row: ApprovalRow): z.infer<typeof ApprovalRequest> {
  return {
    id: row.approval_id,
    project_id: row.project_id,
    policy_profile_id: row.policy_profile_id,
    policy_version: row.policy_version,
    credential_id: row.credential_id,
    session_id: row.session_id,
    region: row.region,
    source: row.source,
    sql: row.sql,
    normalized_sql: row.normalized_sql,
    statement_kind: row.statement_kind,
    target_tables: row.target_tables,
    estimated_rows: row.estimated_rows === null ? null : Number(row.estimated_rows),
    estimate_method: row.estimate_method ?? null,
    hold_rule: row.hold_rule,
    hold_reason: row.hold_reason,
    status: row.status,
    requested_at: iso(row.requested_at),
    expires_at: iso(row.expires_at),
    decided_at: row.decided_at === null ? null : iso(row.decided_at),
    decided_by: row.decided_by,
    reason: row.reason,
    rows_affected: row.rows_affected === null ? null : Number(row.rows_affected),
  };
}

const ProjectParams = z.object({ project_id: IdParam('project id') });
const ApprovalParams = ProjectParams.extend({ approval_id: IdParam('approval request id') });
const ListQuery = PageQuery.extend({
  status: ApprovalStatus.optional().describe('Only requests in this status'),
  credential_id: CredentialId.optional().describe('Only requests of this agent credential'),
});

async function visibleApproval(deps: ApiDeps, orgId: string, projectId: string, approvalId: string): Promise<ApprovalRow> {
  await visibleProject(deps, orgId, projectId);
  const row = await readModelOrStream(deps, () => findApproval(deps.pool, projectId, approvalId), approvalStream(approvalId), evolveApproval);
  if (!row || row.project_id !== projectId) throw new Problem('NOT_FOUND', `approval request ${approvalId} not found in project ${projectId}`);
  return row;
}

/** Decisions on approval requests (spec §2.8): listed and read by any role, decided by a human principal of role member or above. */
export function approvalRoutes(app: Api, deps: ApiDeps): void {
  // Its own publisher id: each publisher's sequence must be its own (the id, boot epoch and sequence derive the record's event id).
  const decisions = new DecisionPublisher(deps.decisions.bus, { proxyId: `${deps.decisions.publisherId.slice(0, 59)}:apr`, bootEpoch: Math.floor(Date.now() / 1000) }, 10_000, (error) =>
    app.log.warn({ err: error }, 'decision bus refused an approval record; retrying'),
  );
  app.addHook('onClose', async () => {
    await decisions.close();
  });

  app.get(
    '/v1/projects/:project_id/approvals',
    {
      schema: {
        operationId: 'listApprovals',
        summary: 'List a project’s approval requests',
        description: 'Statements held for a human decision by their policy’s approval rules, by id; filter by status and credential.',
        tags: ['approvals'],
        params: ProjectParams,
        querystring: ListQuery,
        response: { 200: z.object({ approvals: z.array(ApprovalRequest), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'viewer');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const { page_size: size, page_token: token, status, credential_id: credentialId } = request.query;
      const filter = { ...(status ? { status } : {}), ...(credentialId ? { credentialId } : {}) };
      const page = paginate(await listApprovals(deps.pool, projectId, filter, decodePageToken(token), size + 1), size, (row) => row.approval_id);
      return { approvals: page.items.map(toApproval), next_page_token: page.next_page_token };
    },
  );

  app.get(
    '/v1/projects/:project_id/approvals/:approval_id',
    {
      schema: {
        operationId: 'getApproval',
        summary: 'Get an approval request',
        tags: ['approvals'],
        params: ApprovalParams,
        response: { 200: ApprovalRequest, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'viewer');
      const row = await visibleApproval(deps, caller.orgId, request.params.project_id, request.params.approval_id);
      etag(reply, row.revision);
      return toApproval(row);
    },
  );

  for (const verdict of ['approve', 'reject'] as const) {
    app.post(
      `/v1/projects/:project_id/approvals/:approval_id/${verdict}`,
      {
        schema: {
          operationId: verdict === 'approve' ? 'approveApproval' : 'rejectApproval',
          summary: verdict === 'approve' ? 'Approve a held statement' : 'Reject a held statement',
          description:
            (verdict === 'approve'
              ? 'The held statement runs once, exactly as it was held (same text, parameters, credential and policy version); a wire session waiting for it gets its result. '
              : 'The held statement never runs; a wire session waiting for it gets an error naming the rejection and its reason. ') +
            'Only a pending request can be decided: a second decision, or one after expires_at, answers 409 INVALID_STATE. Needs a human principal of role member or above (an org API key or a JWT user); agent credentials never decide.',
          tags: ['approvals'],
          params: ApprovalParams,
          body: ApprovalDecisionRequest.nullish(),
          response: { 200: ApprovalRequest, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'INVALID_STATE', 'PRECONDITION_FAILED', 'UNSUPPORTED_MEDIA_TYPE') },
        },
      },
      async (request, reply) => {
        const caller = requireRole(request, 'member');
        const current = await visibleApproval(deps, caller.orgId, request.params.project_id, request.params.approval_id);
        const expected = ifMatch(request);
        if (expected !== undefined && expected !== current.revision) throw new Problem('PRECONDITION_FAILED', `the approval request is at revision ${current.revision}, not ${expected}; read it again`);
        const decidedBy = actorOf(callerOf(request));
        const reason = request.body?.reason ?? '';
        await execute(deps, request, approvalStream(current.approval_id), approval, { kind: verdict, decidedBy, reason });
        const row = fold(evolveApproval, await deps.store.readStream(approvalStream(current.approval_id)));
        if (verdict === 'reject') {
          const said = reason === '' ? 'no reason given' : `reason: ${reason}`;
          decisions.publish(approvalDecision(row, { event: 'rejected', source: 'rest', rule: 'approval.rejected', reason: `rejected by ${decidedBy} (${said})`, ts: row.decided_at ?? new Date().toISOString(), clientIp: request.ip.replace(/^::ffff:/, '') }));
        }
        etag(reply, row.revision);
        return toApproval(row);
      },
    );
  }
}
