import type { z } from 'zod';
import type { CatalogEvent } from '../../src/events/catalog.js';
import { SupportCaseClosed, SupportCaseOpened, SupportMessagePosted, type SupportSide } from '../../src/events/support.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate, type Emit } from '../handle.js';

/** A case's thread holds at most this many messages, so a case and its thread stay one readable response. */
export const MAX_CASE_MESSAGES = 500;

export const SUPPORT_CASE_STREAM = 'supportcase-';

export function supportCaseStream(caseId: string): string {
  return `${SUPPORT_CASE_STREAM}${caseId}`;
}

/** One support case per stream. `revision` is its ETag. */
export interface SupportCaseState {
  readonly caseId?: string;
  readonly closed: boolean;
  readonly messages: number;
  readonly revision: number;
}

export type SupportCaseCommand =
  | { readonly kind: 'open'; readonly opened: z.input<typeof SupportCaseOpened.schema> }
  | { readonly kind: 'post'; readonly messageId: string; readonly side: SupportSide; readonly author: string; readonly body: string; readonly ifRevision?: number }
  | { readonly kind: 'close'; readonly side: SupportSide; readonly closedBy: string; readonly ifRevision?: number };

function evolve(state: SupportCaseState, event: CatalogEvent): SupportCaseState {
  switch (event.type) {
    case SupportCaseOpened.type:
      return { ...state, caseId: event.data.case_id, revision: event.revision };
    case SupportMessagePosted.type:
      return { ...state, messages: state.messages + 1, revision: event.revision };
    case SupportCaseClosed.type:
      return { ...state, closed: true, revision: event.revision };
    default:
      return state;
  }
}

function decide(state: SupportCaseState, command: SupportCaseCommand): Emit[] | DomainError {
  if (command.kind === 'open') {
    if (state.caseId !== undefined) return new DomainError('RESOURCE_EXISTS', `support case ${command.opened.case_id} already exists`);
    return [emit(SupportCaseOpened, command.opened)];
  }
  if (state.caseId === undefined) return new DomainError('NOT_FOUND', 'support case not found');
  const case_id = state.caseId;
  if (command.ifRevision !== undefined && command.ifRevision !== state.revision) {
    return new DomainError('PRECONDITION_FAILED', `the case is at revision ${state.revision}, not ${command.ifRevision}: fetch it again and retry with its ETag`);
  }
  if (state.closed) {
    return new DomainError('INVALID_STATE', command.kind === 'close' ? `support case ${case_id} is already closed` : `support case ${case_id} is closed; open a new case and mention this one`);
  }
  if (command.kind === 'post') {
    if (state.messages >= MAX_CASE_MESSAGES) return new DomainError('CONFLICT', `support case ${case_id} has ${MAX_CASE_MESSAGES} messages, the most a case holds; open a new case and mention this one`);
    return [emit(SupportMessagePosted, { case_id, message_id: command.messageId, side: command.side, author: command.author, body: command.body })];
  }
  return [emit(SupportCaseClosed, { case_id, side: command.side, closed_by: command.closedBy })];
}

export const supportCase: Aggregate<SupportCaseState, SupportCaseCommand> = {
  initial: { closed: false, messages: 0, revision: -1 },
  evolve,
  decide,
};
