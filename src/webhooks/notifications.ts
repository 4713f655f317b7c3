/**
 * What each stored event tells webhook receivers (docs/webhooks.md "Event types"): its type, the
 * project it belongs to, when it happened and the `data` sent. Pure: the delivering role decides
 * from the events alone. No secret and no statement text ever leaves: a statement's SQL may carry
 * literals a mask would hide or a honeytoken's bait value, so a notification names the statement
 * by its query hash, rule and tables, and the audit API (authenticated) has the rest.
 */
import type { Json } from '../crypto/canonical-json.js';
import { AnomalyRaised } from '../events/anomalies.js';
import { AuditCheckpointSigned, decodeDecision, StatementDecided, StatementDecidedV1, type AuditEventKind, type DecisionRecord } from '../events/audit.js';
import { CredentialDisabled, CredentialRegistered, CredentialRevoked } from '../events/credentials.js';
import { decodeData, decodeMetadata, parseJson } from '../events/envelope.js';
import { WebhookTestRequested, type WebhookEventType } from '../events/webhooks.js';
import type { RecordedEvent } from '../store/port.js';

export interface Notification {
  /** The message id: `webhook-id` and the envelope's `id`, the same on every retry and for every endpoint. */
  readonly id: string;
  readonly type: WebhookEventType;
  /** The project whose endpoints get it; for a test, undefined (only `webhookId` gets it). */
  readonly projectId: string | undefined;
  /** Set on a test: the one endpoint it goes to. */
  readonly webhookId?: string;
  readonly occurredAt: string;
  readonly data: { readonly [key: string]: Json };
}

/** Audit decisions that notify, by audit event kind; the others (query, masked, ...) never do. */
const AUDIT_TYPES: Partial<Record<AuditEventKind, WebhookEventType>> = {
  blocked: 'query_blocked',
  budget_exhausted: 'budget_exhausted',
  canary_tripped: 'canary_tripped',
  migration_flagged: 'migration_flagged',
  approval_requested: 'approval_requested',
  approved: 'approval_decided',
  rejected: 'approval_decided',
  approval_expired: 'approval_decided',
};

const DECISIONS: Partial<Record<AuditEventKind, string>> = { approved: 'approved', rejected: 'rejected', approval_expired: 'expired' };

/** The webhook event types that audit decisions produce: an endpoint subscribed to one reads its project's audit stream. */
export const AUDIT_DERIVED_TYPES: ReadonlySet<WebhookEventType> = new Set(Object.values(AUDIT_TYPES));

export function messageId(event: Pick<RecordedEvent, 'id'>): string {
  return `msg_${event.id.replaceAll('-', '')}`;
}

/** What a decided statement's notification carries: never its text, reason or values. */
function statementData(entry: DecisionRecord, kind: AuditEventKind): Record<string, Json> {
  const honeytoken = kind === 'canary_tripped' ? /\b(hnt_[a-z0-9]{20,40})\b/.exec(entry.reason)?.[1] : undefined;
  const decision = DECISIONS[kind];
  return {
    audit_event: kind,
    credential_id: entry.credential_id,
    session_id: entry.session_id,
    source: entry.source,
    region: entry.region,
    statement_kind: entry.statement_kind,
    query_hash: entry.query_hash,
    decision_rule: entry.decision_rule,
    tables_read: entry.tables_read,
    tables_written: entry.tables_written,
    tables_blocked: entry.tables_blocked,
    ...(honeytoken ? { honeytoken_id: honeytoken } : {}),
    ...(entry.approval_id ? { approval_id: entry.approval_id } : {}),
    ...(decision ? { decision } : {}),
  };
}

/** The project a credential belongs to, as the delivering role recorded it from CredentialRegistered. */
export type ProjectOfCredential = (credentialId: string) => string | undefined;

/** The registration that tells which project a credential's later events belong to; undefined for other events. */
export function credentialRegistration(event: RecordedEvent): { credentialId: string; projectId: string } | undefined {
  if (event.type !== CredentialRegistered.type) return undefined;
  const data = decodeData(CredentialRegistered, event);
  return { credentialId: data.credential_id, projectId: data.project_id };
}

/** The notification an event makes, or undefined when it makes none. */
export function notificationOf(event: RecordedEvent, projectOfCredential: ProjectOfCredential): Notification | undefined {
  const id = messageId(event);
  switch (event.type) {
    case StatementDecided.type:
    case StatementDecidedV1.type: {
      // Most decisions notify nobody: only those get validated in full.
      const kind = (parseJson(event.data) as { event?: AuditEventKind }).event;
      const type = kind === undefined ? undefined : AUDIT_TYPES[kind];
      if (!type) return undefined;
      const entry = decodeDecision(event);
      return { id, type, projectId: entry.project_id, occurredAt: entry.ts, data: statementData(entry, entry.event) };
    }
    case CredentialDisabled.type:
    case CredentialRevoked.type: {
      const definition = event.type === CredentialDisabled.type ? CredentialDisabled : CredentialRevoked;
      const data = decodeData(definition, event);
      const meta = decodeMetadata(event);
      return {
        id,
        type: event.type === CredentialDisabled.type ? 'credential_disabled' : 'credential_revoked',
        projectId: projectOfCredential(data.credential_id),
        occurredAt: meta.at,
        data: { credential_id: data.credential_id, reason: data.reason, actor: meta.actor },
      };
    }
    case AuditCheckpointSigned.type: {
      const { project_id, ...checkpoint } = decodeData(AuditCheckpointSigned, event);
      return { id, type: 'audit_checkpoint', projectId: project_id, occurredAt: checkpoint.signed_at, data: checkpoint };
    }
    case AnomalyRaised.type: {
      const { project_id, ...alert } = decodeData(AnomalyRaised, event);
      return { id, type: 'anomaly_alert', projectId: project_id, occurredAt: decodeMetadata(event).at, data: alert };
    }
    case WebhookTestRequested.type: {
      const { webhook_id } = decodeData(WebhookTestRequested, event);
      const meta = decodeMetadata(event);
      return { id, type: 'webhook.test', projectId: undefined, webhookId: webhook_id, occurredAt: meta.at, data: { webhook_id, requested_by: meta.actor } };
    }
    default:
      return undefined;
  }
}

/** The bytes sent: the envelope `{ id, type, project_id, occurred_at, data }` as JSON. */
export function envelopeBody(notification: Notification, projectId: string): string {
  return JSON.stringify({ id: notification.id, type: notification.type, project_id: projectId, occurred_at: notification.occurredAt, data: notification.data });
}
