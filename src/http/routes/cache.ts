import { z } from 'zod';
import { cacheControls, cacheControlsStream, NO_OVERRIDE, type CacheRuleOverride } from '../../../commands/cache/cache-controls.js';
import { evolveCacheControls, type CacheControlsRow } from '../../../projections/cache-controls.js';
import { cacheTotals, findCacheControls, listShapeStats, type ShapeStats } from '../../../queries/cache.js';
import { histogramPercentiles } from '../../audit/latency-buckets.js';
import { queryTypeOf, recommend } from '../../cache/recommendation.js';
import { CacheConfig, defaultCacheConfig } from '../../events/databases.js';
import { QueryHash } from '../../events/cache.js';
import { decodePageToken, PageQuery, paginate } from '../pagination.js';
import { visibleDatabase } from './databases.js';
import { errorResponses, etag, execute, foldStream, IdParam, ifMatch, requireRole, Timestamp, type Api, type ApiDeps } from './support.js';

const DatabaseParams = z.object({ project_id: IdParam('project id'), database_id: IdParam('database id') });
const RuleParams = DatabaseParams.extend({ query_hash: QueryHash.describe('The statement shape’s query_hash, as audit entries name it') });

const CacheSummary = z
  .object({
    total_hits: z.int().describe('Statements answered from the cache (fresh or stale entries), over the audit trail'),
    total_misses: z.int().describe('Statements looked up, not found, and run upstream'),
    hit_rate: z.number().min(0).max(1).describe('total_hits / (total_hits + total_misses); 0 before any'),
  })
  .meta({ id: 'CacheSummary' });

const Seconds = z.int().min(0).max(86_400);

const CacheRuleEntry = z
  .object({
    query_hash: z.string(),
    normalized_sql: z.string().describe('The shape’s text with literals as $N; empty for a shape only overridden, never run'),
    query_type: z.enum(['read', 'write', 'other']),
    cache_enabled: z.boolean().describe('Whether the shape is cached: its override, else the database’s cache_config.enabled'),
    cache_ttl_seconds: Seconds.nullable().describe('Override of ttl_seconds for the shape’s entries; null: the database’s'),
    cache_swr_seconds: Seconds.nullable().describe('Override of swr_seconds for the shape’s entries; null: the database’s'),
    call_count: z.int(),
    avg_latency_ms: z.number(),
    p95_latency_ms: z.number(),
    avg_response_bytes: z.int(),
    stability_rate: z.number().min(0).max(1).describe('The share of refreshes (runs upstream after an earlier one) that returned as many rows and bytes as the run before; 0 before any'),
    recommendation: z.enum(['great', 'good', 'fair', 'poor']).describe('From frequency, latency and stability: docs/cache.md, "Rules and recommendations"'),
    first_seen_at: Timestamp.nullable(),
    last_seen_at: Timestamp.nullable(),
  })
  .meta({ id: 'CacheRuleEntry' });

const UpdateCacheRuleRequest = z
  .strictObject({
    cache_enabled: z.boolean().nullable().describe('false keeps the shape out of the cache, true caches it when the database’s cache is on; null: the database’s'),
    cache_ttl_seconds: Seconds.nullable(),
    cache_swr_seconds: Seconds.nullable(),
  })
  .partial()
  .refine((body) => Object.keys(body).length > 0, { message: 'name at least one field to change' })
  .meta({ title: 'UpdateCacheRuleRequest' });

const CachePurge = z
  .object({ database_id: z.string(), purges: z.int().describe('Purges asked of the database so far, this one included') })
  .meta({ id: 'CachePurge' });

function toCacheRuleEntry(stats: ShapeStats, override: CacheRuleOverride, config: CacheConfig): z.infer<typeof CacheRuleEntry> {
  const queryType = queryTypeOf(stats.statement_kind);
  const avgLatencyMs = stats.timed === 0 ? 0 : stats.latency_us / stats.timed / 1000;
  const stabilityRate = stats.refreshes === 0 ? 0 : stats.same_results / stats.refreshes;
  const p95 = histogramPercentiles(stats.histogram)?.[1] ?? 0;
  return {
    query_hash: stats.query_hash,
    normalized_sql: stats.normalized_sql,
    query_type: queryType,
    cache_enabled: config.enabled && override.cache_enabled !== false,
    cache_ttl_seconds: override.cache_ttl_seconds,
    cache_swr_seconds: override.cache_swr_seconds,
    call_count: stats.calls,
    avg_latency_ms: avgLatencyMs,
    p95_latency_ms: p95 / 1000,
    avg_response_bytes: stats.calls === 0 ? 0 : Math.round(stats.bytes_out / stats.calls),
    stability_rate: stabilityRate,
    recommendation: recommend({ queryType, callCount: stats.calls, avgLatencyMs, stabilityRate, refreshes: stats.refreshes }).recommendation,
    first_seen_at: stats.first_seen,
    last_seen_at: stats.last_seen,
  };
}

const overrideOf = (row: CacheControlsRow | undefined, queryHash: string): CacheRuleOverride => row?.rules[queryHash] ?? NO_OVERRIDE;

const emptyStats = (queryHash: string): ShapeStats => ({
  query_hash: queryHash, normalized_sql: '', statement_kind: '', calls: 0, timed: 0, latency_us: 0, bytes_out: 0, refreshes: 0, same_results: 0, first_seen: null, last_seen: null, histogram: new Map(),
});

const configOf = (stored: unknown): CacheConfig => CacheConfig.safeParse(stored).data ?? defaultCacheConfig;

export function cacheRoutes(app: Api, deps: ApiDeps): void {
  app.get(
    '/v1/projects/:project_id/databases/:database_id/cache',
    {
      schema: {
        operationId: 'getCacheSummary',
        summary: 'A database’s result-cache hits and misses',
        description: 'Counted from the audit trail of the credentials of the database (docs/cache.md).',
        tags: ['cache'],
        params: DatabaseParams,
        response: { 200: CacheSummary, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'viewer');
      const { project_id: projectId, database_id: databaseId } = request.params;
      await visibleDatabase(deps, caller.orgId, projectId, databaseId);
      const { hits, misses } = await cacheTotals(deps.pool, projectId, databaseId);
      return { total_hits: hits, total_misses: misses, hit_rate: hits + misses === 0 ? 0 : hits / (hits + misses) };
    },
  );

  app.get(
    '/v1/projects/:project_id/databases/:database_id/cache/rules',
    {
      schema: {
        operationId: 'listCacheRules',
        summary: 'A database’s statement shapes: their figures, recommendations and overrides',
        description: 'One entry per query_hash the database’s credentials ran or that has an override, in query_hash order.',
        tags: ['cache'],
        params: DatabaseParams,
        querystring: PageQuery,
        response: { 200: z.object({ rules: z.array(CacheRuleEntry), next_page_token: z.string() }), ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request) => {
      const caller = requireRole(request, 'viewer');
      const { project_id: projectId, database_id: databaseId } = request.params;
      const database = await visibleDatabase(deps, caller.orgId, projectId, databaseId);
      const { page_size: size, page_token: token } = request.query;
      const after = decodePageToken(token);
      const stats = await listShapeStats(deps.pool, projectId, databaseId, { ...(after === undefined ? {} : { after }), limit: size + 1 });
      const controls = await findCacheControls(deps.pool, databaseId);
      const page = paginate(stats, size, (row) => row.query_hash);
      const config = configOf(database.cache_config);
      return { rules: page.items.map((row) => toCacheRuleEntry(row, overrideOf(controls, row.query_hash), config)), next_page_token: page.next_page_token };
    },
  );

  app.patch(
    '/v1/projects/:project_id/databases/:database_id/cache/rules/:query_hash',
    {
      schema: {
        operationId: 'updateCacheRule',
        summary: 'Override the result cache for one statement shape',
        description:
          'Sets cache_enabled, cache_ttl_seconds or cache_swr_seconds for the shape (null returns a member to the database’s cache_config); ' +
          'every proxy applies it at the shape’s next statement. The ETag is the override’s version (0 before the first); honours If-Match (412 when it changed since).',
        tags: ['cache'],
        params: RuleParams,
        body: UpdateCacheRuleRequest,
        response: { 200: CacheRuleEntry, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'PRECONDITION_FAILED', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const { project_id: projectId, database_id: databaseId, query_hash: queryHash } = request.params;
      const database = await visibleDatabase(deps, caller.orgId, projectId, databaseId);
      const stream = cacheControlsStream(databaseId);
      const { state } = await execute(deps, request, stream, cacheControls, { kind: 'set_rule', projectId, databaseId, queryHash, change: request.body, ifVersion: ifMatch(request) });
      const override = state.rules.get(queryHash) ?? NO_OVERRIDE;
      const [stats] = await listShapeStats(deps.pool, projectId, databaseId, { only: queryHash, limit: 1 });
      etag(reply, override.version);
      return toCacheRuleEntry(stats ?? emptyStats(queryHash), override, configOf(database.cache_config));
    },
  );

  app.post(
    '/v1/projects/:project_id/databases/:database_id/cache/purge',
    {
      config: { idempotent: true },
      schema: {
        operationId: 'purgeCache',
        summary: 'Drop every result the proxies hold for a database',
        description: 'Recorded as an event every proxy’s live view folds: each drops the database’s entries within moments, in any deployment. A result whose statement started before the purge reached the proxy is not kept.',
        tags: ['cache'],
        params: DatabaseParams,
        response: { 202: CachePurge, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'member');
      const { project_id: projectId, database_id: databaseId } = request.params;
      await visibleDatabase(deps, caller.orgId, projectId, databaseId);
      const stream = cacheControlsStream(databaseId);
      await execute(deps, request, stream, cacheControls, { kind: 'purge', projectId, databaseId });
      const row = await foldStream(deps, stream, evolveCacheControls);
      return reply.code(202).send({ database_id: databaseId, purges: row?.purges ?? 0 });
    },
  );
}
