/**
 * The activity timeline (spec §2.13 Activity, docs/crm.md): what one CRM event says happened, as
 * data of the event alone, so a rebuild reproduces every activity.
 */
import { z } from 'zod';
import type { CatalogEvent } from '../events/catalog.js';
import { ArtifactApproved, ArtifactDiscarded, ArtifactSent, CRM_RECORDS, type CrmRecordType } from '../events/crm.js';
import type { AgentRole } from '../events/organizations.js';

/** Whose timeline an activity is on: a company, a contact or a deal (a task's or an artifact's subject). */
export const ActivitySubjectType = z.enum(['company', 'contact', 'deal']);
export type ActivitySubjectType = z.infer<typeof ActivitySubjectType>;

export const ActivityVerb = z.enum(['created', 'updated', 'enriched', 'deleted', 'stage_changed', 'won', 'lost', 'started', 'completed', 'cancelled', 'reopened', 'drafted', 'edited', 'approved', 'sent', 'discarded']);
export type ActivityVerb = z.infer<typeof ActivityVerb>;

export type Activity = {
  readonly activity_id: string;
  readonly org_id: string;
  readonly subject_type: ActivitySubjectType;
  readonly subject_id: string;
  readonly record_type: CrmRecordType;
  readonly record_id: string;
  /** `agent` when an agent credential acted, else the person's principal. */
  readonly actor: string;
  readonly agent_role: AgentRole | null;
  /** The credential that acted: `api_key:<key id>` or `user:<subject>`. */
  readonly principal: string;
  readonly verb: ActivityVerb;
  /** The fields an update changed, sorted; empty for other verbs. */
  readonly fields: readonly string[];
  readonly at: string;
};

/** An activity's id: `act_` and the hex of its event's id, so replaying the events makes the same ids. */
export function activityId(eventId: string): string {
  return `act_${eventId.replaceAll('-', '')}`;
}

const kinds = new Map<string, { readonly type: CrmRecordType; readonly step: 'created' | 'updated' | 'deleted' }>(
  Object.entries(CRM_RECORDS).flatMap(([type, events]) => (['created', 'updated', 'deleted'] as const).map((step) => [events[step].type as string, { type: type as CrmRecordType, step }] as const)),
);

const transitions: ReadonlyMap<string, ActivityVerb> = new Map([
  [ArtifactApproved.type, 'approved'],
  [ArtifactSent.type, 'sent'],
  [ArtifactDiscarded.type, 'discarded'],
]);

const taskVerbs: Readonly<Record<string, ActivityVerb>> = { in_progress: 'started', done: 'completed', cancelled: 'cancelled', open: 'reopened' };

interface RecordData {
  readonly record_id: string;
  readonly org_id: string;
  readonly agent_role: AgentRole | null;
  readonly subject_type?: ActivitySubjectType;
  readonly subject_id?: string;
  readonly fields?: Readonly<Record<string, unknown>>;
  readonly changes?: Readonly<Record<string, unknown>>;
}

function updateVerb(type: CrmRecordType, changes: Readonly<Record<string, unknown>>, agent: boolean): ActivityVerb {
  if (type === 'task' && typeof changes.status === 'string') return taskVerbs[changes.status]!;
  if (type === 'deal' && typeof changes.stage === 'string') return changes.stage === 'won' || changes.stage === 'lost' ? changes.stage : 'stage_changed';
  if (type === 'artifact') return 'edited';
  return agent ? 'enriched' : 'updated';
}

/** The activity a CRM record event is, or undefined for any other event. */
export function activityOf(event: CatalogEvent, eventId: string): Activity | undefined {
  const kind = kinds.get(event.type);
  const transition = transitions.get(event.type);
  if (!kind && !transition) return undefined;
  const data = event.data as RecordData;
  const type = kind?.type ?? 'artifact';
  const agent = data.agent_role !== null;
  const verb: ActivityVerb = transition ?? (kind!.step === 'created' ? (type === 'artifact' ? 'drafted' : 'created') : kind!.step === 'deleted' ? 'deleted' : updateVerb(type, data.changes!, agent));
  const placed = type === 'task' || type === 'artifact';
  const subjectType = placed ? (data.subject_type ?? (data.fields!.subject_type as ActivitySubjectType)) : (type as ActivitySubjectType);
  const subjectId = placed ? (data.subject_id ?? (data.fields!.subject_id as string)) : data.record_id;
  return {
    activity_id: activityId(eventId),
    org_id: data.org_id,
    subject_type: subjectType,
    subject_id: subjectId,
    record_type: type,
    record_id: data.record_id,
    actor: agent ? 'agent' : event.metadata.actor,
    agent_role: data.agent_role,
    principal: event.metadata.actor,
    verb,
    fields: kind?.step === 'updated' ? Object.keys(data.changes!) : [],
    at: event.metadata.at,
  };
}
