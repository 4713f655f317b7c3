import { z } from 'zod';
import { holdFor } from '../../../proxy/approval-hold.js';
import { recordedRefusal } from '../../../proxy/decision-record.js';
import { unheldUpTo } from '../../../proxy/policy/approval-rules.js';
import { withoutHashKey, type HashKey } from '../../../proxy/policy/hash-key.js';
import type { StatementDecision } from '../../../proxy/policy/hook.js';
import type { UpstreamCatalog } from '../../../proxy/policy/upstream-catalog.js';
import { filtersUseSessionValues } from '../../../proxy/policy/row-filters.js';
import { decideWithCatalog, type CatalogUnavailable } from '../../../proxy/upstream/catalog-snapshot.js';
import type { PolicyRow } from '../../../projections/policies.js';
import { Problem } from '../problem.js';
import type { AgentDatabases } from '../../mcp/agent/upstream.js';
import { assertHoneytokensExist, CreatePolicyRequest, ProjectParams, visiblePolicy } from './policies.js';
import { visibleProject } from './projects.js';
import { catalogOf, databaseOf, inlinePolicy, whatIfContext } from './what-if.js';
import { errorResponses, IdParam, requireRole, type Api, type ApiDeps } from './support.js';

/** As large as a wire message may be: a longer text is the policy engine's to refuse (parse.too_large), as the proxy does. */
const MAX_SQL_CHARS = 1_000_000;

const EvaluateRequest = z
  .strictObject({
    policy: CreatePolicyRequest.optional().describe('A whole policy document, validated as a create validates it and never saved'),
    policy_id: IdParam('policy id').optional().describe('A saved policy profile of the project'),
    database_id: IdParam('database id').optional().describe('The database whose catalog to decide on; may be left out when the project has one database'),
    sql: z.string().min(1).max(MAX_SQL_CHARS).describe('The query string, as a client would send it'),
    credential_id: IdParam('credential id')
      .optional()
      .describe('The credential to decide for, used as given: its id is what pgward.credential_id() in a row filter stands for. Required when the policy’s row filters name pgward.credential_id()'),
    params: z
      .array(z.union([z.string(), z.number(), z.boolean(), z.null()]))
      .max(65_535)
      .default([])
      .describe('Values for $1, $2, ...: the decision is made on the text alone, as the proxy decides a Parse before any Bind'),
    protocol: z
      .enum(['simple', 'extended'])
      .optional()
      .describe('How a wire client would send it: simple (one Query message), or extended (Parse/Bind/Execute, as the hosted MCP runs statements). Default extended when params are given, else simple'),
  })
  .refine((body) => (body.policy === undefined) !== (body.policy_id === undefined), { message: 'give exactly one of policy and policy_id', path: ['policy'] })
  .refine((body) => body.protocol !== 'simple' || body.params.length === 0, { message: 'a simple query carries no parameters; use protocol extended', path: ['params'] })
  .meta({ title: 'EvaluatePolicyRequest' });

/** What the answer does not weigh: state of the moment rather than the policy's rules. */
const NOT_EVALUATED = ['budgets', 'kill_switch', 'audit_mode', 'upstream'] as const;

const ApprovalHold = z
  .object({
    required: z.boolean().describe('Whether the policy’s approval rules hold it for a human decision whatever rows it affects'),
    rule: z.string().nullable().describe('The approval rule that holds it (approval.held_kind, approval.held_table, approval.row_threshold); null when none does'),
    reason: z.string().nullable(),
    held_above_rows: z
      .int()
      .nullable()
      .describe('A write the gateway estimates before holding it (row_threshold, auto_approve): it is held only when estimated at more than this many rows, and runs unheld (required false) at or under it; null when its rows do not decide'),
  })
  .meta({ id: 'PolicyEvaluationApproval' });

const NOT_HELD: z.infer<typeof ApprovalHold> = { required: false, rule: null, reason: null, held_above_rows: null };

const PolicyEvaluation = z
  .object({
    verdict: z
      .enum(['allow', 'block', 'mask', 'row_filter', 'hold'])
      .describe('allow: runs as sent (or with functions qualified); mask: runs with column masks; block: refused; row_filter: runs with row filters (and no mask); hold: waits for a human’s approval, then runs as runs_as says'),
    event: z.string().describe('The audit event the statement would be recorded as: query, masked, blocked, canary_tripped, approval_requested'),
    decision_rule: z.string().describe('The rule that decided; empty when the statement runs unmodified'),
    reason: z.string(),
    sqlstate: z.string().nullable().describe('The SQLSTATE a client would get for the refusal; null when allowed'),
    masked_columns: z.array(z.string()).describe('Every masked column the statement references, directly or through an output derived from it, as schema.table.column:mode'),
    row_filtered: z.boolean().describe('Whether a row filter would apply'),
    runs_as: z.string().nullable().describe('The text the proxy would send upstream (masks applied); null when refused'),
    statement_kind: z.string(),
    tables: z.object({ read: z.array(z.string()), written: z.array(z.string()), blocked: z.array(z.string()) }),
    flags: z.array(z.object({ event: z.string(), rule: z.string(), reason: z.string() })).describe('Audit rows recorded before the decision when it runs (migration_flagged)'),
    database_id: z.string().describe('The database whose catalog was used'),
    not_evaluated: z.array(z.enum(NOT_EVALUATED)).describe('What the answer does not weigh: budgets left, the kill-switch, whether the audit trail takes records, and what PostgreSQL itself would say'),
    approval: ApprovalHold.describe('What the policy’s approval rules say of a statement it lets run (never required for a refused one)'),
  })
  .meta({ id: 'PolicyEvaluation' });

/** What the approval rules say of an allowed statement: held outright, held above an estimate of its rows, or not held. */
function approvalOf(policy: PolicyRow, decision: Extract<StatementDecision, { action: 'allow' }>, catalog: UpstreamCatalog | CatalogUnavailable): z.infer<typeof ApprovalHold> {
  const hold = holdFor(policy, decision, catalog);
  if (!hold) return NOT_HELD;
  const unheld = unheldUpTo(policy.approval, { kinds: decision.kinds, tablesWritten: decision.tablesWritten, writes: decision.writes, writesThrough: hold.through ?? [] });
  return { required: unheld === null, rule: hold.rule, reason: hold.reason, held_above_rows: unheld };
}

/** The answer; a tripped canary shows as the audit trail records it only to callers who may see honeytokens, else as the agent is told. */
function evaluation(decision: StatementDecision, approval: z.infer<typeof ApprovalHold>, databaseId: string, seesHoneytokens: boolean, hashKey: HashKey | undefined): z.infer<typeof PolicyEvaluation> {
  const common = {
    statement_kind: decision.statementKind,
    row_filtered: decision.action === 'allow' && decision.rowFiltered.length > 0,
    database_id: databaseId,
    not_evaluated: [...NOT_EVALUATED],
    approval,
  };
  if (decision.action === 'refuse') {
    const recorded = seesHoneytokens ? recordedRefusal(decision) : decision;
    return {
      ...common,
      verdict: 'block',
      event: recorded.event,
      decision_rule: recorded.rule,
      reason: recorded.reason,
      sqlstate: decision.sqlstate,
      masked_columns: [],
      runs_as: null,
      tables: { read: [...decision.tablesRead], written: [...decision.tablesWritten], blocked: [...decision.tablesBlocked] },
      flags: [],
    };
  }
  const held = approval.required ? { event: 'approval_requested', rule: approval.rule!, reason: approval.reason! } : undefined;
  return {
    ...common,
    verdict: held ? 'hold' : decision.event === 'masked' ? 'mask' : decision.rowFiltered.length > 0 ? 'row_filter' : 'allow',
    event: held?.event ?? decision.event,
    decision_rule: held?.rule ?? decision.rule,
    reason: held?.reason ?? decision.reason,
    sqlstate: null,
    masked_columns: [...decision.maskedColumns],
    // The hash mask's key is the gateway's alone: shown as a placeholder.
    runs_as: withoutHashKey(decision.sql, hashKey),
    tables: { read: [...decision.tablesRead], written: [...decision.tablesWritten], blocked: [] },
    flags: decision.progress.map(({ event, rule, reason }) => ({ event, rule, reason })),
  };
}

export function policyEvaluateRoutes(app: Api, deps: ApiDeps, databases: AgentDatabases): void {
  app.post(
    '/v1/projects/:project_id/policies/evaluate',
    {
      schema: {
        operationId: 'evaluatePolicy',
        summary: 'What a policy would decide on a statement, without running or saving anything',
        description:
          'Decides `sql` under an inline policy document (never saved) or a saved profile, on the project database’s catalog exactly as the proxy and the hosted MCP decide: the verdict, audit event, rule and reason, masked columns, the text that would run upstream, the tables, and whether the approval rules hold it for a human. ' +
          'Nothing is recorded in the audit trail and no honeytoken acts. Budgets, the kill-switch and audit_mode are not evaluated.',
        tags: ['policies'],
        params: ProjectParams,
        body: EvaluateRequest,
        response: { 200: PolicyEvaluation, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'viewer');
      const { body } = request;
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const saved = body.policy_id === undefined ? undefined : await visiblePolicy(deps, caller.orgId, projectId, body.policy_id);
      if (body.policy) await assertHoneytokensExist(deps, projectId, body.policy.honeytokens, 'policy.honeytokens');
      const policy = saved ?? inlinePolicy(projectId, body.policy!, deps.now().toISOString());
      const databaseId = await databaseOf(deps, projectId, body.database_id);
      const protocol = body.protocol ?? (body.params.length > 0 ? 'extended' : 'simple');
      const catalog = await catalogOf(deps, databases, policy, saved !== undefined, databaseId);
      if (body.credential_id === undefined && filtersUseSessionValues(policy.row_filters, 'credential_id')) {
        const message = 'the policy’s row filters name pgward.credential_id(), so the decision depends on the credential; name one in credential_id';
        throw new Problem('INVALID_INPUT', message, { errors: [{ field: 'credential_id', message: 'required when the policy’s row filters name pgward.credential_id()' }] });
      }
      const sessionValues = { project_id: projectId, ...(body.credential_id === undefined ? {} : { credential_id: body.credential_id }) };
      const context = { ...(await whatIfContext(deps, policy, protocol)), sessionValues };
      const decision = decideWithCatalog(body.sql, context, catalog);
      const approval = decision.action === 'allow' ? approvalOf(policy, decision, catalog) : NOT_HELD;
      return evaluation(decision, approval, databaseId, caller.role !== 'viewer', context.hashKey);
    },
  );
}
