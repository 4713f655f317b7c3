import { z } from 'zod';
import { anomaly } from '../../../commands/anomalies/anomaly.js';
import { anomalyRules } from '../../../commands/anomalies/anomaly-rules.js';
import { handle } from '../../../commands/handle.js';
import { anomalyStream, evolveAnomaly, type AnomalyRow } from '../../../projections/anomalies.js';
import { anomalyRulesStream } from '../../../projections/anomaly-windows.js';
import { findAnomaly, listAnomalies, type AnomalyCursor } from '../../../queries/anomalies.js';
import { findCredential } from '../../../queries/credentials.js';
import { AnomalySeverity } from '../../events/anomalies.js';
import { AnomalyRulesRequest, ApiRuleSet, apiRuleSet, projectRulesView, storedRules, type StoredRules } from '../../events/anomaly-rules.js';
import { decodeEvent } from '../../events/catalog.js';
import { decodePageToken, encodePageToken, isIssuedTime, PageQuery } from '../pagination.js';
import { Problem } from '../problem.js';
import { fold, visibleProject } from './projects.js';
import { actorOf, commandContext, errorResponses, etag, execute, IdParam, iso, readModelOrStream, requireRole, Timestamp, type Api, type ApiDeps } from './support.js';

const AnomalyStatus = z.enum(['open', 'acknowledged', 'resolved']);
const Kind = z.string().regex(/^[a-z][a-z0-9_]{0,63}$/, { message: 'expected a machine-readable kind' });

const AnomalyAlert = z
  .object({
    id: z.string().describe('ano_ id, derived from (project, credential, kind, window)'),
    project_id: z.string(),
    credential_id: z.string().nullable(),
    kind: z.string().describe('volume_spike, egress_spike, novel_query_shape, error_spike, off_hours or canary_tripped'),
    severity: AnomalySeverity,
    title: z.string(),
    status: AnomalyStatus,
    details: z.record(z.string(), z.unknown()).describe('observed, threshold, baseline, sample_query_hashes, observed_at, ...: docs/anomalies.md'),
    window_start: Timestamp.nullable(),
    window_end: Timestamp.nullable(),
    created_at: Timestamp,
    acknowledged_at: Timestamp.nullable(),
    acknowledged_by: z.string().nullable(),
    resolved_at: Timestamp.nullable(),
    resolved_by: z.string().nullable(),
  })
  .meta({ id: 'AnomalyAlert' });

const AnomalyRules = z
  .object({
    rules: ApiRuleSet.describe('Per detector kind, the project’s settings, defaults filled in'),
    credentials: z.record(z.string(), ApiRuleSet).describe('Per credential id, the settings that override the project’s'),
    revision: z.int().describe('Times the rules were set (the ETag); -1 while the defaults apply'),
  })
  .meta({ id: 'AnomalyRules' });

const nullableIso = (value: string | null) => (value === null ? null : iso(value));

function toAlert(row: AnomalyRow): z.infer<typeof AnomalyAlert> {
  return {
    id: row.anomaly_id,
    project_id: row.project_id,
    credential_id: row.credential_id,
    kind: row.kind,
    severity: row.severity,
    title: row.title,
    status: row.status,
    details: row.details,
    window_start: nullableIso(row.window_start),
    window_end: nullableIso(row.window_end),
    created_at: iso(row.created_at),
    acknowledged_at: nullableIso(row.acknowledged_at),
    acknowledged_by: row.acknowledged_by,
    resolved_at: nullableIso(row.resolved_at),
    resolved_by: row.resolved_by,
  };
}

function toRules(stored: StoredRules | undefined, revision: number): z.infer<typeof AnomalyRules> {
  return {
    rules: projectRulesView(stored),
    credentials: Object.fromEntries(Object.entries(stored?.credentials ?? {}).map(([id, set]) => [id, apiRuleSet(set)])),
    revision,
  };
}

/** The project's rules, folded from their stream (a handful of events): current right after a PUT. */
async function currentRules(deps: ApiDeps, projectId: string): Promise<{ rules: StoredRules | undefined; revision: number }> {
  const events = await deps.store.readStream(anomalyRulesStream(projectId));
  return { rules: events.map(decodeEvent).reduce(anomalyRules.evolve, anomalyRules.initial).rules, revision: events.length - 1 };
}

function decodeCursor(token: string | undefined): AnomalyCursor | undefined {
  const key = decodePageToken(token);
  if (key === undefined) return undefined;
  const [createdAt, anomalyId] = key.split('|');
  if (!createdAt || !anomalyId || !isIssuedTime(createdAt)) throw new Problem('INVALID_INPUT', 'page_token is not a token this API issued; start again without it', { errors: [{ field: 'page_token', message: 'is not a valid page token' }] });
  return { created_at: createdAt, anomaly_id: anomalyId };
}

async function visibleAnomaly(deps: ApiDeps, orgId: string, projectId: string, anomalyId: string): Promise<AnomalyRow> {
  await visibleProject(deps, orgId, projectId);
  const row = await readModelOrStream(deps, () => findAnomaly(deps.pool, projectId, anomalyId), anomalyStream(anomalyId), evolveAnomaly);
  if (!row || row.project_id !== projectId) throw new Problem('NOT_FOUND', `anomaly ${anomalyId} not found in project ${projectId}`);
  return row;
}

const ProjectParams = z.object({ project_id: IdParam('project id') });
const AnomalyParams = ProjectParams.extend({ anomaly_id: IdParam('anomaly id') });
const AnomalyQuery = PageQuery.extend({
  status: AnomalyStatus.optional(),
  kind: Kind.optional(),
  severity: AnomalySeverity.optional(),
  credential_id: z.string().regex(/^[a-zA-Z0-9_.-]+$/).max(128).optional(),
});

export function anomalyRoutes(app: Api, deps: ApiDeps): void {
  app.get(
    '/v1/projects/:project_id/anomalies',
    {
      schema: {
        operationId: 'listAnomalies',
        summary: 'List a project’s anomaly alerts, newest first',
        description: 'Filters: status, kind, severity, credential_id. Alerts come from the detectors of docs/anomalies.md.',
        tags: ['anomalies'],
        params: ProjectParams,
        querystring: AnomalyQuery,
        response: { 200: z.object({ anomalies: z.array(AnomalyAlert), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'viewer');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const { page_size: size, page_token: token, ...filters } = request.query;
      const rows = await listAnomalies(deps.pool, projectId, filters, decodeCursor(token), size + 1);
      const items = rows.slice(0, size);
      const last = items.at(-1);
      return { anomalies: items.map(toAlert), next_page_token: rows.length > size && last ? encodePageToken(`${iso(last.created_at)}|${last.anomaly_id}`) : '' };
    },
  );

  app.get(
    '/v1/projects/:project_id/anomalies/:anomaly_id',
    {
      schema: {
        operationId: 'getAnomaly',
        summary: 'Get an anomaly alert',
        tags: ['anomalies'],
        params: AnomalyParams,
        response: { 200: AnomalyAlert, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'viewer');
      const row = await visibleAnomaly(deps, caller.orgId, request.params.project_id, request.params.anomaly_id);
      etag(reply, row.revision);
      return toAlert(row);
    },
  );

  for (const transition of ['acknowledge', 'resolve'] as const) {
    app.post(
      `/v1/projects/:project_id/anomalies/:anomaly_id/${transition}`,
      {
        schema: {
          operationId: transition === 'acknowledge' ? 'acknowledgeAnomaly' : 'resolveAnomaly',
          summary: transition === 'acknowledge' ? 'Acknowledge an open anomaly alert' : 'Resolve an open or acknowledged anomaly alert',
          description:
            'By a person: an organization API key or a signed-in user (recorded as acknowledged_by / resolved_by); agents have no route here. ' +
            'open → acknowledged → resolved, or open → resolved; any other transition answers 409 INVALID_STATE.',
          tags: ['anomalies'],
          params: AnomalyParams,
          response: { 200: AnomalyAlert, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'INVALID_STATE') },
        },
      },
      async (request, reply) => {
        const caller = requireRole(request, 'member');
        const current = await visibleAnomaly(deps, caller.orgId, request.params.project_id, request.params.anomaly_id);
        const by = actorOf(caller);
        const result = await execute(deps, request, anomalyStream(current.anomaly_id), anomaly, transition === 'acknowledge' ? { kind: 'acknowledge', by } : { kind: 'resolve', by });
        const row = fold(evolveAnomaly, result.recorded, current);
        etag(reply, row.revision);
        return toAlert(row);
      },
    );
  }

  app.get(
    '/v1/projects/:project_id/anomaly-rules',
    {
      schema: {
        operationId: 'getAnomalyRules',
        summary: 'Get a project’s anomaly rules',
        tags: ['anomalies'],
        params: ProjectParams,
        response: { 200: AnomalyRules, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'viewer');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const { rules, revision } = await currentRules(deps, projectId);
      etag(reply, revision);
      return toRules(rules, revision);
    },
  );

  app.put(
    '/v1/projects/:project_id/anomaly-rules',
    {
      schema: {
        operationId: 'setAnomalyRules',
        summary: 'Replace a project’s anomaly rules',
        description:
          'Per detector kind: enabled, sigma, floor, learning_hours, disable_credential (canary_tripped: enabled and disable_credential; off_hours has no sigma); ' +
          'per credential, overrides of any of them. Members left out take the defaults. The detectors apply the new rules from this point of the event log on.',
        tags: ['anomalies'],
        params: ProjectParams,
        body: AnomalyRulesRequest,
        response: { 200: AnomalyRules, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      for (const credentialId of Object.keys(request.body.credentials)) {
        if (!(await findCredential(deps.pool, projectId, credentialId))) {
          throw new Problem('INVALID_INPUT', `credential ${credentialId} is not a credential of project ${projectId}`, { errors: [{ field: `credentials.${credentialId}`, message: 'names no credential of this project' }] });
        }
      }
      const rules = storedRules(request.body);
      // No read-model barrier: the rules are read back from their stream, and the detectors reach them in event order.
      const result = await handle(deps.store, anomalyRulesStream(projectId), anomalyRules, { kind: 'set', projectId, rules }, commandContext(request, deps));
      etag(reply, result.revision);
      return toRules(result.state.rules, result.revision);
    },
  );
}
