import { createHash } from 'node:crypto';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { z } from 'zod';
import type { UpstreamCatalog } from '../../../proxy/policy/upstream-catalog.js';
import { decidedOutcome, REPLAYED_EVENTS, ReplayTally, skipReason, type ReplayGroup } from '../../../proxy/policy/replay.js';
import { decideWithCatalog, type CatalogUnavailable } from '../../../proxy/upstream/catalog-snapshot.js';
import { replayProgress, replayStatements, type ReplayWindow } from '../../../queries/audit.js';
import type { AgentDatabases } from '../../mcp/agent/upstream.js';
import { Problem } from '../problem.js';
import type { PolicyRow } from '../../../projections/policies.js';
import { assertHoneytokensExist, CreatePolicyRequest, ProjectParams, visiblePolicy } from './policies.js';
import { visibleProject } from './projects.js';
import { errorResponses, IdParam, requireRole, type Api, type ApiDeps } from './support.js';
import { catalogOf, inlinePolicy, whatIfContext } from './what-if.js';

/** The longest window one replay covers: longer spans are replayed window by window. */
const MAX_WINDOW_DAYS = 31;
const DAY_MS = 86_400_000;
/** Statements re-decided per call at most, and by default. */
const MAX_LIMIT = 5_000;
const DEFAULT_LIMIT = 1_000;
/** A call stops after this much deciding and hands back a cursor, whatever its limit. */
const TIME_BUDGET_MS = 5_000;
/** Decisions between two yields to the event loop, so that a replay never stalls the API. */
const DECISIONS_PER_TURN = 100;

/** How long the window is; NaN when a bound is not a date-time (that bound's own error says so). */
const spanMs = (body: { start: string; end: string }): number => Date.parse(body.end) - Date.parse(body.start);

const Cursor = z.string().regex(/^[A-Za-z0-9_-]{1,256}$/);

const ReplayRequest = z
  .strictObject({
    start: z.iso.datetime({ offset: true }).describe('Inclusive lower bound on the entries’ time'),
    end: z.iso.datetime({ offset: true }).describe(`Exclusive upper bound; at most ${MAX_WINDOW_DAYS} days after start`),
    credential_id: IdParam('credential id').optional().describe('Only this credential’s statements'),
    cursor: Cursor.optional().describe('next_cursor of the previous call over the same window: continue after it'),
    limit: z.number().int().min(1).max(MAX_LIMIT).default(DEFAULT_LIMIT).describe(`Statements to re-decide in this call, 1-${MAX_LIMIT}; a call also stops after ${TIME_BUDGET_MS / 1000} s of deciding`),
  })
  .refine((body) => !(spanMs(body) <= 0), { message: 'end must be after start', path: ['end'] })
  .refine((body) => !(spanMs(body) > MAX_WINDOW_DAYS * DAY_MS), { message: `the window may span at most ${MAX_WINDOW_DAYS} days`, path: ['end'] })
  .meta({ title: 'ReplayPolicyRequest' });

const Outcome = z.object({ event: z.string(), decision_rule: z.string() });

const PolicyReplay = z
  .object({
    policy_id: z.string().nullable().describe('The saved policy replayed; null for an inline document'),
    policy_version: z.number().int().nullable().describe('The version of the saved policy the statements were decided under; null for an inline document'),
    window: z.object({ start: z.string(), end: z.string(), credential_id: z.string().nullable() }),
    total: z.number().int().describe('Statements of the window (wire and MCP decisions), whatever the cursor'),
    done: z.number().int().describe('Statements of the window up to and including this call'),
    scanned: z.number().int().describe('Statements read by this call: changed + unchanged + skipped'),
    changed: z.number().int().describe('Statements of this call the candidate would decide otherwise'),
    unchanged: z.number().int(),
    skipped: z
      .object({ budget: z.number().int(), upstream: z.number().int(), abridged: z.number().int(), credential: z.number().int() })
      .describe('Statements not re-decided: refused for a budget, or for the upstream or its catalog (state of the moment, not a policy rule); texts the trail kept abridged; credentials the read model does not know'),
    groups: z
      .array(
        z.object({
          old: Outcome.describe('As the audit trail recorded it'),
          new: Outcome.describe('As the candidate policy decides it'),
          changed: z.boolean(),
          count: z.number().int(),
          examples: z.array(z.object({ seq: z.number().int(), id: z.string(), ts: z.string(), credential_id: z.string(), session_id: z.string(), source: z.string(), sql: z.string().describe('The statement as the audit trail keeps it') })),
        }),
      )
      .describe('This call’s statements by (old event, old rule) -> (new event, new rule), changed groups first'),
    next_cursor: z.string().nullable().describe('Pass it back with the same window to continue; null when the window is done'),
  })
  .meta({ id: 'PolicyReplay' });

type Body = Omit<z.infer<typeof ReplayRequest>, 'policy'>;

/** What a cursor is bound to: the policy and the window it continues. */
function fingerprint(policyId: string, body: Body): string {
  return createHash('sha256').update(JSON.stringify([policyId, body.start, body.end, body.credential_id ?? null])).digest('base64url').slice(0, 16);
}

function encodeCursor(afterSeq: number, bound: string): string {
  return Buffer.from(JSON.stringify({ a: afterSeq, w: bound }), 'utf8').toString('base64url');
}

function decodeCursor(cursor: string | undefined, bound: string): number {
  if (cursor === undefined) return 0;
  const invalid = (message: string) => new Problem('INVALID_INPUT', `cursor ${message}; start again without it`, { errors: [{ field: 'cursor', message }] });
  let parsed: { a: number; w: string };
  try {
    parsed = z.object({ a: z.number().int().min(0), w: z.string() }).parse(JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')));
  } catch {
    throw invalid('is not a cursor this API issued');
  }
  if (parsed.w !== bound) throw invalid('belongs to another policy or window');
  return parsed.a;
}

const view = (group: ReplayGroup) => ({
  ...group,
  examples: group.examples.map(({ seq, id, ts, credential_id, session_id, source, sql }) => ({ seq, id, ts, credential_id, session_id, source, sql })),
});

/** Re-decides one page of the window under `policy` (`saved`: a profile of the project, else an inline document). */
async function replayPage(deps: ApiDeps, databases: AgentDatabases, policy: PolicyRow, saved: boolean, body: Body, bound: string): Promise<z.infer<typeof PolicyReplay>> {
  const afterSeq = decodeCursor(body.cursor, bound);
  const window: ReplayWindow = { start: body.start, end: body.end, ...(body.credential_id ? { credentialId: body.credential_id } : {}) };
  const statements = await replayStatements(deps.pool, policy.project_id, window, REPLAYED_EVENTS, afterSeq, body.limit);
  const contexts = { simple: await whatIfContext(deps, policy, 'simple'), extended: await whatIfContext(deps, policy, 'extended') };
  const catalogs = new Map<string, Promise<UpstreamCatalog | CatalogUnavailable>>();
  const catalogFor = (databaseId: string) => {
    let catalog = catalogs.get(databaseId);
    if (!catalog) catalogs.set(databaseId, (catalog = catalogOf(deps, databases, policy, saved, databaseId)));
    return catalog;
  };
  const tally = new ReplayTally();
  const deadline = performance.now() + TIME_BUDGET_MS;
  let lastSeq = afterSeq;
  for (const [index, statement] of statements.entries()) {
    if (index > 0 && index % DECISIONS_PER_TURN === 0) {
      if (performance.now() > deadline) break;
      await yieldToLoop();
    }
    lastSeq = statement.seq;
    const skipped = statement.database_id === null ? 'credential' : skipReason(statement);
    if (skipped) {
      tally.skip(skipped);
      continue;
    }
    // The proxy decides a wire Query as a simple query; MCP runs each statement as a Parse.
    const context = statement.source === 'mcp' ? contexts.extended : contexts.simple;
    const sessionValues = { credential_id: statement.credential_id, project_id: policy.project_id };
    tally.add(statement, decidedOutcome(decideWithCatalog(statement.sql, { ...context, sessionValues }, await catalogFor(statement.database_id!))));
  }
  const { total, done } = await replayProgress(deps.pool, policy.project_id, window, REPLAYED_EVENTS, lastSeq);
  const scanned = tally.changedCount + tally.unchangedCount + Object.values(tally.skipped).reduce((a, b) => a + b, 0);
  return {
    policy_id: saved ? policy.policy_id : null,
    policy_version: saved ? policy.version : null,
    window: { start: body.start, end: body.end, credential_id: body.credential_id ?? null },
    total,
    done,
    scanned,
    changed: tally.changedCount,
    unchanged: tally.unchangedCount,
    skipped: tally.skipped,
    groups: tally.sorted().map(view),
    next_cursor: done < total ? encodeCursor(lastSeq, bound) : null,
  };
}

const DESCRIPTION =
  'Re-decides each wire and MCP statement the project’s audit trail recorded in [start, end) under the policy, on its credential’s database catalog, exactly as the proxy decides, and tallies them by (old event, old rule) -> (new event, new rule) with examples. ' +
  `Paged: at most limit statements (and ${TIME_BUDGET_MS / 1000} s of deciding) per call; pass next_cursor back to continue. Nothing runs upstream, nothing is recorded or saved.`;

export function policyReplayRoutes(app: Api, deps: ApiDeps, databases: AgentDatabases): void {
  app.post(
    '/v1/projects/:project_id/policies/:policy_id/replay',
    {
      schema: {
        operationId: 'replayPolicy',
        summary: 'How a saved policy would have decided the statements of an audit window: the decisions that would change, grouped by rule',
        description: DESCRIPTION,
        tags: ['policies'],
        params: z.object({ project_id: IdParam('project id'), policy_id: IdParam('policy id') }),
        body: ReplayRequest,
        response: { 200: PolicyReplay, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request) => {
      // Members and up: the candidate's honeytokens show as the trail records them, which a viewer may not see.
      const caller = requireRole(request, 'member');
      const policy = await visiblePolicy(deps, caller.orgId, request.params.project_id, request.params.policy_id);
      return replayPage(deps, databases, policy, true, request.body, fingerprint(policy.policy_id, request.body));
    },
  );

  app.post(
    '/v1/projects/:project_id/policies/replay',
    {
      schema: {
        operationId: 'replayInlinePolicy',
        summary: 'How a policy document, never saved, would have decided the statements of an audit window: the decisions that would change, grouped by rule',
        description: `${DESCRIPTION} The policy is validated as a create validates it.`,
        tags: ['policies'],
        params: ProjectParams,
        body: ReplayRequest.safeExtend({ policy: CreatePolicyRequest.describe('A whole policy document, validated as a create validates it and never saved') }),
        response: { 200: PolicyReplay, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'member');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const { policy: document, ...body } = request.body;
      await assertHoneytokensExist(deps, projectId, document.honeytokens, 'policy.honeytokens');
      const policy = inlinePolicy(projectId, document, deps.now().toISOString());
      return replayPage(deps, databases, policy, false, body, fingerprint(JSON.stringify(document), body));
    },
  );
}
