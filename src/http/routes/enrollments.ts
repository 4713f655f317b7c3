import { z } from 'zod';
import { enrollment } from '../../../commands/enrollments/enrollment.js';
import { ENROLLMENT_STREAM, enrollmentStatus, evolveEnrollment, type EnrollmentRow } from '../../../projections/enrollments.js';
import { findEnrollment, listEnrollments } from '../../../queries/enrollments.js';
import { displayPrefix, newSecret, sha256Hex } from '../../crypto/tokens.js';
import { ENROLLMENT_TOKEN_PREFIX } from '../../enroll/token.js';
import { text } from '../../events/fields.js';
import { newId } from '../../ids.js';
import { plans, type PlanTerms } from '../../plans.js';
import { decodePageToken, PageQuery, paginate } from '../pagination.js';
import { Problem } from '../problem.js';
import { fold, visibleOrganization, visibleProject } from './projects.js';
import { errorResponses, etag, execute, IdParam, ifMatch, iso, readModelOrStream, requireRole, Timestamp, type Api, type ApiDeps } from './support.js';

const CreateSelfHostEnrollmentRequest = z
  .strictObject({
    description: text(500).default('').describe('A note for humans, at most 500 characters'),
    expires_at: z.iso
      .datetime({ offset: true })
      .nullish()
      .describe('After this the token stops authenticating data planes (new connections refused, live ones told); null or omitted means never. Must be in the future'),
    region_label: text(100).default('').describe('Where the data plane runs, as you name it (at most 100 characters)'),
  })
  .meta({ title: 'CreateSelfHostEnrollmentRequest' });

const SelfHostEnrollment = z
  .object({
    id: z.string(),
    project_id: z.string(),
    description: z.string(),
    region_label: z.string(),
    token_prefix: z.string().describe('The token’s first characters, to tell tokens apart; never enough to use'),
    status: z.enum(['active', 'revoked', 'expired']),
    expires_at: Timestamp.nullable(),
    revoked_at: Timestamp.nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'SelfHostEnrollment' });

const SelfHostEnrollmentWithToken = SelfHostEnrollment.extend({
  token: z.string().describe('The enrollment token (pgw_enr_...), shown only in this response: pass it to `pgward serve --role proxy --enroll`'),
}).meta({ id: 'SelfHostEnrollmentWithToken' });

function toEnrollment(row: EnrollmentRow, now: Date): z.infer<typeof SelfHostEnrollment> {
  return {
    id: row.enrollment_id,
    project_id: row.project_id,
    description: row.description,
    region_label: row.region_label,
    token_prefix: row.token_prefix,
    status: enrollmentStatus(row, now),
    expires_at: row.expires_at === null ? null : iso(row.expires_at),
    revoked_at: row.revoked_at === null ? null : iso(row.revoked_at),
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

/** Only a self-hosted project of an organization whose plan allows it gets enrollment tokens (spec §2.11). */
async function selfHostedProject(deps: ApiDeps, orgId: string, projectId: string): Promise<{ projectId: string; orgId: string }> {
  const project = await visibleProject(deps, orgId, projectId);
  const org = await visibleOrganization(deps, orgId);
  const terms: PlanTerms | undefined = org ? plans[org.plan as keyof typeof plans] : undefined;
  if (!terms?.selfHostedAllowed) throw new Problem('PLAN_LIMIT_REACHED', `self-host enrollments need the scale or enterprise plan; organization ${orgId} is on ${org?.plan ?? 'no plan'}`);
  if (!project.self_hosted) throw new Problem('CONFLICT', `project ${projectId} is not self-hosted; self-host enrollments are for projects created with self_hosted: true`);
  return { projectId: project.project_id, orgId };
}

async function visibleEnrollment(deps: ApiDeps, orgId: string, projectId: string, enrollmentId: string): Promise<EnrollmentRow> {
  await visibleProject(deps, orgId, projectId);
  const row = await readModelOrStream(deps, () => findEnrollment(deps.pool, projectId, enrollmentId), `${ENROLLMENT_STREAM}${enrollmentId}`, evolveEnrollment);
  if (!row || row.project_id !== projectId) throw new Problem('NOT_FOUND', `self-host enrollment ${enrollmentId} not found in project ${projectId}`);
  return row;
}

const ProjectParams = z.object({ project_id: IdParam('project id') });
const EnrollmentParams = ProjectParams.extend({ enrollment_id: IdParam('enrollment id') });

export function enrollmentRoutes(app: Api, deps: ApiDeps): void {
  app.post(
    '/v1/projects/:project_id/self-host-enrollments',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createSelfHostEnrollment',
        summary: 'Issue a self-host enrollment token for a data plane in your network',
        description:
          'The token is shown once, in `token`; only its hash is stored. `pgward serve --role proxy --enroll <token> --control-plane <url>` runs a data plane with it (docs/self-host.md). ' +
          'Only self-hosted projects (409 otherwise) of organizations on the scale or enterprise plan (403 PLAN_LIMIT_REACHED otherwise) get one.',
        tags: ['self-host'],
        params: ProjectParams,
        body: CreateSelfHostEnrollmentRequest.nullish(),
        response: { 201: SelfHostEnrollmentWithToken, ...errorResponses('FORBIDDEN', 'PLAN_LIMIT_REACHED', 'NOT_FOUND', 'IDEMPOTENCY_KEY_REUSED', 'CONFLICT', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const body = CreateSelfHostEnrollmentRequest.parse(request.body ?? {});
      const now = deps.now();
      const expiresAt = body.expires_at ? new Date(body.expires_at) : null;
      if (expiresAt && expiresAt.getTime() <= now.getTime()) {
        throw new Problem('INVALID_INPUT', 'expires_at must be in the future', { errors: [{ field: 'expires_at', message: 'must be in the future' }] });
      }
      const { projectId, orgId } = await selfHostedProject(deps, caller.orgId, request.params.project_id);
      const enrollmentId = newId('enr_');
      const token = newSecret(ENROLLMENT_TOKEN_PREFIX);
      const tokenHash = sha256Hex(token);
      const result = await execute(deps, request, `${ENROLLMENT_STREAM}${enrollmentId}`, enrollment, {
        kind: 'create',
        enrollment: {
          enrollment_id: enrollmentId,
          project_id: projectId,
          org_id: orgId,
          description: body.description,
          region_label: body.region_label,
          token_hash: tokenHash,
          token_prefix: displayPrefix(token),
          expires_at: expiresAt?.toISOString() ?? null,
        },
      });
      const row = fold(evolveEnrollment, result.recorded);
      if (row.token_hash !== tokenHash) throw new Problem('CONFLICT', 'this request was already served; its token was shown then and cannot be shown again');
      etag(reply, row.revision);
      void reply.header('location', `/v1/projects/${projectId}/self-host-enrollments/${enrollmentId}`);
      return reply.code(201).send({ ...toEnrollment(row, now), token });
    },
  );

  app.get(
    '/v1/projects/:project_id/self-host-enrollments',
    {
      schema: {
        operationId: 'listSelfHostEnrollments',
        summary: 'List a project’s self-host enrollments, revoked and expired ones included (never their tokens)',
        tags: ['self-host'],
        params: ProjectParams,
        querystring: PageQuery,
        response: { 200: z.object({ enrollments: z.array(SelfHostEnrollment), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'member');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const { page_size: size, page_token: token } = request.query;
      const page = paginate(await listEnrollments(deps.pool, projectId, decodePageToken(token), size + 1), size, (row) => row.enrollment_id);
      const now = deps.now();
      return { enrollments: page.items.map((row) => toEnrollment(row, now)), next_page_token: page.next_page_token };
    },
  );

  app.get(
    '/v1/projects/:project_id/self-host-enrollments/:enrollment_id',
    {
      schema: {
        operationId: 'getSelfHostEnrollment',
        summary: 'Get a self-host enrollment (never its token)',
        tags: ['self-host'],
        params: EnrollmentParams,
        response: { 200: SelfHostEnrollment, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'member');
      const row = await visibleEnrollment(deps, caller.orgId, request.params.project_id, request.params.enrollment_id);
      etag(reply, row.revision);
      return toEnrollment(row, deps.now());
    },
  );

  app.post(
    '/v1/projects/:project_id/self-host-enrollments/:enrollment_id/revoke',
    {
      schema: {
        operationId: 'revokeSelfHostEnrollment',
        summary: 'Revoke a self-host enrollment token',
        description:
          'The token stops authenticating at once: new data-plane connections are refused, and live ones are told (their event stream ends with reason `revoked`), ' +
          'upon which the data plane ends its agents’ sessions and refuses new ones. Honours If-Match; 409 when already revoked.',
        tags: ['self-host'],
        params: EnrollmentParams,
        response: { 200: SelfHostEnrollment, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'PRECONDITION_FAILED', 'CONFLICT') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const row = await visibleEnrollment(deps, caller.orgId, request.params.project_id, request.params.enrollment_id);
      const result = await execute(deps, request, `${ENROLLMENT_STREAM}${row.enrollment_id}`, enrollment, { kind: 'revoke', ifRevision: ifMatch(request) });
      const revoked = fold(evolveEnrollment, result.recorded, row);
      etag(reply, revoked.revision);
      return toEnrollment(revoked, deps.now());
    },
  );
}
