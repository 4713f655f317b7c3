import { CachePurged, CacheRuleSet } from '../src/events/cache.js';
import { decodeWith } from '../src/events/envelope.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

/** One shape's override as the read model keeps it (commands/cache/cache-controls.ts). */
export type CacheRuleRow = {
  cache_enabled: boolean | null;
  cache_ttl_seconds: number | null;
  cache_swr_seconds: number | null;
  version: number;
  updated_at: string;
};

/**
 * A database's result-cache controls: its shapes' overrides by query hash, and how many purges were
 * asked (a proxy drops the database's entries when the count moves). No row: no override, no purge.
 */
export type CacheControlsRow = {
  database_id: string;
  project_id: string;
  rules: Record<string, CacheRuleRow>;
  purges: number;
  purged_at: string | null;
};

const STREAM = 'cache-';

export function cacheControlsDatabaseOf(event: RecordedEvent): string | undefined {
  return event.stream.startsWith(STREAM) ? event.stream.slice(STREAM.length) : undefined;
}

export function evolveCacheControls(row: CacheControlsRow | undefined, event: RecordedEvent): CacheControlsRow | null {
  if (event.type === CachePurged.type) {
    const { data, metadata } = decodeWith(CachePurged, event);
    return { database_id: data.database_id, project_id: data.project_id, rules: row?.rules ?? {}, purges: (row?.purges ?? 0) + 1, purged_at: metadata.at };
  }
  if (event.type === CacheRuleSet.type) {
    const { data, metadata } = decodeWith(CacheRuleSet, event);
    const { query_hash, cache_enabled, cache_ttl_seconds, cache_swr_seconds } = data;
    const version = (row?.rules[query_hash]?.version ?? 0) + 1;
    const rules = { ...row?.rules, [query_hash]: { cache_enabled, cache_ttl_seconds, cache_swr_seconds, version, updated_at: metadata.at } };
    return { database_id: data.database_id, project_id: data.project_id, rules, purges: row?.purges ?? 0, purged_at: row?.purged_at ?? null };
  }
  return row ?? null;
}

export const cacheControlsProjection = rowProjection<CacheControlsRow>({
  name: 'cache_controls',
  streamPrefixes: [STREAM],
  table: {
    name: 'cache_controls',
    key: 'database_id',
    columnNames: ['database_id', 'project_id', 'rules', 'purges', 'purged_at'],
    columns: 'database_id text primary key, project_id text not null, rules jsonb not null, purges integer not null, purged_at timestamptz',
    orderBy: 'database_id',
  },
  keyOf: cacheControlsDatabaseOf,
  evolve: evolveCacheControls,
});
