/**
 * The hosted MCP `query` tool's use of the result cache (docs/cache.md): the wire's rules (what is
 * cacheable, the key, per-shape overrides, purges), its own store of results as the tool returns
 * them, and invalidations shared with the proxy's caches over the fan-out.
 */
import type { CacheControlsRow } from '../../../projections/cache-controls.js';
import { uncacheable } from '../../../proxy/cache/cacheable.js';
import { purgeOnRequest, ResultCaches, type CacheMetrics } from '../../../proxy/cache/caches.js';
import { upstreamOf } from '../../../proxy/cache/key.js';
import { shapeRuleOf } from '../../../proxy/cache/rules.js';
import { lookupKey, MAX_ENTRY_BYTES, writtenTables } from '../../../proxy/cache/session-cache.js';
import type { CachedResult } from '../../../proxy/cache/store.js';
import { sessionValuesOf } from '../../../proxy/policy/hook.js';
import type { LiveView } from '../../../proxy/views/live-view.js';
import type { TokenCredential } from '../../../queries/credentials.js';
import type { AgentContext } from './context.js';
import type { Allowed } from './gate.js';
import type { Ran } from './run.js';

/** What to do with a statement: answer it with `ran`, run it and `keep` what it returns, or run it past the cache. */
export type AgentCachePlan =
  | { readonly outcome: 'hit' | 'stale'; readonly ran: Ran }
  | { readonly outcome: 'miss'; keep(ran: Ran): void; abandon(): void }
  | { readonly outcome: 'bypass' };

const BYPASS: AgentCachePlan = { outcome: 'bypass' };

// The API process exports no cache metrics of its own yet: the audit trail counts MCP outcomes.
const UNCOUNTED: CacheMetrics = { lookup: () => undefined, skipped: () => undefined, evicted: () => undefined, bytes: () => undefined };

/**
 * The hosted MCP's result cache. The per-shape rules and purges come from a live view of the
 * `cache-` streams, as the proxy's do: a cacheable call reads nothing for them, and a change reaches
 * the view when the event store's notification of its append does (docs/cache.md).
 */
export class AgentCache {
  /** Each database's cache_config as last read. */
  private readonly configs = new Map<string, unknown>();
  readonly caches = new ResultCaches((databaseId) => this.configs.get(databaseId), UNCOUNTED);
  private started: Promise<void> | undefined;

  constructor(private readonly controls: LiveView<CacheControlsRow>) {
    // A purge (POST .../cache/purge) the view folds drops the database's entries.
    purgeOnRequest(controls, this.caches);
  }

  /** Whether the view has caught up; a view that could not start is started again at the next call. */
  private async following(): Promise<boolean> {
    this.started ??= this.controls.start();
    try {
      await this.started;
      return true;
    } catch {
      this.started = undefined;
      return false;
    }
  }

  async stop(): Promise<void> {
    await this.controls.stop();
  }

  /** Looks an allowed statement up; each call is its own transaction, with no session state, so only the statement decides. */
  async plan(context: AgentContext, sql: string, decision: Allowed, catalogVersion: string, params: readonly (string | null)[], maxRows: number): Promise<AgentCachePlan> {
    const { policy, credential } = context;
    const databaseId = credential.database_id;
    // A sandboxed credential's statements run on a branch, not on the database the key names.
    if (!policy || context.upstream.branch || uncacheable(sql, decision, { inTransaction: false, pinned: false })) return BYPASS;
    const database = await context.services.databases.database(credential, context.upstream).catch(() => undefined);
    // Without the view no purge or override could be seen: the statement bypasses the cache.
    if (!(await this.following())) return BYPASS;
    this.configs.set(databaseId, database?.cache_config);
    // As on the wire: a replica's result may lag a write the cache saw, so a database that routes reads caches nothing.
    if (database?.auto_read_routing) return BYPASS;
    const store = database && this.caches.storeOf(databaseId);
    const rule = shapeRuleOf(this.controls.get(databaseId), sql);
    if (!store || rule?.bypass === true) return BYPASS;
    const key = lookupKey({
      decision,
      policy,
      databaseId,
      upstream: upstreamOf(database),
      catalogVersion,
      sessionValues: sessionValuesOf(credential),
      protocol: 'mcp',
      wire: { params: params.map((value) => (value === null ? null : Buffer.from(value))), maxRows },
    });
    const found = store.lookup(key);
    if (found.outcome !== 'miss') return { outcome: found.outcome, ran: JSON.parse(found.result.reply.toString()) as Ran };
    const generation = store.generation;
    return {
      outcome: 'miss',
      keep(ran) {
        const reply = Buffer.from(JSON.stringify(ran));
        if (ran.rolledBack || reply.length > MAX_ENTRY_BYTES) return store.abandon(key);
        // uncacheable() let no unbounded reach through.
        const result: CachedResult = { reply, rows: ran.result.rows.length, tables: decision.readsReach as readonly string[] };
        store.store(key, result, generation, rule?.timing);
      },
      abandon: () => store.abandon(key),
    };
  }

  /**
   * A statement of `credential` that may write is about to run, or ran: the entries that read what
   * it writes go, here and in every process the fan-out reaches, where the note also holds the
   * credential's wire reads on the primary (docs/replicas.md). Resolves once the note left this
   * process, so a caller that answers after it has the other processes told by the client's next read.
   */
  async wrote(credential: Pick<TokenCredential, 'database_id' | 'credential_id'>, decision: Allowed): Promise<void> {
    const tables = writtenTables(decision);
    if (tables === null) return;
    this.caches.invalidate(credential.database_id, tables, credential.credential_id);
    await this.caches.flushed();
  }
}
