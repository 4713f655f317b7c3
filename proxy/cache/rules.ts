import type { CacheControlsRow } from '../../projections/cache-controls.js';
import { statementIdentity } from '../policy/identity.js';
import type { EntryTiming } from './store.js';

/** What a database's override for a statement's shape makes of it: kept out of the cache, or cached for its own times. */
export type ShapeRule = { readonly bypass: true } | { readonly bypass: false; readonly timing: EntryTiming };

/** Each database's cache controls as the proxy's live view holds them (projections/cache-controls.ts). */
export interface CacheControlsView {
  get(databaseId: string): CacheControlsRow | undefined;
}

/**
 * The override of the shape of `sql` (its audit query_hash) on the database; undefined when it has
 * none, so the database's cache_config applies. A database without overrides costs no hashing.
 */
export function shapeRuleOf(controls: CacheControlsRow | undefined, sql: string): ShapeRule | undefined {
  if (!controls) return undefined;
  let any = false;
  for (const _ in controls.rules) {
    any = true;
    break;
  }
  if (!any) return undefined;
  const rule = controls.rules[statementIdentity(sql).query_hash];
  if (!rule) return undefined;
  // A ttl of 0 keeps nothing, as a database's ttl_seconds of 0 does.
  if (rule.cache_enabled === false || rule.cache_ttl_seconds === 0) return { bypass: true };
  const timing = {
    ...(rule.cache_ttl_seconds === null ? {} : { ttlMs: rule.cache_ttl_seconds * 1000 }),
    ...(rule.cache_swr_seconds === null ? {} : { swrMs: rule.cache_swr_seconds * 1000 }),
  };
  return { bypass: false, timing };
}
