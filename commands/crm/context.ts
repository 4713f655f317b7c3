import type { z } from 'zod';
import type { CatalogEvent } from '../../src/events/catalog.js';
import { CrmContextSet } from '../../src/events/crm.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate } from '../handle.js';

export const CRM_CONTEXT_STREAM = 'crmcontext-';

export type CrmContext = Omit<z.infer<typeof CrmContextSet.schema>, 'org_id'>;

export const EMPTY_CRM_CONTEXT: CrmContext = { positioning: '', icp: '', tone: '', notes: '' };

/** An organization's CrmContext, one stream per organization. `revision` is its ETag (-1 before the first PUT). */
export interface CrmContextState {
  readonly context: CrmContext;
  readonly revision: number;
}

export interface SetCrmContext {
  readonly orgId: string;
  /** The members to change; the others keep their value. */
  readonly changes: Partial<CrmContext>;
  readonly ifRevision?: number;
}

export const crmContext: Aggregate<CrmContextState, SetCrmContext> = {
  initial: { context: EMPTY_CRM_CONTEXT, revision: -1 },
  evolve: (state, event: CatalogEvent) => {
    if (event.type !== CrmContextSet.type) return state;
    const { org_id: _org, ...context } = event.data;
    return { context, revision: event.revision };
  },
  decide: (state, command) => {
    if (command.ifRevision !== undefined && command.ifRevision !== state.revision) {
      return new DomainError('PRECONDITION_FAILED', `the CRM context is at revision ${state.revision}, not ${command.ifRevision}: fetch it again and retry with its ETag`);
    }
    return [emit(CrmContextSet, { org_id: command.orgId, ...state.context, ...command.changes })];
  },
};
