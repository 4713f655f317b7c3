import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { credential } from '../../../commands/credentials/credential.js';
import { demo as demoAggregate, DEMO_STREAM, type DemoState } from '../../../commands/demo/demo.js';
import { evolveCredential } from '../../../projections/credentials.js';
import { activeCredentialIds, expiringCredentials } from '../../../queries/credentials.js';
import { readDemo } from '../../demo/provision.js';
import { VendGate } from '../../demo/gate.js';
import { demoStatus, tierOffers, treatments } from '../../demo/offer.js';
import { DEMO_STATEMENTS } from '../../demo/shop.js';
import { DemoTier } from '../../events/demo.js';
import { Reason } from '../../events/fields.js';
import { MaskMode } from '../../events/policies.js';
import { newId } from '../../ids.js';
import { fixedWindowLimiter } from '../plugins/rate-limit.js';
import { Problem } from '../problem.js';
import { AgentCredentialSecrets, issueSecrets, projectDatabases, secretsBody } from './agents.js';
import { PolicyProfile, toPolicy, visiblePolicy } from './policies.js';
import { fold, visibleProject } from './projects.js';
import { errorResponses, execute, executeAs, requireRole, Timestamp, type Api, type ApiDeps } from './support.js';

/** Vends admitted at once beyond which a vend answers DEMO_BUSY. */
const MAX_VENDS_ADMITTED = 8;
/** What a paused demo suggests waiting before asking again. */
const PAUSED_RETRY_SECONDS = 300;
const HOUR_SECONDS = 3600;

const Column = z.object({
  name: z.string(),
  type: z.string(),
  description: z.string(),
  treatment: z.enum(['allowed', 'masked', 'hidden']).describe('allowed: returned as stored; masked: returned through `mask`; hidden: refused (42501)'),
  mask: MaskMode.nullable(),
});

const Demo = z
  .object({
    status: z.enum(['available', 'paused', 'not_configured']),
    detail: z.string(),
    tiers: z.array(
      z.object({
        tier: DemoTier,
        available: z.boolean(),
        policy_id: z.string().nullable(),
        price: z.object({ amount: z.int(), currency: z.string() }).nullable().describe('What a credential of a paid tier costs, in base units of the currency (docs/payments.md); null for the free tier and unpriced ones'),
        detail: z.string(),
      }),
    ),
    limits: z
      .object({
        credential_ttl_seconds: z.int().describe('A vended credential stops working this long after it was issued'),
        max_concurrent_credentials: z.int().describe('Unexpired demo credentials at once, across all clients'),
        credentials_per_address_per_hour: z.int(),
      })
      .nullable(),
    live_credentials: z.int().describe('Demo credentials issued and not yet expired'),
    database: z.object({ name: z.string(), description: z.string() }).nullable(),
    schema: z.array(
      z.object({ table: z.string(), description: z.string(), rows: z.int(), treatment: z.enum(['allowed', 'hidden']), columns: z.array(Column) }),
    ),
    policy: PolicyProfile.nullable().describe('The policy the free tier’s credentials enforce'),
    statements: z.array(z.object({ sql: z.string(), shows: z.string() })).describe('Statements worth trying, and what each shows'),
    credentials: z.object({ method: z.literal('POST'), path: z.literal('/v1/demo/credentials') }),
  })
  .meta({ id: 'Demo' });
type Demo = z.infer<typeof Demo>;

const DemoCredentialRequest = z
  .strictObject({
    tier: DemoTier.default('free').describe('A paid tier the deployment prices (GET /v1/demo says which) is charged per credential: 402 PAYMENT_REQUIRED, docs/payments.md; one it does not price answers DEMO_TIER_NOT_PURCHASABLE'),
  })
  .meta({ title: 'DemoCredentialRequest' });

const DemoCredential = AgentCredentialSecrets.extend({
  tier: DemoTier,
  expires_at: Timestamp.describe('The credential is refused on the wire and on MCP from this instant'),
  policy: PolicyProfile,
}).meta({ id: 'DemoCredential' });

const PauseRequest = z.strictObject({ reason: Reason.default('').describe('Recorded with the pause, and on each credential it disables') }).meta({ title: 'PauseDemoRequest' });

const DETAIL = {
  available: 'POST /v1/demo/credentials for a short-lived read-only credential on the demo shop',
  paused: 'the demo is paused by its operator',
  not_configured: 'this deployment runs no demo (PGWARD_DEMO)',
} as const;

function pausedDetail(state: DemoState): string {
  return state.pausedReason ? `${DETAIL.paused}: ${state.pausedReason}` : DETAIL.paused;
}

function retryAfter(seconds: number): Record<string, string> {
  return { 'retry-after': String(Math.max(1, Math.ceil(seconds))) };
}

/** The paid tier a vend asks for, if any: the variant its price is looked up by. */
function paidTier(body: unknown): DemoTier | undefined {
  const tier = (body as { tier?: DemoTier } | null | undefined)?.tier ?? 'free';
  return tier === 'free' ? undefined : tier;
}

export function demoRoutes(app: Api, deps: ApiDeps): void {
  const priceOf = (tier: DemoTier) => {
    const amount = deps.payments?.prices.get(`createDemoCredential:${tier}`);
    return amount === undefined ? undefined : { amount, currency: deps.payments!.currency };
  };
  const gate = new VendGate(MAX_VENDS_ADMITTED);
  const perAddress = fixedWindowLimiter(HOUR_SECONDS);

  const describe = async (state: DemoState): Promise<Demo> => {
    const status = demoStatus(deps.demo, state);
    const settings = deps.demo;
    const provisioned = state.provisioned;
    const base = {
      status,
      detail: status === 'paused' ? pausedDetail(state) : DETAIL[status],
      tiers: tierOffers(state, priceOf),
      limits: settings ? { credential_ttl_seconds: settings.ttlSeconds, max_concurrent_credentials: settings.maxCredentials, credentials_per_address_per_hour: settings.vendsPerAddressPerHour } : null,
      credentials: { method: 'POST', path: '/v1/demo/credentials' } as const,
    };
    const policyId = provisioned?.tiers.find((t) => t.tier === 'free')?.policy_id;
    if (status === 'not_configured' || !provisioned || !policyId) return { ...base, live_credentials: 0, database: null, schema: [], policy: null, statements: [] };
    const policy = await visiblePolicy(deps, provisioned.org_id, provisioned.project_id, policyId);
    const project = await visibleProject(deps, provisioned.org_id, provisioned.project_id);
    const database = (await projectDatabases(deps, provisioned.project_id)).get(provisioned.database_id);
    return {
      ...base,
      live_credentials: (await expiringCredentials(deps.pool, provisioned.project_id, deps.now())).count,
      database: database ? { name: database.name, description: project.description } : null,
      schema: treatments(policy),
      policy: toPolicy(policy),
      statements: [...DEMO_STATEMENTS],
    };
  };

  /** The demo, for its operator: the demo organization's admins; anyone else finds nothing here. */
  const operated = async (request: FastifyRequest): Promise<DemoState & { provisioned: NonNullable<DemoState['provisioned']> }> => {
    const caller = requireRole(request, 'admin');
    const state = await readDemo(deps.store);
    if (!deps.demo || !state.provisioned || state.provisioned.org_id !== caller.orgId) throw new Problem('NOT_FOUND', 'this organization operates no demo here');
    return { ...state, provisioned: state.provisioned };
  };

  const vend = async (request: FastifyRequest, reply: FastifyReply, tier: DemoTier) => {
    const settings = deps.demo;
    const state = await readDemo(deps.store);
    const provisioned = state.provisioned;
    if (!settings || !provisioned) throw new Problem('DEMO_NOT_CONFIGURED', `${DETAIL.not_configured}; do not retry`);
    if (state.paused) throw new Problem('DEMO_PAUSED', pausedDetail(state), { headers: retryAfter(PAUSED_RETRY_SECONDS) });
    // A paid tier is vended only once its request was paid (the payments plugin settles it before this runs).
    if (tier !== 'free' && !request.payment) throw new Problem('DEMO_TIER_NOT_PURCHASABLE', `the ${tier} tier is a paid one and this deployment takes no payment for it; ask for the free tier`);
    const policyId = provisioned.tiers.find((t) => t.tier === tier)?.policy_id;
    if (!policyId) throw new Problem('DEMO_NOT_CONFIGURED', `the demo has no policy for the ${tier} tier; do not retry`);
    // A paid credential is limited by its price, not by the address's hourly allowance.
    if (!request.payment) perAddress(reply, `demo:${request.ip}`, settings.vendsPerAddressPerHour, 'address');

    const issue = async () => {
      const now = deps.now();
      const live = await expiringCredentials(deps.pool, provisioned.project_id, now);
      if (live.count >= settings.maxCredentials) {
        const wait = (Date.parse(live.firstExpiry!) - now.getTime()) / 1000;
        throw new Problem('DEMO_CAPACITY_FULL', `all ${settings.maxCredentials} demo credentials are in use; the oldest expires in ${Math.ceil(wait)} s`, { headers: retryAfter(wait) });
      }
      const policy = await visiblePolicy(deps, provisioned.org_id, provisioned.project_id, policyId);
      const database = (await projectDatabases(deps, provisioned.project_id)).get(provisioned.database_id);
      if (database?.status !== 'active') throw new Problem('DEMO_NOT_CONFIGURED', 'the demo’s database was removed; do not retry');
      const credentialId = newId('agt_');
      const issued = issueSecrets();
      const expiresAt = new Date(now.getTime() + settings.ttlSeconds * 1000).toISOString();
      const actor = request.payment ? request.payment.settlement.principal : `demo:${request.ip}`;
      const result = await executeAs(deps, { correlationId: request.id, actor, now: deps.now }, `credential-${credentialId}`, credential, {
        kind: 'register',
        credential: {
          credential_id: credentialId,
          project_id: provisioned.project_id,
          database_id: provisioned.database_id,
          policy_profile_id: policyId,
          name: `demo (${tier})`,
          pg_username: credentialId,
          principal_type: 'agent',
          ...issued.stored,
          expires_at: expiresAt,
        },
      });
      const row = fold(evolveCredential, result.recorded);
      return { ...secretsBody(deps, row, database, issued), tier, expires_at: expiresAt, policy: toPolicy(policy) };
    };
    const admitted = gate.admit(issue);
    if (!admitted) throw new Problem('DEMO_BUSY', `more than ${MAX_VENDS_ADMITTED} demo credentials are being issued at once; retry in a second`, { headers: retryAfter(1) });
    return reply.code(201).send(await admitted);
  };

  app.get(
    '/v1/demo',
    {
      config: { public: true },
      schema: {
        operationId: 'getDemo',
        summary: 'What this deployment offers for demo credentials',
        description: 'Public. The demo database’s schema with each column’s treatment under the demo policy, the limits on demo credentials, and statements to try.',
        tags: ['demo'],
        security: [],
        response: { 200: Demo, ...errorResponses() },
      },
    },
    async () => describe(await readDemo(deps.store)),
  );

  app.post(
    '/v1/demo/credentials',
    {
      // The free tier is public; a paid one is priced as createDemoCredential:<tier> (PGWARD_PRICES).
      config: { public: true, priceVariant: (request) => paidTier(request.body) },
      schema: {
        operationId: 'createDemoCredential',
        summary: 'Issue a short-lived, read-only demo credential',
        description:
          'Public. Returns a Postgres connection string and an MCP URL and token, under the demo policy, both refused from `expires_at` on. ' +
          'Limited per client address (429 RATE_LIMITED) and by a ceiling on unexpired demo credentials (503 DEMO_CAPACITY_FULL, Retry-After when the oldest expires). ' +
          'Other 503 codes: DEMO_NOT_CONFIGURED (do not retry), DEMO_PAUSED, DEMO_BUSY, DEMO_TIER_NOT_PURCHASABLE. ' +
          'A paid tier the deployment prices needs an organization API key or JWT (Bearer) and answers 402 PAYMENT_REQUIRED with a Payment challenge; the request sent again with its credential (Authorization: Payment) is charged to the organization’s prepaid credits once and carries Payment-Receipt (docs/payments.md).',
        tags: ['demo'],
        security: [],
        body: DemoCredentialRequest.nullish(),
        response: { 201: DemoCredential, ...errorResponses('DEMO_NOT_CONFIGURED', 'PAYMENT_REQUIRED', 'FORBIDDEN', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => vend(request, reply, request.body?.tier ?? 'free'),
  );

  app.post(
    '/v1/demo/pause',
    {
      schema: {
        operationId: 'pauseDemo',
        summary: 'Pause the demo: stop issuing demo credentials and disable the live ones',
        description: 'For the demo organization’s admins. The project-wide kill-switch of the demo: every active credential of the demo project is disabled, which closes its sessions.',
        tags: ['demo'],
        body: PauseRequest.nullish(),
        response: { 200: Demo, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request) => {
      const { provisioned } = await operated(request);
      const reason = request.body?.reason ?? '';
      await gate.exclusive(async () => {
        await execute(deps, request, DEMO_STREAM, demoAggregate, { kind: 'pause', reason });
        for (const credentialId of await activeCredentialIds(deps.pool, provisioned.project_id)) {
          await execute(deps, request, `credential-${credentialId}`, credential, { kind: 'update', status: 'disabled', reason: reason || 'the demo was paused' });
        }
      });
      return describe(await readDemo(deps.store));
    },
  );

  app.post(
    '/v1/demo/resume',
    {
      schema: {
        operationId: 'resumeDemo',
        summary: 'Resume issuing demo credentials',
        description: 'For the demo organization’s admins. Credentials the pause disabled stay disabled; they expire as they would have.',
        tags: ['demo'],
        response: { 200: Demo, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      await operated(request);
      await gate.exclusive(() => execute(deps, request, DEMO_STREAM, demoAggregate, { kind: 'resume' }));
      return describe(await readDemo(deps.store));
    },
  );
}
