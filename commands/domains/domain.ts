import type { z } from 'zod';
import type { CatalogEvent } from '../../src/events/catalog.js';
import { DomainCreated, DomainDeleted, DomainVerified } from '../../src/events/domains.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate, type Emit } from '../handle.js';

/** One custom domain per stream (`domain-<id>`). `revision` is its ETag. */
export interface DomainState {
  readonly exists: boolean;
  readonly deleted: boolean;
  readonly verified: boolean;
  readonly domainId?: string;
  readonly revision: number;
}

export type DomainCommand =
  | { readonly kind: 'create'; readonly domain: z.input<typeof DomainCreated.schema> }
  /** The TXT record named `recordName` was found carrying the token (the route looked it up). */
  | { readonly kind: 'verify'; readonly recordName: string; readonly ifRevision?: number }
  | { readonly kind: 'delete'; readonly ifRevision?: number };

function evolve(state: DomainState, event: CatalogEvent): DomainState {
  switch (event.type) {
    case DomainCreated.type:
      return { ...state, exists: true, domainId: event.data.domain_id, revision: event.revision };
    case DomainVerified.type:
      return { ...state, verified: true, revision: event.revision };
    case DomainDeleted.type:
      return { ...state, deleted: true, revision: event.revision };
    default:
      return state;
  }
}

function decide(state: DomainState, command: DomainCommand): Emit[] | DomainError {
  if (command.kind === 'create') {
    if (state.exists) return new DomainError('RESOURCE_EXISTS', `domain ${command.domain.domain_id} already exists`);
    return [emit(DomainCreated, command.domain)];
  }
  if (!state.exists || state.deleted) return new DomainError('NOT_FOUND', 'domain not found');
  if (command.ifRevision !== undefined && command.ifRevision !== state.revision) {
    return new DomainError('PRECONDITION_FAILED', `the domain is at revision ${state.revision}, not ${command.ifRevision}: fetch it again and retry with its ETag`);
  }
  const domain_id = state.domainId!;
  if (command.kind === 'delete') return [emit(DomainDeleted, { domain_id })];
  // Verifying a verified domain again changes nothing: the answer is the domain as it is.
  return state.verified ? [] : [emit(DomainVerified, { domain_id, record_name: command.recordName })];
}

export const domain: Aggregate<DomainState, DomainCommand> = {
  initial: { exists: false, deleted: false, verified: false, revision: -1 },
  evolve,
  decide,
};
