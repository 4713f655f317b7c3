import type { CatalogEvent } from '../../src/events/catalog.js';
import { CachePurged, CacheRuleSet } from '../../src/events/cache.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate, type Emit } from '../handle.js';

/** A shape's override as set; `version` counts its settings (0: never set) and is its ETag. */
export interface CacheRuleOverride {
  readonly cache_enabled: boolean | null;
  readonly cache_ttl_seconds: number | null;
  readonly cache_swr_seconds: number | null;
  readonly version: number;
}

export const NO_OVERRIDE: CacheRuleOverride = { cache_enabled: null, cache_ttl_seconds: null, cache_swr_seconds: null, version: 0 };

/** A database's result-cache controls, one stream per database (`cache-<database_id>`): its shapes' overrides. */
export interface CacheControlsState {
  readonly rules: ReadonlyMap<string, CacheRuleOverride>;
}

export type CacheControlsCommand =
  | {
      readonly kind: 'set_rule';
      readonly projectId: string;
      readonly databaseId: string;
      readonly queryHash: string;
      readonly change: Partial<Omit<CacheRuleOverride, 'version'>>;
      readonly ifVersion?: number;
    }
  | { readonly kind: 'purge'; readonly projectId: string; readonly databaseId: string };

function evolve(state: CacheControlsState, event: CatalogEvent): CacheControlsState {
  if (event.type !== CacheRuleSet.type) return state;
  const { query_hash, cache_enabled, cache_ttl_seconds, cache_swr_seconds } = event.data;
  const version = (state.rules.get(query_hash)?.version ?? 0) + 1;
  return { rules: new Map(state.rules).set(query_hash, { cache_enabled, cache_ttl_seconds, cache_swr_seconds, version }) };
}

function decide(state: CacheControlsState, command: CacheControlsCommand): Emit[] | DomainError {
  const ids = { project_id: command.projectId, database_id: command.databaseId };
  if (command.kind === 'purge') return [emit(CachePurged, ids)];
  const before = state.rules.get(command.queryHash) ?? NO_OVERRIDE;
  if (command.ifVersion !== undefined && command.ifVersion !== before.version) {
    return new DomainError('PRECONDITION_FAILED', `the cache rule is at version ${before.version}, not ${command.ifVersion}: fetch it again and retry with its ETag`);
  }
  const after = { ...before, ...command.change };
  // Setting the override it already is changes nothing, and the ETag stays.
  if (after.cache_enabled === before.cache_enabled && after.cache_ttl_seconds === before.cache_ttl_seconds && after.cache_swr_seconds === before.cache_swr_seconds) return [];
  return [emit(CacheRuleSet, { ...ids, query_hash: command.queryHash, cache_enabled: after.cache_enabled, cache_ttl_seconds: after.cache_ttl_seconds, cache_swr_seconds: after.cache_swr_seconds })];
}

export const cacheControls: Aggregate<CacheControlsState, CacheControlsCommand> = { initial: { rules: new Map() }, evolve, decide };

export const cacheControlsStream = (databaseId: string): string => `cache-${databaseId}`;
