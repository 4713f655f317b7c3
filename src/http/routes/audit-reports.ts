import { z } from 'zod';
import { sessionEntries } from '../../../queries/audit-sessions.js';
import { agentUsageRows } from '../../../queries/audit-usage.js';
import { AuditSessionSummary, summarizeSession } from '../../audit/session-summary.js';
import { agentUsageReport, AgentUsageReport } from '../../audit/usage.js';
import { SessionId } from '../../events/fields.js';
import type { Plan } from '../../events/organizations.js';
import { plans } from '../../plans.js';
import { Problem } from '../problem.js';
import { visibleOrganization, visibleProject } from './projects.js';
import { errorResponses, IdParam, requireRole, type Api, type ApiDeps } from './support.js';

const DAY_MS = 86_400_000;
/** Spec §4.9, §8: the default usage window and the longest one answered. */
const DEFAULT_WINDOW_MS = 30 * DAY_MS;
const MAX_WINDOW_MS = 92 * DAY_MS;

/** Entry timestamps carry milliseconds, so a finer bound could not be reported exactly as the window queried. */
const Instant = z.iso
  .datetime({ offset: true })
  .refine((value) => !/\.\d{4,}/.test(value), { message: 'must have at most millisecond precision' });

const Window = z.object({
  start: Instant.optional().describe('Inclusive lower bound on entry time'),
  end: Instant.optional().describe('Exclusive upper bound on entry time'),
});

const ProjectParams = z.object({ project_id: IdParam('project id') });
const SessionParams = ProjectParams.extend({ session_id: SessionId.describe('The session id of the entries (unique per connection within a proxy instance)') });

function invalidWindow(message: string): Problem {
  return new Problem('INVALID_INPUT', `invalid querystring: start ${message}`, { errors: [{ field: 'start', message }] });
}

function checkOrder(start: Date, end: Date): void {
  if (start >= end) throw invalidWindow('must be before end');
}

/** Spec §2.4/§4.9: [start, end), end defaulting to now and start to 30 days before end; longer than 92 days is refused. */
function usageWindow(query: z.infer<typeof Window>, now: Date): { start: Date; end: Date } {
  const end = query.end === undefined ? now : new Date(query.end);
  const start = query.start === undefined ? new Date(end.getTime() - DEFAULT_WINDOW_MS) : new Date(query.start);
  checkOrder(start, end);
  if (end.getTime() - start.getTime() > MAX_WINDOW_MS) throw invalidWindow('must be at most 92 days before end; a longer window is refused, not truncated');
  return { start, end };
}

export function auditReportRoutes(app: Api, deps: ApiDeps): void {
  app.get(
    '/v1/projects/:project_id/usage/agents',
    {
      schema: {
        operationId: 'getAgentUsageReport',
        summary: 'Per-agent usage of a project over a window, from its audit trail',
        description: 'The window is half-open: start inclusive (default 30 days before end), end exclusive (default now); longer than 92 days answers 400. Usage only: no money amount is attributed to an agent.',
        tags: ['audit'],
        params: ProjectParams,
        querystring: Window,
        response: { 200: AgentUsageReport, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'viewer');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const { start, end } = usageWindow(request.query, deps.now());
      const org = await visibleOrganization(deps, caller.orgId);
      const terms = org && plans[org.plan as Plan];
      if (!terms) throw new Error(`organization ${caller.orgId} has no known plan`);
      const rows = await agentUsageRows(deps.pool, projectId, start, end);
      return agentUsageReport({ projectId, requestedStart: start.toISOString(), requestedEnd: end.toISOString(), ...rows, plan: org.plan, terms });
    },
  );

  app.get(
    '/v1/projects/:project_id/audit/sessions/:session_id',
    {
      schema: {
        operationId: 'getAuditSessionSummary',
        summary: 'Summarize one session of a project’s audit trail',
        description: 'Counts and table names of the session’s oldest 10,000 entries in the optional window [start, end); never row values. 404 when the session has no entries there.',
        tags: ['audit'],
        params: SessionParams,
        querystring: Window,
        response: { 200: AuditSessionSummary, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'viewer');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const { session_id: sessionId } = request.params;
      const start = request.query.start === undefined ? undefined : new Date(request.query.start);
      const end = request.query.end === undefined ? undefined : new Date(request.query.end);
      if (start && end) checkOrder(start, end);
      const entries = await sessionEntries(deps.pool, projectId, sessionId, start, end);
      if (entries.length === 0) throw new Problem('NOT_FOUND', `session ${sessionId} has no audit entries in project ${projectId}${start || end ? ' in the window' : ''}`);
      return summarizeSession(projectId, sessionId, entries);
    },
  );
}
