import { z } from 'zod';
import { StoredRules } from './anomaly-rules.js';
import { defineEvent } from './envelope.js';
import { Actor, AnomalyId, CredentialId, IntegralJson, ProjectId, text, Timestamp } from './fields.js';

export const AnomalySeverity = z.enum(['info', 'warning', 'critical']);
export type AnomalySeverity = z.infer<typeof AnomalySeverity>;

/** An anomaly alert was opened (spec §2.9); it was created at the event's `at`. */
export const AnomalyRaised = defineEvent(
  'AnomalyRaised',
  1,
  z
    .strictObject({
      anomaly_id: AnomalyId,
      project_id: ProjectId,
      credential_id: CredentialId.nullable(),
      /** Machine-readable, e.g. `egress_spike`, `novel_query_shape`. */
      kind: z.string().regex(/^[a-z][a-z0-9_]{0,63}$/, { message: 'expected a machine-readable kind' }),
      severity: AnomalySeverity,
      title: text(200, 1),
      details: z.record(text(200), IntegralJson),
      window_start: Timestamp.nullable(),
      window_end: Timestamp.nullable(),
    })
    .refine((a) => a.window_start === null || a.window_end === null || a.window_start <= a.window_end, {
      message: 'window_start is after window_end',
      path: ['window_start'],
    }),
);
export type AnomalyRaised = z.infer<typeof AnomalyRaised.schema>;

/** Someone acknowledged an open anomaly. */
export const AnomalyAcknowledged = defineEvent('AnomalyAcknowledged', 1, z.strictObject({ anomaly_id: AnomalyId, acknowledged_by: Actor }));
export type AnomalyAcknowledged = z.infer<typeof AnomalyAcknowledged.schema>;

/** Someone resolved an anomaly. */
export const AnomalyResolved = defineEvent('AnomalyResolved', 1, z.strictObject({ anomaly_id: AnomalyId, resolved_by: Actor }));
export type AnomalyResolved = z.infer<typeof AnomalyResolved.schema>;

/** A project's anomaly rules were replaced (stream `anomalyrules-<project_id>`, docs/anomalies.md). */
export const AnomalyRulesSet = defineEvent('AnomalyRulesSet', 1, StoredRules.extend({ project_id: ProjectId }));
export type AnomalyRulesSet = z.infer<typeof AnomalyRulesSet.schema>;
