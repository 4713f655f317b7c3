import { z } from 'zod';
import { QUERY_HASH_PATTERN } from './audit.js';
import { defineEvent } from './envelope.js';
import { DatabaseId, ProjectId } from './fields.js';

/** A statement shape's audit `query_hash` (never empty here). */
export const QueryHash = z.string().regex(QUERY_HASH_PATTERN).min(16, { message: 'expected a lowercase hex query hash' });

/** Spec §2.10's override bounds: the database's own ttl_seconds and swr_seconds bounds. */
const Seconds = z.int().min(0).max(86_400);

/**
 * A database's override for one statement shape (stream `cache-<database_id>`), replacing the one
 * before: `cache_enabled` false keeps the shape out of the result cache, null follows the
 * database's cache_config; a ttl or swr of null is the database's own.
 */
export const CacheRuleSet = defineEvent(
  'CacheRuleSet',
  1,
  z.strictObject({
    project_id: ProjectId,
    database_id: DatabaseId,
    query_hash: QueryHash,
    cache_enabled: z.boolean().nullable(),
    cache_ttl_seconds: Seconds.nullable(),
    cache_swr_seconds: Seconds.nullable(),
  }),
);
export type CacheRuleSet = z.infer<typeof CacheRuleSet.schema>;

/** Every result a proxy holds for the database was to be dropped (stream `cache-<database_id>`). */
export const CachePurged = defineEvent('CachePurged', 1, z.strictObject({ project_id: ProjectId, database_id: DatabaseId }));
export type CachePurged = z.infer<typeof CachePurged.schema>;
