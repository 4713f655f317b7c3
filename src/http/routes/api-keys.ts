import { z } from 'zod';
import { apiKeyVersion, organization } from '../../../commands/organizations/organization.js';
import { ORG_KEY_PREFIX } from '../../../commands/organizations/create-organization.js';
import { evolveApiKey, type ApiKeyRow } from '../../../projections/api-keys.js';
import { findApiKey, listApiKeys } from '../../../queries/api-keys.js';
import { displayPrefix, newSecret, sha256Hex } from '../../crypto/tokens.js';
import { text } from '../../events/fields.js';
import { ApiKeyRole } from '../../events/organizations.js';
import { newId } from '../../ids.js';
import { decodePageToken, PageQuery, paginate } from '../pagination.js';
import { Problem } from '../problem.js';
import { OrgParams } from './organizations.js';
import { fold } from './projects.js';
import { addressedOrg, etag, execute, errorResponses, IdParam, ifMatch, iso, requireRole, Timestamp, type Api, type ApiDeps } from './support.js';

const ApiKey = z
  .object({ id: z.string(), org_id: z.string(), name: z.string(), role: ApiKeyRole, prefix: z.string().describe('First characters, to tell keys apart'), status: z.enum(['active', 'revoked']), created_at: Timestamp, revoked_at: Timestamp.nullable() })
  .meta({ id: 'ApiKey' });

function toApiKey(row: Omit<ApiKeyRow, 'token_hash'>): z.infer<typeof ApiKey> {
  return { id: row.key_id, org_id: row.org_id, name: row.name, role: row.role as z.infer<typeof ApiKeyRole>, prefix: row.prefix, status: row.status, created_at: iso(row.created_at), revoked_at: row.revoked_at ? iso(row.revoked_at) : null };
}

const KeyParams = OrgParams.extend({ key_id: IdParam('API key id') });

export function apiKeyRoutes(app: Api, deps: ApiDeps): void {
  app.post(
    '/v1/orgs/:org_id/api-keys',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'createApiKey',
        summary: 'Create an organization API key',
        description: 'The key is returned once, in `api_key`; only its hash is stored. Only an owner may create an owner key.',
        tags: ['api-keys'],
        params: OrgParams,
        body: z.strictObject({ name: text(128, 1), role: ApiKeyRole.default('member') }).meta({ title: 'CreateApiKeyRequest' }),
        response: { 201: z.object({ key: ApiKey, api_key: z.string().describe('The secret, shown once') }), ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'IDEMPOTENCY_KEY_REUSED', 'CONFLICT', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, request.body.role === 'owner' ? 'owner' : 'admin');
      addressedOrg(caller, request.params.org_id);
      const secret = newSecret(ORG_KEY_PREFIX);
      const key = { keyId: newId('key_'), name: request.body.name, role: request.body.role, prefix: displayPrefix(secret), tokenHash: sha256Hex(secret) };
      const result = await execute(deps, request, `org-${caller.orgId}`, organization, { kind: 'create-api-key', orgId: caller.orgId, key });
      const row = fold(evolveApiKey, result.recorded);
      if (row.token_hash !== key.tokenHash) throw new Problem('CONFLICT', 'this request was already served; its key was shown then and cannot be shown again');
      etag(reply, apiKeyVersion({ revoked: false }));
      return reply.code(201).send({ key: toApiKey(row), api_key: secret });
    },
  );

  app.get(
    '/v1/orgs/:org_id/api-keys',
    {
      schema: {
        operationId: 'listApiKeys',
        summary: 'List an organization’s API keys (never their secrets)',
        tags: ['api-keys'],
        params: OrgParams,
        querystring: PageQuery,
        response: { 200: z.object({ api_keys: z.array(ApiKey), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'admin');
      addressedOrg(caller, request.params.org_id);
      const { page_size: size, page_token: token } = request.query;
      const page = paginate(await listApiKeys(deps.pool, caller.orgId, decodePageToken(token), size + 1), size, (row) => row.key_id);
      return { api_keys: page.items.map(toApiKey), next_page_token: page.next_page_token };
    },
  );

  app.get(
    '/v1/orgs/:org_id/api-keys/:key_id',
    {
      schema: {
        operationId: 'getApiKey',
        summary: 'Get an organization API key (never its secret)',
        description: 'The ETag is the key’s version (0 active, 1 revoked), for If-Match on revoke.',
        tags: ['api-keys'],
        params: KeyParams,
        response: { 200: ApiKey, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      addressedOrg(caller, request.params.org_id);
      const row = await findApiKey(deps.pool, caller.orgId, request.params.key_id);
      if (!row) throw new Problem('NOT_FOUND', `API key ${request.params.key_id} not found`);
      etag(reply, apiKeyVersion({ revoked: row.status === 'revoked' }));
      return toApiKey(row);
    },
  );

  app.delete(
    '/v1/orgs/:org_id/api-keys/:key_id',
    {
      schema: {
        operationId: 'revokeApiKey',
        summary: 'Revoke an organization API key',
        description: 'Honours If-Match with the key’s ETag (412 when it changed since).',
        tags: ['api-keys'],
        params: KeyParams,
        response: { 204: z.null().describe('Revoked'), ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'INVALID_STATE', 'CONFLICT', 'PRECONDITION_FAILED') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      addressedOrg(caller, request.params.org_id);
      await execute(deps, request, `org-${caller.orgId}`, organization, { kind: 'revoke-api-key', orgId: caller.orgId, keyId: request.params.key_id, ifVersion: ifMatch(request) });
      return reply.code(204).send(null);
    },
  );
}
