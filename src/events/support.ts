import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { Actor, idSchema, OrgId, text } from './fields.js';

export const SupportCaseId = idSchema('sc_');
export const SupportMessageId = idSchema('scm_');
export const CancellationFeedbackId = idSchema('cfb_');

/** Spec §8: a case's title is 1-500 characters, a case's or a message's body 1-50,000. */
export const SupportTitle = text(500, 1);
export const SupportBody = text(50_000, 1);

/** Spec §2.12: 1 Critical, 2 High, 3 Normal, 4 Low. */
export const SupportSeverity = z.int().min(1).max(4);

/** Who wrote to a case: the organization's people, or the deployment's operators (docs/support.md). */
export const SupportSide = z.enum(['customer', 'operator']);
export type SupportSide = z.infer<typeof SupportSide>;

/** The predefined reasons of a cancellation (the values payment providers use for the same question). */
export const CancellationReason = z.enum(['too_expensive', 'missing_features', 'switched_service', 'unused', 'customer_service', 'too_complex', 'low_quality', 'other']);

/** An organization opened a support case. */
export const SupportCaseOpened = defineEvent(
  'SupportCaseOpened',
  1,
  z.strictObject({ case_id: SupportCaseId, org_id: OrgId, title: SupportTitle, body: SupportBody, severity: SupportSeverity, opened_by: Actor }),
);
export type SupportCaseOpened = z.infer<typeof SupportCaseOpened.schema>;

/** A message was added to a case's thread, by the customer or by an operator. */
export const SupportMessagePosted = defineEvent(
  'SupportMessagePosted',
  1,
  z.strictObject({ case_id: SupportCaseId, message_id: SupportMessageId, side: SupportSide, author: Actor, body: SupportBody }),
);
export type SupportMessagePosted = z.infer<typeof SupportMessagePosted.schema>;

/** A case was closed; nothing more is added to it. */
export const SupportCaseClosed = defineEvent('SupportCaseClosed', 1, z.strictObject({ case_id: SupportCaseId, side: SupportSide, closed_by: Actor }));
export type SupportCaseClosed = z.infer<typeof SupportCaseClosed.schema>;

/** An organization said why it cancels (spec §2.12 CancellationFeedbackRequest); both parts optional. */
export const CancellationFeedbackRecorded = defineEvent(
  'CancellationFeedbackRecorded',
  1,
  z.strictObject({ feedback_id: CancellationFeedbackId, org_id: OrgId, reason: CancellationReason.nullable(), feedback: text(5_000), recorded_by: Actor }),
);
export type CancellationFeedbackRecorded = z.infer<typeof CancellationFeedbackRecorded.schema>;
