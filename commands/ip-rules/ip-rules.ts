import type { CatalogEvent } from '../../src/events/catalog.js';
import { IpRulesSet, type StoredCidrEntry } from '../../src/events/ip-rules.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate, type Emit } from '../handle.js';

/**
 * A project's IP rules, one stream per project (`iprules-<project_id>`). They exist implicitly
 * (empty) from the project's creation: `version` counts the replacements, 0 before the first,
 * and is their ETag.
 */
export interface IpRulesState {
  readonly version: number;
  readonly allow: readonly StoredCidrEntry[];
  readonly deny: readonly StoredCidrEntry[];
}

export interface IpRulesCommand {
  readonly projectId: string;
  readonly allow: readonly StoredCidrEntry[];
  readonly deny: readonly StoredCidrEntry[];
  readonly ifVersion?: number;
}

function evolve(state: IpRulesState, event: CatalogEvent): IpRulesState {
  return event.type === IpRulesSet.type ? { version: state.version + 1, allow: event.data.allow, deny: event.data.deny } : state;
}

function decide(state: IpRulesState, command: IpRulesCommand): Emit[] | DomainError {
  if (command.ifVersion !== undefined && command.ifVersion !== state.version) {
    return new DomainError('PRECONDITION_FAILED', `the IP rules are at version ${state.version}, not ${command.ifVersion}: fetch them again and retry with their ETag`);
  }
  // Setting the rules they already are changes nothing, and the ETag stays.
  if (JSON.stringify([command.allow, command.deny]) === JSON.stringify([state.allow, state.deny])) return [];
  return [emit(IpRulesSet, { project_id: command.projectId, allow: [...command.allow], deny: [...command.deny] })];
}

export const ipRules: Aggregate<IpRulesState, IpRulesCommand> = { initial: { version: 0, allow: [], deny: [] }, evolve, decide };

export const ipRulesStream = (projectId: string): string => `iprules-${projectId}`;
