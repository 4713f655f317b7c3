import { z } from 'zod';
import type { OrganizationRow } from '../../../projections/organizations.js';
import { ApiKeyRole, Plan } from '../../events/organizations.js';
import { decodePageToken, PageQuery, paginate } from '../pagination.js';
import { membershipsOfUser } from '../../../queries/identity.js';
import { callerOf, personOf, type Caller } from '../plugins/auth.js';
import { Problem } from '../problem.js';
import { visibleOrganization } from './projects.js';
import { addressedOrg, errorResponses, IdParam, iso, requireRole, Timestamp, type Api, type ApiDeps } from './support.js';

export const OrgParams = z.object({ org_id: IdParam('organization id (GET /v1/me tells yours)') });

const CallerKind = z.enum(['org_api_key', 'user_jwt', 'user_session']).describe('org_api_key: an organization API key (pgw_org_...); user_jwt: a user’s JWT from the identity provider; user_session: a person signed in to this deployment (session cookie)');

const Me = z
  .object({
    kind: CallerKind,
    org_id: z.string().describe('The organization the request acts in: the credential’s own, or for a person the one named by X-Pgward-Org (else their first); operations taking org_id default to it'),
    role: ApiKeyRole.describe('The caller’s role in that organization (docs/permissions.md); researcher, enricher and outreach are agent roles (docs/crm.md)'),
    key_id: z.string().nullable().describe('The API key’s id (org_api_key), else null'),
    subject: z.string().nullable().describe('The person: the JWT’s `sub` claim (user_jwt) or the signed-in user’s id (user_session); null for a key'),
  })
  .meta({ id: 'Caller' });

const Organization = z
  .object({
    id: z.string(),
    name: z.string(),
    plan: Plan,
    features: z.array(z.string()).describe('Feature flags enabled, e.g. agent-gateway'),
    role: ApiKeyRole.describe('The caller’s role in it'),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Organization' });

function toMe(caller: Caller): z.infer<typeof Me> {
  return caller.kind === 'api_key'
    ? { kind: 'org_api_key', org_id: caller.orgId, role: caller.role, key_id: caller.keyId, subject: null }
    : { kind: caller.kind === 'jwt' ? 'user_jwt' : 'user_session', org_id: caller.orgId, role: caller.role, key_id: null, subject: caller.subject };
}

function toOrganization(row: OrganizationRow, role: z.infer<typeof ApiKeyRole>): z.infer<typeof Organization> {
  return { id: row.org_id, name: row.name, plan: row.plan as z.infer<typeof Plan>, features: row.features, role, created_at: iso(row.created_at), updated_at: iso(row.updated_at) };
}

/** The caller's own organization, which a credential can always see. */
async function ownOrganization(deps: ApiDeps, orgId: string): Promise<OrganizationRow> {
  const row = await visibleOrganization(deps, orgId);
  if (!row) throw new Problem('NOT_FOUND', `organization ${orgId} not found`);
  return row;
}

/** Who the caller is and which organizations it sees: what an agent holding only a key needs to find its org_id. */
export function organizationRoutes(app: Api, deps: ApiDeps, issuer: string): void {
  app.get(
    '/v1/me',
    {
      schema: {
        operationId: 'getCurrentCaller',
        summary: 'Who am I (whoami): the calling credential, its organization id and role',
        description: 'Start here when you hold only a credential: it names your organization (org_id), your role and the key or user you are. Operations taking org_id default to this organization.',
        tags: ['organizations'],
        response: { 200: Me, ...errorResponses() },
      },
    },
    async (request) => toMe(callerOf(request)),
  );

  app.get(
    '/v1/orgs',
    {
      schema: {
        operationId: 'listOrganizations',
        summary: 'List the organizations the caller can see',
        description: 'An organization’s credential (API key, external JWT) belongs to one organization, so the list holds that one; a person sees every organization they are a member of, with their role in each (docs/identity.md#the-acting-organization).',
        tags: ['organizations'],
        querystring: PageQuery,
        response: { 200: z.object({ organizations: z.array(Organization), next_page_token: z.string() }), ...errorResponses() },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'viewer');
      const { page_size: size, page_token: token } = request.query;
      const after = decodePageToken(token);
      const person = personOf(caller, issuer);
      const roles = person ? (await membershipsOfUser(deps.pool, person)).map((m) => [m.org_id, ApiKeyRole.parse(m.role)] as const) : [[caller.orgId, caller.role] as const];
      const visible = roles.filter(([orgId]) => after === undefined || orgId > after).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      const page = paginate(visible.slice(0, size + 1), size, ([orgId]) => orgId);
      const rows = await Promise.all(page.items.map(async ([orgId, role]) => toOrganization(await ownOrganization(deps, orgId), role)));
      return { organizations: rows, next_page_token: page.next_page_token };
    },
  );

  app.get(
    '/v1/orgs/:org_id',
    {
      schema: {
        operationId: 'getOrganization',
        summary: 'Get an organization: its name, plan and features',
        description: 'Another organization’s id answers 404 NOT_FOUND, exactly as a nonexistent one.',
        tags: ['organizations'],
        params: OrgParams,
        response: { 200: Organization, ...errorResponses('NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'viewer');
      return toOrganization(await ownOrganization(deps, addressedOrg(caller, request.params.org_id)), caller.role);
    },
  );
}
