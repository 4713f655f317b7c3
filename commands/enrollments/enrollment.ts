import type { z } from 'zod';
import type { CatalogEvent } from '../../src/events/catalog.js';
import { SelfHostEnrollmentCreated, SelfHostEnrollmentRevoked } from '../../src/events/enrollments.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate, type Emit } from '../handle.js';

/** One self-host enrollment per stream (`enrollment-<id>`). `revision` is its ETag. */
export interface EnrollmentState {
  readonly exists: boolean;
  readonly revoked: boolean;
  readonly enrollmentId?: string;
  readonly revision: number;
}

export type EnrollmentCommand =
  | { readonly kind: 'create'; readonly enrollment: z.input<typeof SelfHostEnrollmentCreated.schema> }
  | { readonly kind: 'revoke'; readonly ifRevision?: number };

function evolve(state: EnrollmentState, event: CatalogEvent): EnrollmentState {
  switch (event.type) {
    case SelfHostEnrollmentCreated.type:
      return { ...state, exists: true, enrollmentId: event.data.enrollment_id, revision: event.revision };
    case SelfHostEnrollmentRevoked.type:
      return { ...state, revoked: true, revision: event.revision };
    default:
      return state;
  }
}

function decide(state: EnrollmentState, command: EnrollmentCommand): Emit[] | DomainError {
  if (command.kind === 'create') {
    if (state.exists) return new DomainError('RESOURCE_EXISTS', `enrollment ${command.enrollment.enrollment_id} already exists`);
    return [emit(SelfHostEnrollmentCreated, command.enrollment)];
  }
  if (!state.exists) return new DomainError('NOT_FOUND', 'enrollment not found');
  if (command.ifRevision !== undefined && command.ifRevision !== state.revision) {
    return new DomainError('PRECONDITION_FAILED', `the enrollment is at revision ${state.revision}, not ${command.ifRevision}: fetch it again and retry with its ETag`);
  }
  if (state.revoked) return new DomainError('CONFLICT', 'the enrollment is already revoked');
  return [emit(SelfHostEnrollmentRevoked, { enrollment_id: state.enrollmentId! })];
}

export const enrollment: Aggregate<EnrollmentState, EnrollmentCommand> = {
  initial: { exists: false, revoked: false, revision: -1 },
  evolve,
  decide,
};
