/**
 * Usage and billing aggregates (spec §2.12; docs/http-api.md): an organization's DailyUsage, and for
 * the deployment's operators the BillingHealthSummary and each organization's billing record.
 */
import { z } from 'zod';
import { organization } from '../../../commands/organizations/organization.js';
import { evolveOrganization, type OrganizationRow } from '../../../projections/organizations.js';
import { billingHealth, dailyUsage } from '../../../queries/usage.js';
import { BillingProvider, Plan, SubscriptionStatus } from '../../events/organizations.js';
import { requireOperator } from '../plugins/auth.js';
import { Problem } from '../problem.js';
import { OrgParams } from './organizations.js';
import { addressedOrg, errorResponses, etag, execute, ifMatch, iso, requireRole, Timestamp, type Api, type ApiDeps } from './support.js';

/** The longest window, as the usage report's (spec §4.9): a longer one is refused, not truncated. */
export const MAX_USAGE_DAYS = 92;

const DailyUsage = z
  .object({
    date: z.string().describe('The UTC day, YYYY-MM-DD'),
    bytes_transferred: z.int().describe('Bytes sent to clients: the audit entries’ bytes_out'),
    cache_hits: z.int().describe('Statements answered from the cache (cache_status hit or stale)'),
    cache_misses: z.int().describe('Statements the cache was asked for and did not hold (cache_status miss)'),
    connection_seconds: z.number().describe('Wire sessions’ time that day, connect to disconnect as the proxy recorded them, to the millisecond (docs/http-api.md)'),
  })
  .meta({ id: 'DailyUsage' });

const DailyUsageReport = z.object({ org_id: z.string(), days: z.array(DailyUsage) }).meta({ id: 'DailyUsageReport' });

const DaysQuery = z.object({ days: z.coerce.number().int().min(1).max(MAX_USAGE_DAYS).default(30).describe(`Window in UTC days ending today, 1-${MAX_USAGE_DAYS}`) });

const BillingHealthSummary = z
  .object({
    entries: z.array(z.object({ plan: z.string(), billing_provider: z.string(), subscription_status: z.string(), org_count: z.int() })),
  })
  .meta({ id: 'BillingHealthSummary' });

const OrganizationBilling = z
  .object({ org_id: z.string(), plan: Plan, billing_provider: z.string(), subscription_status: SubscriptionStatus, updated_at: Timestamp })
  .meta({ id: 'OrganizationBilling' });

const UpdateOrganizationBillingRequest = z
  .strictObject({
    billing_provider: BillingProvider.optional().describe('Who bills it: none, or a provider such as stripe or aws_marketplace'),
    subscription_status: SubscriptionStatus.optional(),
  })
  .refine((body) => body.billing_provider !== undefined || body.subscription_status !== undefined, { message: 'name billing_provider, subscription_status or both' })
  .meta({ title: 'UpdateOrganizationBillingRequest' });

function toBilling(row: OrganizationRow): z.infer<typeof OrganizationBilling> {
  return { org_id: row.org_id, plan: row.plan as z.infer<typeof Plan>, billing_provider: row.billing_provider, subscription_status: row.subscription_status as z.infer<typeof SubscriptionStatus>, updated_at: iso(row.updated_at) };
}

/** The organization as its own stream has it, and the stream's revision (the ETag), else 404. */
export async function organizationRecord(deps: ApiDeps, orgId: string): Promise<{ row: OrganizationRow; revision: number }> {
  const events = await deps.store.readStream(`org-${orgId}`);
  const row = events.reduce<OrganizationRow | undefined>((current, event) => evolveOrganization(current, event) ?? undefined, undefined);
  if (!row) throw new Problem('NOT_FOUND', `organization ${orgId} not found`);
  return { row, revision: events.length - 1 };
}

export function usageRoutes(app: Api, deps: ApiDeps): void {
  const usageSchema = (operationId: string, summary: string, tag: string, codes: readonly ('FORBIDDEN' | 'NOT_FOUND')[]) => ({
    operationId,
    summary,
    description: `Totals across all the organization’s projects for the last \`days\` UTC days (1-${MAX_USAGE_DAYS}, default 30), today included, oldest first, every day listed.`,
    tags: [tag],
    params: OrgParams,
    querystring: DaysQuery,
    response: { 200: DailyUsageReport, ...errorResponses(...codes) },
  });

  app.get('/v1/orgs/:org_id/usage/daily', { schema: usageSchema('getDailyUsage', 'Daily usage of an organization: bytes transferred, cache hits and misses, connection seconds per UTC day', 'usage', ['NOT_FOUND']) }, async (request) => {
    const orgId = addressedOrg(requireRole(request, 'viewer'), request.params.org_id);
    return { org_id: orgId, days: await dailyUsage(deps.pool, orgId, request.query.days, deps.now()) };
  });

  app.get(
    '/v1/operator/orgs/:org_id/usage/daily',
    { schema: usageSchema('getOperatorDailyUsage', 'Daily usage of any organization (operators)', 'operator', ['FORBIDDEN', 'NOT_FOUND']) },
    async (request) => {
      requireOperator(request);
      const orgId = (await organizationRecord(deps, request.params.org_id)).row.org_id;
      return { org_id: orgId, days: await dailyUsage(deps.pool, orgId, request.query.days, deps.now()) };
    },
  );

  app.get(
    '/v1/operator/billing-health',
    {
      schema: {
        operationId: 'getBillingHealthSummary',
        summary: 'Billing health: organizations counted by plan, billing provider and subscription status (operators)',
        tags: ['operator'],
        response: { 200: BillingHealthSummary, ...errorResponses('FORBIDDEN') },
      },
    },
    async (request) => {
      requireOperator(request);
      return { entries: await billingHealth(deps.pool) };
    },
  );

  app.get(
    '/v1/operator/orgs/:org_id/billing',
    {
      schema: {
        operationId: 'getOrganizationBilling',
        summary: 'An organization’s plan, billing provider and subscription status (operators)',
        tags: ['operator'],
        params: OrgParams,
        response: { 200: OrganizationBilling, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      requireOperator(request);
      const { row, revision } = await organizationRecord(deps, request.params.org_id);
      etag(reply, revision);
      return toBilling(row);
    },
  );

  app.patch(
    '/v1/operator/orgs/:org_id/billing',
    {
      schema: {
        operationId: 'updateOrganizationBilling',
        summary: 'Record an organization’s billing provider and subscription status (operators)',
        description: 'What a payment provider’s webhook or an operator reports; the billing health summary counts it. Honours If-Match.',
        tags: ['operator'],
        params: OrgParams,
        body: UpdateOrganizationBillingRequest,
        response: { 200: OrganizationBilling, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'PRECONDITION_FAILED', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      requireOperator(request);
      const orgId = request.params.org_id;
      const { row } = await organizationRecord(deps, orgId);
      const result = await execute(deps, request, `org-${orgId}`, organization, {
        kind: 'set-billing',
        orgId,
        billingProvider: request.body.billing_provider ?? row.billing_provider,
        subscriptionStatus: request.body.subscription_status ?? (row.subscription_status as z.infer<typeof SubscriptionStatus>),
        ifRevision: ifMatch(request),
      });
      etag(reply, result.revision);
      return toBilling(result.recorded.reduce((current, event) => evolveOrganization(current, event) ?? current, row));
    },
  );
}
