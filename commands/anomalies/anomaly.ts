import type { z } from 'zod';
import type { CatalogEvent } from '../../src/events/catalog.js';
import { AnomalyAcknowledged, AnomalyRaised, AnomalyResolved } from '../../src/events/anomalies.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate, type Emit } from '../handle.js';

export type AnomalyStatus = 'none' | 'open' | 'acknowledged' | 'resolved';

/** One alert per stream (`anomaly-<id>`). */
export interface AnomalyState {
  readonly status: AnomalyStatus;
  readonly anomalyId?: string;
}

export type AnomalyCommand =
  /** From the raiser: a second raise of the same window decides nothing, so replays never duplicate. */
  | { readonly kind: 'raise'; readonly anomaly: z.input<typeof AnomalyRaised.schema> }
  | { readonly kind: 'acknowledge'; readonly by: string }
  | { readonly kind: 'resolve'; readonly by: string };

function evolve(state: AnomalyState, event: CatalogEvent): AnomalyState {
  switch (event.type) {
    case AnomalyRaised.type:
      return { status: 'open', anomalyId: event.data.anomaly_id };
    case AnomalyAcknowledged.type:
      return { ...state, status: 'acknowledged' };
    case AnomalyResolved.type:
      return { ...state, status: 'resolved' };
    default:
      return state;
  }
}

/** open → acknowledged → resolved, or open → resolved; anything else is INVALID_STATE. */
function decide(state: AnomalyState, command: AnomalyCommand): Emit[] | DomainError {
  if (command.kind === 'raise') return state.status === 'none' ? [emit(AnomalyRaised, command.anomaly)] : [];
  if (state.status === 'none') return new DomainError('NOT_FOUND', 'anomaly not found');
  const anomalyId = state.anomalyId!;
  if (command.kind === 'acknowledge') {
    if (state.status !== 'open') return new DomainError('INVALID_STATE', `the anomaly is ${state.status}: only an open anomaly can be acknowledged`);
    return [emit(AnomalyAcknowledged, { anomaly_id: anomalyId, acknowledged_by: command.by })];
  }
  if (state.status === 'resolved') return new DomainError('INVALID_STATE', 'the anomaly is resolved already');
  return [emit(AnomalyResolved, { anomaly_id: anomalyId, resolved_by: command.by })];
}

export const anomaly: Aggregate<AnomalyState, AnomalyCommand> = { initial: { status: 'none' }, evolve, decide };
