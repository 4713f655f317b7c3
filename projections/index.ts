import type { HmacKeyring } from '../src/audit/chain.js';
import type { PreparedEntries } from '../src/audit/prepared-entries.js';
import { auditProjection } from './audit.js';
import type { Projection } from './projection.js';
import { anomaliesProjection } from './anomalies.js';
import { anomalyWindowsProjection } from './anomaly-windows.js';
import { apiKeysProjection } from './api-keys.js';
import { branchesProjection } from './branches.js';
import { connectionsProjection } from './connections.js';
import { cacheControlsProjection } from './cache-controls.js';
import { approvalsProjection } from './approvals.js';
import { credentialsProjection } from './credentials.js';
import { crmActivitiesProjection, crmContextsProjection, crmRecordsProjection } from './crm.js';
import { creditBalancesProjection } from './credits.js';
import { databasesProjection, replicasProjection } from './databases.js';
import { domainsProjection } from './domains.js';
import { enrollmentsProjection } from './enrollments.js';
import { honeytokensProjection } from './honeytokens.js';
import { consentsProjection, invitationsProjection, membershipsProjection } from './identity.js';
import { ipRulesProjection } from './ip-rules.js';
import { organizationsProjection } from './organizations.js';
import { policiesProjection } from './policies.js';
import { projectsProjection } from './projects.js';
import { webhooksProjection } from './webhooks.js';
import { cancellationFeedbackProjection, supportCasesProjection, supportMessagesProjection } from './support.js';

export interface ProjectionOptions {
  /** HMAC keys of the audit chain (PGWARD_AUDIT_HMAC_KEYS); the audit projection hashes with them. */
  readonly auditKeys: HmacKeyring;
  /** The entries ingest prepared, when it runs in the same process. */
  readonly preparedEntries?: PreparedEntries;
}

/** Every projection the projector role runs. */
export function projectionsFor(options: ProjectionOptions): readonly Projection[] {
  return [organizationsProjection, apiKeysProjection, projectsProjection, databasesProjection, replicasProjection, policiesProjection, honeytokensProjection, webhooksProjection, credentialsProjection, approvalsProjection, auditProjection(options.auditKeys, options.preparedEntries), anomalyWindowsProjection, anomaliesProjection, ipRulesProjection, domainsProjection, branchesProjection, supportCasesProjection, supportMessagesProjection, cancellationFeedbackProjection, enrollmentsProjection, crmRecordsProjection, crmContextsProjection, crmActivitiesProjection, cacheControlsProjection, creditBalancesProjection, membershipsProjection, invitationsProjection, consentsProjection, connectionsProjection];
}
