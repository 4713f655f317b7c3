import type { CatalogEvent } from '../../src/events/catalog.js';
import { ArtifactApproved, ArtifactDiscarded, ArtifactSent, CRM_RECORDS, type ArtifactStatus, type CrmRecordType, type TaskStatus } from '../../src/events/crm.js';
import type { EventDefinition } from '../../src/events/envelope.js';
import type { AgentRole } from '../../src/events/organizations.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate, type Emit } from '../handle.js';

export type Fields = Readonly<Record<string, unknown>>;

/** The stream of one CRM record: `crm<type>-<id>`, a category per record type. */
export function crmStream(type: CrmRecordType, recordId: string): string {
  return `${crmStreamPrefix(type)}${recordId}`;
}

export function crmStreamPrefix(type: CrmRecordType): string {
  return `crm${type}-`;
}

/** One CRM record per stream. `revision` is its ETag. */
export interface CrmRecordState {
  readonly recordId?: string;
  readonly orgId?: string;
  readonly fields: Fields;
  /** An artifact's status; the other types have none. */
  readonly status?: ArtifactStatus;
  readonly deleted: boolean;
  readonly revision: number;
}

export type ArtifactTransition = 'approve' | 'send' | 'discard';

/** Who acts: the agent role of an agent credential, or null for a person. */
interface Acting {
  readonly agentRole: AgentRole | null;
}

export type CrmRecordCommand =
  | (Acting & { readonly kind: 'create'; readonly recordId: string; readonly orgId: string; readonly fields: Fields })
  | (Acting & { readonly kind: 'update'; readonly changes: Fields; readonly ifRevision?: number })
  | (Acting & { readonly kind: 'delete'; readonly ifRevision?: number })
  | (Acting & { readonly kind: 'transition'; readonly transition: ArtifactTransition; readonly ifRevision?: number });

/** Artifact status transitions (docs/crm.md): draft → approved → sent; draft or approved → discarded. */
export const ARTIFACT_TRANSITIONS: Readonly<Record<ArtifactTransition, { readonly from: readonly ArtifactStatus[]; readonly to: ArtifactStatus; readonly event: EventDefinition }>> = {
  approve: { from: ['draft'], to: 'approved', event: ArtifactApproved },
  send: { from: ['approved'], to: 'sent', event: ArtifactSent },
  discard: { from: ['draft', 'approved'], to: 'discarded', event: ArtifactDiscarded },
};

/** Research task status moves (docs/crm.md): open → in_progress → done; open or in_progress → cancelled. */
export const TASK_MOVES: Readonly<Record<TaskStatus, readonly TaskStatus[]>> = {
  open: ['in_progress', 'done', 'cancelled'],
  in_progress: ['open', 'done', 'cancelled'],
  done: [],
  cancelled: [],
};

/** A company's domain is kept lowercased (spec §2.13), whatever case a request gives. */
function normalized(type: CrmRecordType, fields: Fields): Fields {
  return type === 'company' && typeof fields.domain === 'string' ? { ...fields, domain: fields.domain.toLowerCase() } : fields;
}

const transitionTypes = new Map(Object.values(ARTIFACT_TRANSITIONS).map((t) => [t.event.type as string, t.to]));

interface RecordData {
  readonly record_id: string;
  readonly org_id: string;
  readonly fields?: Fields;
  readonly changes?: Fields;
}

/** The aggregate of one record type: create, update, delete, and for artifacts the status transitions. */
export function crmRecord(type: CrmRecordType): Aggregate<CrmRecordState, CrmRecordCommand> {
  const events: Readonly<Record<'created' | 'updated' | 'deleted', EventDefinition>> = CRM_RECORDS[type];
  const label = type === 'task' ? 'research task' : type;

  function evolve(state: CrmRecordState, event: CatalogEvent): CrmRecordState {
    const data = event.data as RecordData;
    if (event.type === events.created.type) {
      return { ...state, recordId: data.record_id, orgId: data.org_id, fields: data.fields!, ...(type === 'artifact' ? { status: 'draft' as const } : {}), revision: event.revision };
    }
    if (event.type === events.updated.type) return { ...state, fields: { ...state.fields, ...data.changes }, revision: event.revision };
    if (event.type === events.deleted.type) return { ...state, deleted: true, revision: event.revision };
    const to = transitionTypes.get(event.type);
    return to === undefined ? state : { ...state, status: to, revision: event.revision };
  }

  /**
   * Why an agent may not make this change to a research task: it changes only its own role's tasks,
   * and never their role (else outreach, which may not create tasks, could hand its work on). Decided
   * on the stream, so a reassignment racing the agent's change is seen.
   */
  function agentTaskChange(state: CrmRecordState, agentRole: AgentRole | null, changes: Fields): DomainError | undefined {
    if (agentRole === null) return undefined;
    if (agentRole !== state.fields.role) return new DomainError('FORBIDDEN', `this task is for the ${String(state.fields.role)} role; an agent of role ${agentRole} may not change it`);
    if (changes.role !== undefined && changes.role !== state.fields.role) return new DomainError('FORBIDDEN', 'only a person reassigns a task to another role');
    return undefined;
  }

  /** Why the record's state refuses any change, if it does. */
  function settled(state: CrmRecordState, command: CrmRecordCommand): DomainError | undefined {
    if (command.kind === 'delete') return undefined;
    if (type === 'task' && TASK_MOVES[state.fields.status as TaskStatus].length === 0) {
      return new DomainError('INVALID_STATE', `research task ${state.recordId} is ${String(state.fields.status)}; it takes no more changes`);
    }
    if (type === 'artifact' && command.kind === 'update' && state.status !== 'draft') {
      return new DomainError('INVALID_STATE', `artifact ${state.recordId} is ${state.status}; only a draft's content changes`);
    }
    return undefined;
  }

  function decide(state: CrmRecordState, command: CrmRecordCommand): Emit[] | DomainError {
    if (command.kind === 'create') {
      if (state.recordId !== undefined) return new DomainError('RESOURCE_EXISTS', `${label} ${command.recordId} already exists`);
      return [emit(events.created, { record_id: command.recordId, org_id: command.orgId, agent_role: command.agentRole, fields: normalized(type, command.fields) })];
    }
    if (state.recordId === undefined || state.deleted) return new DomainError('NOT_FOUND', `${label} not found`);
    if (command.ifRevision !== undefined && command.ifRevision !== state.revision) {
      return new DomainError('PRECONDITION_FAILED', `the ${label} is at revision ${state.revision}, not ${command.ifRevision}: fetch it again and retry with its ETag`);
    }
    const refused = (type === 'task' && command.kind === 'update' ? agentTaskChange(state, command.agentRole, command.changes) : undefined) ?? settled(state, command);
    if (refused) return refused;
    const subject = type === 'task' || type === 'artifact' ? { subject_type: state.fields.subject_type, subject_id: state.fields.subject_id } : {};
    const base = { record_id: state.recordId, org_id: state.orgId, agent_role: command.agentRole, ...subject };
    switch (command.kind) {
      case 'update': {
        const status = command.changes.status as TaskStatus | undefined;
        if (type === 'task' && status !== undefined && status !== state.fields.status && !TASK_MOVES[state.fields.status as TaskStatus].includes(status)) {
          return new DomainError('INVALID_STATE', `research task ${state.recordId} cannot move from ${String(state.fields.status)} to ${status}`);
        }
        return [emit(events.updated, { ...base, changes: normalized(type, command.changes) })];
      }
      case 'delete':
        return [emit(events.deleted, base)];
      case 'transition': {
        const move = ARTIFACT_TRANSITIONS[command.transition];
        if (type !== 'artifact' || !move.from.includes(state.status!)) {
          return new DomainError('INVALID_STATE', `artifact ${state.recordId} is ${state.status}; ${command.transition} needs ${move.from.join(' or ')}`);
        }
        return [emit(move.event, base)];
      }
    }
  }

  return { initial: { fields: {}, deleted: false, revision: -1 }, evolve, decide };
}
