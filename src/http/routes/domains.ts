import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { domain } from '../../../commands/domains/domain.js';
import { evolveDomain, type DomainRow } from '../../../projections/domains.js';
import { domainHolding, findDomain, listDomains } from '../../../queries/domains.js';
import { findVerificationRecord, verificationRecordName } from '../../domains/dns.js';
import { HostnameInput } from '../../events/domains.js';
import { newId } from '../../ids.js';
import { decodePageToken, PageQuery, paginate } from '../pagination.js';
import { Problem } from '../problem.js';
import { releaseName, reservationKeys, reserveName, stillHolds } from '../../reservations.js';
import { projectStatus } from '../../../queries/projects.js';
import { fold, visibleProject } from './projects.js';
import { actorOf, errorResponses, etag, execute, foldStream, IdParam, matchedRevision, iso, readModelOrStream, requireRole, Timestamp, type Api, type ApiDeps } from './support.js';

const CreateCustomDomainRequest = z
  .strictObject({
    domain: HostnameInput.describe('The host name agents will connect with: 1-253 characters, two or more labels of letters, digits and inner hyphens; stored lowercased'),
  })
  .meta({ title: 'CreateCustomDomainRequest' });

const DnsRecord = z.object({
  type: z.enum(['TXT', 'CNAME']),
  name: z.string(),
  value: z.string(),
  purpose: z.string(),
});

const DnsInstructions = z
  .object({ records: z.array(DnsRecord).describe('Records to publish at the domain’s DNS provider') })
  .meta({ id: 'DnsInstructions' });

const CustomDomain = z
  .object({
    id: z.string(),
    project_id: z.string(),
    domain: z.string(),
    verified: z.boolean().describe('Whether DNS ownership was verified (POST …/verify)'),
    dns_verification_token: z.string().describe('The value of the TXT record that proves ownership'),
    dns_instructions: DnsInstructions,
    tls_cert_expiry: Timestamp.nullable().describe('When the certificate configured for the domain expires; null when none is configured (docs/domains.md)'),
    verified_at: Timestamp.nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'CustomDomain' });

async function toCustomDomain(deps: ApiDeps, row: DomainRow): Promise<z.infer<typeof CustomDomain>> {
  const certificate = await deps.domains?.certificates?.get(row.domain);
  return {
    id: row.domain_id,
    project_id: row.project_id,
    domain: row.domain,
    verified: row.verified_at !== null,
    dns_verification_token: row.dns_verification_token,
    dns_instructions: {
      records: [
        { type: 'TXT', name: verificationRecordName(row.domain), value: row.dns_verification_token, purpose: 'proves you own the domain; keep it while the domain is in use' },
        { type: 'CNAME', name: row.domain, value: deps.publicHost, purpose: 'sends agents’ connections to the gateway' },
      ],
    },
    tls_cert_expiry: certificate?.expiresAt ?? null,
    verified_at: row.verified_at === null ? null : iso(row.verified_at),
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

/** The caller's live domain in the project (from the stream when the read model has not caught up), else 404. */
async function visibleDomain(deps: ApiDeps, orgId: string, projectId: string, domainId: string): Promise<DomainRow> {
  await visibleProject(deps, orgId, projectId);
  const row = await readModelOrStream(deps, () => findDomain(deps.pool, projectId, domainId), `domain-${domainId}`, evolveDomain);
  if (!row || row.project_id !== projectId || row.status !== 'active') throw new Problem('NOT_FOUND', `domain ${domainId} not found in project ${projectId}`);
  return row;
}

/** A random token the TXT record carries: 128 bits in hex. */
function verificationToken(): string {
  return `pgward-verify-${randomBytes(16).toString('hex')}`;
}

const ProjectParams = z.object({ project_id: IdParam('project id') });
const DomainParams = ProjectParams.extend({ domain_id: IdParam('domain id') });

export function domainRoutes(app: Api, deps: ApiDeps): void {
  app.get(
    '/v1/projects/:project_id/domains',
    {
      schema: {
        operationId: 'listCustomDomains',
        summary: 'List a project’s custom domains',
        tags: ['domains'],
        params: ProjectParams,
        querystring: PageQuery,
        response: { 200: z.object({ domains: z.array(CustomDomain), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'member');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const { page_size: size, page_token: token } = request.query;
      const page = paginate(await listDomains(deps.pool, projectId, decodePageToken(token), size + 1), size, (row) => row.domain_id);
      return { domains: await Promise.all(page.items.map((row) => toCustomDomain(deps, row))), next_page_token: page.next_page_token };
    },
  );

  app.post(
    '/v1/projects/:project_id/domains',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createCustomDomain',
        summary: 'Add a custom domain',
        description:
          'Adds an unverified domain. Publish the TXT record of dns_instructions (`_pgward.<domain>` carrying dns_verification_token), then POST …/verify. ' +
          'A host name belongs to one project at a time: one another project holds answers 409 RESOURCE_EXISTS.',
        tags: ['domains'],
        params: ProjectParams,
        body: CreateCustomDomainRequest,
        response: { 201: CustomDomain, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'RESOURCE_EXISTS', 'IDEMPOTENCY_KEY_REUSED', 'CONFLICT', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const hostname = request.body.domain;
      const taken = () => new Problem('RESOURCE_EXISTS', `the domain ${hostname} is already added to a project; remove it there first`);
      if (await domainHolding(deps.pool, hostname)) throw taken();
      const domainId = newId('dom_');
      const key = reservationKeys.domain(hostname);
      // The read model may not show a domain added a moment ago: the name's own stream decides a race.
      const holds = async (holder: string, since: string) => {
        const row = await foldStream(deps, `domain-${holder}`, evolveDomain);
        return stillHolds(row, row?.status !== 'deleted' && (await projectStatus(deps.pool, row?.project_id ?? '')) === 'active', since);
      };
      if (!(await reserveName(deps.store, key, domainId, actorOf(caller), holds))) throw taken();
      const result = await execute(deps, request, `domain-${domainId}`, domain, {
        kind: 'create',
        domain: { domain_id: domainId, project_id: projectId, domain: hostname, dns_verification_token: verificationToken() },
      }).catch(async (error: unknown) => {
        await releaseName(deps.store, key, domainId, actorOf(caller));
        throw error;
      });
      const row = fold(evolveDomain, result.recorded);
      etag(reply, row.revision);
      void reply.header('location', `/v1/projects/${projectId}/domains/${domainId}`);
      return reply.code(201).send(await toCustomDomain(deps, row));
    },
  );

  app.get(
    '/v1/projects/:project_id/domains/:domain_id',
    {
      schema: {
        operationId: 'getCustomDomain',
        summary: 'Get a custom domain',
        tags: ['domains'],
        params: DomainParams,
        response: { 200: CustomDomain, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'member');
      const row = await visibleDomain(deps, caller.orgId, request.params.project_id, request.params.domain_id);
      etag(reply, row.revision);
      return toCustomDomain(deps, row);
    },
  );

  app.post(
    '/v1/projects/:project_id/domains/:domain_id/verify',
    {
      schema: {
        operationId: 'verifyCustomDomain',
        summary: 'Verify a custom domain’s DNS ownership',
        description:
          'Looks up the TXT record `_pgward.<domain>` (PGWARD_DNS_SERVERS, else the system resolvers) and marks the domain verified when one of its records is the dns_verification_token. ' +
          'Not found: 409 DNS_VERIFICATION_FAILED, nothing changed. A verified domain answers as it is.',
        tags: ['domains'],
        params: DomainParams,
        response: { 200: CustomDomain, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'DNS_VERIFICATION_FAILED', 'PRECONDITION_FAILED') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const current = await visibleDomain(deps, caller.orgId, request.params.project_id, request.params.domain_id);
      const expected = matchedRevision(request, current.revision, 'domain');
      if (current.verified_at !== null) {
        etag(reply, current.revision);
        return toCustomDomain(deps, current);
      }
      const lookup = await findVerificationRecord(current.domain, current.dns_verification_token, deps.domains?.dnsServers);
      if (!lookup.found) throw new Problem('DNS_VERIFICATION_FAILED', `${lookup.why}; publish a TXT record ${lookup.recordName} with the value ${current.dns_verification_token} and retry`);
      const result = await execute(deps, request, `domain-${current.domain_id}`, domain, { kind: 'verify', recordName: lookup.recordName, ...(expected === undefined ? {} : { ifRevision: expected }) });
      // A concurrent verify that got there first leaves this one nothing to record: the stream says how it ended.
      const row = result.recorded.length > 0 ? fold(evolveDomain, result.recorded, current) : ((await foldStream(deps, `domain-${current.domain_id}`, evolveDomain)) ?? current);
      etag(reply, row.revision);
      return toCustomDomain(deps, row);
    },
  );

  app.delete(
    '/v1/projects/:project_id/domains/:domain_id',
    {
      schema: {
        operationId: 'deleteCustomDomain',
        summary: 'Remove a custom domain',
        tags: ['domains'],
        params: DomainParams,
        response: { 204: z.null().describe('Deleted'), ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'PRECONDITION_FAILED') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const current = await visibleDomain(deps, caller.orgId, request.params.project_id, request.params.domain_id);
      const expected = matchedRevision(request, current.revision, 'domain');
      await execute(deps, request, `domain-${current.domain_id}`, domain, { kind: 'delete', ...(expected === undefined ? {} : { ifRevision: expected }) });
      await releaseName(deps.store, reservationKeys.domain(current.domain), current.domain_id, actorOf(caller));
      return reply.code(204).send(null);
    },
  );
}
