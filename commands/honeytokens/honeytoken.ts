import type { z } from 'zod';
import type { CatalogEvent } from '../../src/events/catalog.js';
import { HoneytokenCreated, HoneytokenDeleted } from '../../src/events/honeytokens.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate, type Emit } from '../handle.js';

/** One honeytoken per stream (`honeytoken-<id>`). `revision` is its ETag. */
export interface HoneytokenState {
  readonly exists: boolean;
  readonly deleted: boolean;
  readonly honeytokenId?: string;
  readonly revision: number;
}

export type HoneytokenCommand =
  | { readonly kind: 'create'; readonly honeytoken: z.input<typeof HoneytokenCreated.schema> }
  /** `attachedTo` lists the live policies that plant it; the route looks them up. */
  | { readonly kind: 'delete'; readonly attachedTo: readonly string[]; readonly ifRevision?: number };

function evolve(state: HoneytokenState, event: CatalogEvent): HoneytokenState {
  switch (event.type) {
    case HoneytokenCreated.type:
      return { ...state, exists: true, honeytokenId: event.data.honeytoken_id, revision: event.revision };
    case HoneytokenDeleted.type:
      return { ...state, deleted: true, revision: event.revision };
    default:
      return state;
  }
}

function decide(state: HoneytokenState, command: HoneytokenCommand): Emit[] | DomainError {
  if (command.kind === 'create') {
    if (state.exists) return new DomainError('RESOURCE_EXISTS', `honeytoken ${command.honeytoken.honeytoken_id} already exists`);
    return [emit(HoneytokenCreated, command.honeytoken)];
  }
  if (!state.exists || state.deleted) return new DomainError('NOT_FOUND', 'honeytoken not found');
  if (command.ifRevision !== undefined && command.ifRevision !== state.revision) {
    return new DomainError('PRECONDITION_FAILED', `the honeytoken is at revision ${state.revision}, not ${command.ifRevision}: fetch it again and retry with its ETag`);
  }
  if (command.attachedTo.length > 0) {
    return new DomainError('CONFLICT', `the honeytoken is planted by policy profile(s) ${command.attachedTo.join(', ')}; remove it from their honeytokens first`);
  }
  return [emit(HoneytokenDeleted, { honeytoken_id: state.honeytokenId! })];
}

export const honeytoken: Aggregate<HoneytokenState, HoneytokenCommand> = {
  initial: { exists: false, deleted: false, revision: -1 },
  evolve,
  decide,
};
