/**
 * A person's own account (spec §2.12; docs/identity.md): their consents, and everything pgward
 * holds about them as one AccountExport download. Only a person may call these: a signed-in
 * session or a token this deployment's identity server issued, never an organization API key.
 */
import { z } from 'zod';
import { recordConsents } from '../../../commands/identity/consents.js';
import { consentsOfUser } from '../../../queries/identity.js';
import { ConsentDocumentType, ConsentRecorded } from '../../events/identity.js';
import { text } from '../../events/fields.js';
import { accountExport } from '../../identity/export.js';
import type { IdentityPlane } from '../../identity/plane.js';
import { requirePerson } from '../plugins/auth.js';
import { commandContext, errorResponses, iso, Timestamp, type Api, type ApiDeps } from './support.js';

const ConsentRecord = z
  .object({
    id: z.string(),
    user_id: z.string(),
    document_type: ConsentDocumentType,
    document_version: z.string(),
    accepted: z.boolean().describe('false records a withdrawal (or an e-mail preference turned off)'),
    accepted_at: Timestamp,
    ip_address: z.string().optional(),
  })
  .meta({ id: 'ConsentRecord' });

const RecordConsentRequest = z
  .strictObject({ document_type: ConsentDocumentType, document_version: text(64, 1), accepted: z.boolean().default(true) })
  .meta({ title: 'RecordConsentRequest' });

const AccountExport = z
  .object({
    user: z.object({ id: z.string(), name: z.string(), email: z.email(), email_verified: z.boolean(), created_at: Timestamp, updated_at: Timestamp, image: z.string().optional() }),
    organizations: z.array(z.object({ id: z.string(), name: z.string(), slug: z.string(), role: z.string(), created_at: Timestamp })),
    projects: z.array(z.object({ id: z.string(), org_id: z.string(), name: z.string(), description: z.string(), status: z.string(), created_at: Timestamp })),
    databases: z.array(z.object({ id: z.string(), project_id: z.string(), host: z.string(), port: z.int(), name: z.string(), ssl_mode: z.string(), role: z.string(), created_at: Timestamp })),
    sessions: z.array(z.object({ id: z.string(), expires_at: Timestamp, created_at: Timestamp, ip_address: z.string().optional(), user_agent: z.string().optional() })),
    email_preferences: z.object({ marketing_emails: z.boolean(), usage_limit_alerts: z.boolean() }),
    consents: z.array(z.object({ id: z.string(), document_type: z.string(), document_version: z.string(), accepted_at: Timestamp, ip_address: z.string().optional() })),
    audit_logs: z.array(z.object({ id: z.string(), action: z.string(), created_at: Timestamp, ip_address: z.string().optional(), resource_type: z.string().optional(), resource_id: z.string().optional() })),
    exported_at: Timestamp,
  })
  .meta({ id: 'AccountExport' });

export function accountRoutes(app: Api, deps: ApiDeps, identity: IdentityPlane): void {
  app.get(
    '/v1/account/consents',
    { schema: { operationId: 'listConsents', summary: 'The signed-in person’s consent records, oldest first', tags: ['account'], response: { 200: z.object({ data: z.array(ConsentRecord) }), ...errorResponses('FORBIDDEN') } } },
    async (request) => {
      const userId = requirePerson(request, identity.issuer);
      const rows = await consentsOfUser(deps.pool, userId);
      return { data: rows.map((r) => ({ id: r.consent_id, user_id: r.user_id, document_type: r.document_type as z.infer<typeof ConsentDocumentType>, document_version: r.document_version, accepted: r.accepted, accepted_at: iso(r.accepted_at), ...(r.ip_address ? { ip_address: r.ip_address } : {}) })) };
    },
  );

  app.post(
    '/v1/account/consents',
    {
      schema: { operationId: 'recordConsent', summary: 'Record the signed-in person’s acceptance (or withdrawal) of a document version', tags: ['account'], body: RecordConsentRequest, response: { 201: ConsentRecord, ...errorResponses('FORBIDDEN') } },
    },
    async (request, reply) => {
      const userId = requirePerson(request, identity.issuer);
      const { document_type, document_version, accepted } = request.body;
      const handled = await recordConsents(deps.store, { userId, ip: request.ip, consents: [{ documentType: document_type, documentVersion: document_version, accepted }] }, commandContext(request, deps));
      const event = handled.events[0]!;
      if (event.type !== ConsentRecorded.type) throw new Error(`recording a consent stored ${event.type}`);
      const data = event.data;
      await deps.settle(`user-${userId}`, handled.recorded[0]!.position);
      return reply.code(201).send({ id: data.consent_id, user_id: userId, document_type: data.document_type, document_version: data.document_version, accepted: data.accepted, accepted_at: data.accepted_at, ...(data.ip_address ? { ip_address: data.ip_address } : {}) });
    },
  );

  app.get(
    '/v1/account/export',
    {
      schema: {
        operationId: 'exportAccount',
        summary: 'Everything pgward holds about the signed-in person (AccountExport), as a JSON download',
        tags: ['account'],
        response: { 200: AccountExport, ...errorResponses('FORBIDDEN') },
      },
    },
    async (request, reply) => {
      const userId = requirePerson(request, identity.issuer);
      const exported = await accountExport(deps, identity.server, userId);
      void reply.header('content-disposition', `attachment; filename="pgward-account-${userId}.json"`).header('cache-control', 'no-store');
      return exported;
    },
  );
}
