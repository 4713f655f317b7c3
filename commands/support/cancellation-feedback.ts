import type { z } from 'zod';
import type { CatalogEvent } from '../../src/events/catalog.js';
import { CancellationFeedbackRecorded } from '../../src/events/support.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate } from '../handle.js';

export const CANCELLATION_FEEDBACK_STREAM = 'cancelfeedback-';

/** One record per stream: feedback is never edited, so a stream of its own never contends. */
export const cancellationFeedback: Aggregate<{ readonly recorded: boolean }, z.input<typeof CancellationFeedbackRecorded.schema>> = {
  initial: { recorded: false },
  evolve: (state, event: CatalogEvent) => (event.type === CancellationFeedbackRecorded.type ? { recorded: true } : state),
  decide: (state, command) => (state.recorded ? new DomainError('RESOURCE_EXISTS', `feedback ${command.feedback_id} already exists`) : [emit(CancellationFeedbackRecorded, command)]),
};
