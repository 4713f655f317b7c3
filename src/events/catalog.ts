import type { z } from 'zod';
import type { RecordedEvent } from '../store/port.js';
import * as anomalies from './anomalies.js';
import * as approvals from './approvals.js';
import * as audit from './audit.js';
import * as branches from './branches.js';
import * as connections from './connections.js';
import * as cache from './cache.js';
import * as credentials from './credentials.js';
import * as crm from './crm.js';
import * as credits from './credits.js';
import * as databases from './databases.js';
import * as demo from './demo.js';
import * as domains from './domains.js';
import * as enrollments from './enrollments.js';
import { type DecodedEvent, decodeWith, type EventDefinition } from './envelope.js';
import * as honeytokens from './honeytokens.js';
import * as identity from './identity.js';
import * as ipRules from './ip-rules.js';
import * as organizations from './organizations.js';
import * as policies from './policies.js';
import * as projects from './projects.js';
import * as reservations from './reservations.js';
import * as support from './support.js';
import * as webhooks from './webhooks.js';

/** Every event definition the system reads or writes. */
export const catalog = [
  organizations.OrganizationCreated,
  organizations.OrganizationPlanChanged,
  organizations.ApiKeyCreated,
  organizations.ApiKeyRevoked,
  organizations.OrganizationBillingChanged,
  identity.OrganizationMemberAdded,
  identity.OrganizationMemberRoleChanged,
  identity.OrganizationMemberRemoved,
  identity.OrganizationInvitationCreated,
  identity.OrganizationInvitationRevoked,
  identity.OrganizationInvitationAccepted,
  identity.ConsentRecorded,
  projects.ProjectCreated,
  projects.ProjectUpdated,
  projects.ProjectDeleted,
  projects.ProjectHashKeyGenerated,
  databases.DatabaseRegistered,
  databases.DatabaseUpdated,
  databases.DatabaseRemoved,
  databases.ReplicaAdded,
  databases.ReplicaRemoved,
  databases.ReplicaUpdated,
  cache.CacheRuleSet,
  cache.CachePurged,
  policies.PolicyProfileCreated,
  policies.PolicyProfileUpdated,
  policies.PolicyProfileDeleted,
  policies.PolicyRoleProvisioned,
  credentials.CredentialRegistered,
  credentials.CredentialRotated,
  credentials.CredentialRenamed,
  credentials.CredentialDisabled,
  credentials.CredentialEnabled,
  credentials.CredentialRevoked,
  credentials.CredentialExpired,
  credentials.CredentialUsed,
  credentials.CredentialIpRulesSet,
  approvals.ApprovalRequested,
  approvals.ApprovalApproved,
  approvals.ApprovalRejected,
  approvals.ApprovalExpired,
  approvals.ApprovalExecutionStarted,
  approvals.ApprovalExecuted,
  approvals.ApprovalFailed,
  audit.StatementDecidedV1,
  audit.StatementDecided,
  audit.AuditGapRecorded,
  audit.AuditCheckpointSigned,
  anomalies.AnomalyRaised,
  anomalies.AnomalyAcknowledged,
  anomalies.AnomalyResolved,
  anomalies.AnomalyRulesSet,
  honeytokens.HoneytokenCreated,
  honeytokens.HoneytokenDeleted,
  demo.DemoProvisioned,
  demo.DemoPaused,
  demo.DemoResumed,
  webhooks.WebhookCreated,
  webhooks.WebhookUpdated,
  webhooks.WebhookSecretRotated,
  webhooks.WebhookDeleted,
  webhooks.WebhookTestRequested,
  ipRules.IpRulesSet,
  domains.DomainCreated,
  domains.DomainVerified,
  domains.DomainDeleted,
  branches.BranchCreated,
  branches.BranchReady,
  branches.BranchFailed,
  branches.BranchDeleted,
  support.SupportCaseOpened,
  support.SupportMessagePosted,
  support.SupportCaseClosed,
  support.CancellationFeedbackRecorded,
  enrollments.SelfHostEnrollmentCreated,
  enrollments.SelfHostEnrollmentRevoked,
  connections.WireSessionOpened,
  connections.WireSessionClosed,
  reservations.NameReserved,
  reservations.NameReleased,
  crm.CompanyEvents.created,
  crm.CompanyEvents.updated,
  crm.CompanyEvents.deleted,
  crm.ContactEvents.created,
  crm.ContactEvents.updated,
  crm.ContactEvents.deleted,
  crm.DealEvents.created,
  crm.DealEvents.updated,
  crm.DealEvents.deleted,
  crm.TaskEvents.created,
  crm.TaskEvents.updated,
  crm.TaskEvents.deleted,
  crm.ArtifactEvents.created,
  crm.ArtifactEvents.updated,
  crm.ArtifactEvents.deleted,
  crm.ArtifactApproved,
  crm.ArtifactSent,
  crm.ArtifactDiscarded,
  crm.CrmContextSet,
  credits.CreditsToppedUp,
  credits.CreditsCharged,
  credits.CreditsRefunded,
] as const;

export type CatalogDefinition = (typeof catalog)[number];

type Decoded<D extends CatalogDefinition> = D extends CatalogDefinition ? DecodedEvent<D['type'], z.output<D['schema']>> : never;

/** Any decoded event, discriminated on `type`. */
export type CatalogEvent = Decoded<CatalogDefinition>;

/** A stored event whose type the catalog does not know: never skipped silently. */
export class UnknownEventType extends Error {
  override readonly name = 'UnknownEventType';
  constructor(readonly type: string) {
    super(`unknown event type ${JSON.stringify(type)}`);
  }
}

const byType: ReadonlyMap<string, CatalogDefinition> = new Map(catalog.map((definition) => [definition.type, definition]));

/** The definition of a stored type `Name.vN`, or undefined when the catalog does not know it. */
export function eventDefinition(type: string): CatalogDefinition | undefined {
  return byType.get(type);
}

/** Decodes and validates any known event; throws UnknownEventType for any other type. */
export function decodeEvent(recorded: RecordedEvent): CatalogEvent {
  const definition = byType.get(recorded.type);
  if (definition === undefined) throw new UnknownEventType(recorded.type);
  return decodeWith(definition as EventDefinition, recorded) as CatalogEvent;
}
