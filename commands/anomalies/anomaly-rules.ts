import type { CatalogEvent } from '../../src/events/catalog.js';
import { AnomalyRulesSet } from '../../src/events/anomalies.js';
import type { StoredRules } from '../../src/events/anomaly-rules.js';
import { canonicalize } from '../../src/crypto/canonical-json.js';
import { emit, type Aggregate, type Emit } from '../handle.js';

/** A project's anomaly rules (`anomalyrules-<project_id>`): the document last set. */
export interface AnomalyRulesState {
  readonly rules?: StoredRules;
}

export type AnomalyRulesCommand = { readonly kind: 'set'; readonly projectId: string; readonly rules: StoredRules };

function evolve(state: AnomalyRulesState, event: CatalogEvent): AnomalyRulesState {
  if (event.type !== AnomalyRulesSet.type) return state;
  const { project_id: _project, ...rules } = event.data;
  return { rules };
}

/** Setting the rules already set decides nothing. */
function decide(state: AnomalyRulesState, command: AnomalyRulesCommand): Emit[] {
  if (state.rules && canonicalize(state.rules) === canonicalize(command.rules)) return [];
  return [emit(AnomalyRulesSet, { project_id: command.projectId, ...command.rules })];
}

export const anomalyRules: Aggregate<AnomalyRulesState, AnomalyRulesCommand> = { initial: {}, evolve, decide };
